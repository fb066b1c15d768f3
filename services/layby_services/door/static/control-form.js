// form: a field per property of the JSON schema — text, email and date inputs, numbers,
// checkboxes, selects for enums and per-send options (`data.options`), a JSON text area for nested
// values — prefilled from `data.values` or defaults and split into steps by `pages`. Each field is
// checked in plain words before sending; the door remains the authority
// (docs/doors/inbox-page.md#answering-from-the-page).

import { showError, submit } from "./answer.js";
import { el } from "./helpers.js";

export const form = { build: buildForm };

function buildForm(card, payload) {
  const schema = payload.schema || {};
  const data = payload.data || {};
  const values = data.values || {};
  const perSend = data.options || {};
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  const id = card.item.interaction_id;
  const form = el("form", { novalidate: true });
  const fields = {};
  const names = Object.keys(props);
  const pages = Array.isArray(payload.pages) && payload.pages.length ? payload.pages : [{ title: null, fields: names }];

  const buildField = (name) => {
    const prop = props[name] || {};
    const inputId = `${id}-f-${name}`;
    const title = prop.title || name;
    const wrap = el("div", { class: "field", "data-field": name });
    const initial = name in values ? values[name] : prop.default;
    const errId = `${inputId}-err`;
    let input;
    const choices = perSend[name] || (Array.isArray(prop.enum) ? prop.enum.map((v) => ({ value: v })) : null);
    if (prop.type === "boolean") {
      input = el("input", { type: "checkbox", id: inputId, name, "aria-describedby": errId });
      input.checked = initial === true;
      wrap.append(el("label", { class: "choice", for: inputId }, input, document.createTextNode(title)));
    } else {
      wrap.append(el("label", { for: inputId, text: title + (required.has(name) ? " (required)" : "") }));
      if (choices) {
        input = el("select", { id: inputId, name, "aria-describedby": errId, required: required.has(name) });
        input.append(el("option", { value: "", text: "—" }));
        for (const c of choices) {
          const option = el("option", { value: JSON.stringify(c.value), text: c.label ?? String(c.value) });
          if (initial !== undefined && JSON.stringify(initial) === JSON.stringify(c.value)) option.selected = true;
          input.append(option);
        }
      } else if (prop.type === "integer" || prop.type === "number") {
        input = el("input", { type: "number", id: inputId, name, step: prop.type === "integer" ? "1" : "any", "aria-describedby": errId, required: required.has(name) });
        if (initial !== undefined) input.value = String(initial);
      } else if (prop.type === "string" || !prop.type) {
        const type = prop.format === "email" ? "email" : prop.format === "date" ? "date" : "text";
        input = el("input", { type, id: inputId, name, "aria-describedby": errId, required: required.has(name) });
        if (initial !== undefined) input.value = String(initial);
      } else {
        input = el("textarea", { id: inputId, name, "aria-describedby": errId, "data-json": "1" });
        input.value = initial !== undefined ? JSON.stringify(initial, null, 2) : "";
        wrap.append(el("p", { class: "hint", text: "JSON" }));
      }
      wrap.append(input);
    }
    if (prop.description) wrap.append(el("p", { class: "hint", text: prop.description }));
    wrap.append(el("p", { class: "error field-error", id: errId, role: "alert", hidden: true }));
    fields[name] = { input, prop, wrap, choices };
    return wrap;
  };

  const steps = pages.map((page, index) => {
    const step = el("fieldset", { class: "step", "data-step": index });
    step.append(el("legend", { text: page.title || (pages.length > 1 ? `Step ${index + 1} of ${pages.length}` : "Answer") }));
    for (const name of page.fields || []) step.append(buildField(name));
    step.hidden = index !== 0;
    return step;
  });
  form.append(...steps);
  let current = 0;
  const back = el("button", { type: "button", class: "secondary", text: "Back", hidden: true });
  const next = el("button", { type: "button", text: "Next", hidden: steps.length < 2 });
  const send = el("button", { type: "submit", text: "Answer", hidden: steps.length > 1 });
  const show = (i) => {
    steps.forEach((s, k) => (s.hidden = k !== i));
    current = i;
    back.hidden = i === 0;
    next.hidden = i === steps.length - 1;
    send.hidden = i !== steps.length - 1;
    const first = steps[i].querySelector("input, select, textarea");
    if (first) first.focus();
  };
  back.addEventListener("click", () => show(current - 1));
  next.addEventListener("click", () => show(current + 1));
  form.append(el("div", { class: "actions" }, back, next, send));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const answer = {};
    for (const [name, { input, prop }] of Object.entries(fields)) {
      if (prop.type === "boolean") {
        answer[name] = input.checked;
        continue;
      }
      const raw = input.value;
      if (raw === "") continue;
      if (input.tagName === "SELECT") answer[name] = JSON.parse(raw);
      else if (prop.type === "integer" || prop.type === "number") answer[name] = Number(raw);
      else if (input.dataset.json) {
        try {
          answer[name] = JSON.parse(raw);
        } catch {
          return showError(card, "This field must be JSON.", name);
        }
      } else answer[name] = raw;
    }
    // Plain-language checks at the field before sending; the door stays the authority.
    for (const [name, { input, prop, choices }] of Object.entries(fields)) {
      const problem = checkField(name, prop, answer[name], required.has(name), input, choices);
      if (problem) {
        const step = steps.findIndex((st) => st.contains(fields[name].wrap));
        if (step >= 0 && step !== current) show(step);
        return showError(card, problem, name);
      }
    }
    submit(card, answer, (field) => {
      const name = field && field.split(".")[0].replace(/\[.*$/, "");
      const found = name && fields[name];
      if (found) {
        const step = steps.findIndex((s) => s.contains(found.wrap));
        if (step >= 0 && step !== current) show(step);
      }
      return found ? name : null;
    });
  });
  return form;
}

function fieldTitle(name, prop) {
  return (prop && prop.title) || name;
}

// The first thing wrong with one form field's value, in plain words, or null. `choices` are the
// options the field offered: this send's `data.options` for it, else its schema's `enum` — the
// effective schema the door checks the answer against (docs/asking.md#effective-schema).
function checkField(name, prop, value, isRequired, input, choices) {
  const title = fieldTitle(name, prop);
  if (value === undefined) return isRequired && prop.type !== "boolean" ? `Enter ${title}.` : null;
  if ((prop.type === "integer" || prop.type === "number") && Number.isNaN(value)) return `${title} must be a number.`;
  if (prop.type === "integer" && !Number.isInteger(value)) return `${title} must be a whole number.`;
  if (typeof value === "number") {
    if (prop.minimum !== undefined && value < prop.minimum) return `${title} must be at least ${prop.minimum}.`;
    if (prop.maximum !== undefined && value > prop.maximum) return `${title} must be at most ${prop.maximum}.`;
  }
  if (typeof value === "string") {
    if (prop.minLength !== undefined && value.length < prop.minLength) return `${title} must be at least ${prop.minLength} characters.`;
    if (prop.maxLength !== undefined && value.length > prop.maxLength) return `${title} must be at most ${prop.maxLength} characters.`;
    if (prop.format === "email" && input && input.validity && input.validity.typeMismatch) return `Enter an email address for ${title}.`;
    if (prop.pattern) {
      let re = null;
      try {
        re = new RegExp(prop.pattern, "u");
      } catch {
        re = null; // a pattern the browser cannot read: the door checks it
      }
      if (re && !re.test(value)) return `${title} is not in the expected form.`;
    }
  }
  if (choices && !choices.some((c) => JSON.stringify(c.value) === JSON.stringify(value))) {
    return `Choose one of the options for ${title}.`;
  }
  return null;
}

// A door's schema message, said plainly and pinned to the field it names when it names one.
export function plainDoorError(card, message, field) {
  const props = ((card.item.format_payload || {}).schema || {}).properties || {};
  const missing = /^answer does not match schema: '([^']+)' is a required property/.exec(message || "");
  if (missing) return { field: missing[1], message: `Enter ${fieldTitle(missing[1], props[missing[1]])}.` };
  const name = field && field.split(".")[0].replace(/\[.*$/, "");
  if (name && props[name] && / does not match /.test(message || "")) {
    return { field: name, message: `${fieldTitle(name, props[name])} is not in the expected form.` };
  }
  return { field, message };
}
