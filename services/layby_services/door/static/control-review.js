// review: the proposed action (its name, description and arguments as readable JSON) and the
// decisions the question allows. Accept names the proposal's hash; an edit is previewed as the
// list of changed keys, before and after, and sent by a second press; reject takes an optional
// reason, respond a text (docs/review.md#in-the-inbox).

import { showError, submit } from "./answer.js";
import { el } from "./helpers.js";

const show = (value) => JSON.stringify(value);

// The keys whose values differ, each as "key: before → after".
export function changes(before, after) {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return keys
    .filter((k) => show(before[k]) !== show(after[k]))
    .map((k) => `${k}: ${k in before ? show(before[k]) : "(none)"} \u2192 ${k in after ? show(after[k]) : "(removed)"}`);
}

export const review = {
  build(card, payload) {
    const action = payload.action || {};
    const args = action.arguments || {};
    const hash = payload.arguments_sha256;
    const allowed = new Set(payload.decisions || []);
    const pretty = JSON.stringify(args, null, 2);
    const wrap = el("div", { class: "review" });
    wrap.append(el("p", { class: "review-action", text: action.name || "" }));
    if (action.description) wrap.append(el("p", { class: "review-description", text: action.description }));
    wrap.append(el("pre", { class: "review-arguments", text: pretty }));
    const actions = el("div", { class: "actions", role: "group", "aria-label": "Decision" });
    if (allowed.has("accept")) {
      actions.append(
        el("button", { type: "button", onclick: () => submit(card, { decision: "accept", arguments_sha256: hash }), text: "Accept" }),
      );
    }
    wrap.append(actions);
    if (allowed.has("edit")) {
      const area = el("textarea", { class: "review-edit", rows: 8, "aria-label": "Edited arguments (JSON)" });
      area.value = pretty;
      const diff = el("ul", { class: "review-diff", "aria-live": "polite" });
      let previewed = null;
      const send = el("button", { type: "button", class: "secondary", text: "Edit" });
      send.addEventListener("click", () => {
        let edited;
        try {
          edited = JSON.parse(area.value);
        } catch (e) {
          showError(card, `The arguments are not valid JSON: ${e.message}`);
          return;
        }
        if (edited === null || typeof edited !== "object" || Array.isArray(edited)) {
          showError(card, "The arguments must be a JSON object.");
          return;
        }
        if (previewed !== null && show(previewed) === show(edited)) {
          submit(card, { decision: "edit", arguments: edited, arguments_sha256: hash });
          return;
        }
        previewed = edited;
        const rows = changes(args, edited);
        diff.replaceChildren(...(rows.length ? rows : ["Nothing changed."]).map((r) => el("li", { text: r })));
        send.textContent = "Send the edit";
      });
      wrap.append(el("details", {}, el("summary", { text: "Edit the arguments" }), area, diff, send));
    }
    if (allowed.has("reject")) {
      const reason = el("input", { type: "text", class: "review-reason", placeholder: "Reason (optional)", "aria-label": "Reason" });
      const reject = () => {
        const why = reason.value.trim();
        submit(card, why ? { decision: "reject", reason: why } : { decision: "reject" });
      };
      actions.append(reason, el("button", { type: "button", class: "secondary", onclick: reject, text: "Reject" }));
    }
    if (allowed.has("respond")) {
      const text = el("input", { type: "text", class: "review-respond", placeholder: "Answer in words", "aria-label": "Response" });
      const respond = () => {
        if (!text.value.trim()) return showError(card, "Write a response first.");
        submit(card, { decision: "respond", text: text.value.trim() });
      };
      wrap.append(el("div", { class: "actions" }, text, el("button", { type: "button", class: "secondary", onclick: respond, text: "Respond" })));
    }
    return wrap;
  },
};
