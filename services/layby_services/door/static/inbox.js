// The Layby inbox: the pending questions, live (issue 5).
// Seeded from GET /api/interactions, kept live by GET /api/interactions/stream (SSE read over
// fetch, so the bearer token travels in a header), reconnecting with Last-Event-ID and
// refetching the first page. Every text from the server is set as text, never parsed as HTML.

const TOKEN_KEY = "layby.token";
const PAGE_SIZE = 200;
const EXPIRED = "layby:interaction_expired";

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  cards: new Map(), // interaction_id -> {item, status, el, answeredAt, by}
  lastEventId: null,
  abort: null,
  total: 0,
  nextPage: null,
};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function setStatus(text) {
  $("status").textContent = text;
}

// -- sign-in ----------------------------------------------------------------------------

function showSignIn(message) {
  stopStream();
  $("inbox").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in").hidden = false;
  const err = $("sign-in-error");
  err.hidden = !message;
  err.textContent = message || "";
  $("token").focus();
}

async function signIn(token) {
  state.token = token;
  const ok = await loadFirstPage();
  if (!ok) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  $("sign-in").hidden = true;
  $("inbox").hidden = false;
  $("sign-out").hidden = false;
  startStream();
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.cards.clear();
  $("groups").replaceChildren();
  showSignIn("");
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${state.token}`, ...extra };
}

// -- the paged list ---------------------------------------------------------------------

async function loadFirstPage() {
  let resp;
  try {
    resp = await fetch(`/api/interactions?page=1&pageSize=${PAGE_SIZE}`, { headers: headers(), cache: "no-store" });
  } catch {
    setStatus("The server cannot be reached; retrying…");
    return false;
  }
  if (resp.status === 401) {
    showSignIn("That token was refused.");
    return false;
  }
  if (!resp.ok) {
    setStatus(`The inbox could not be loaded (${resp.status}).`);
    return false;
  }
  const body = await resp.json();
  const pending = new Set();
  for (const item of body.data.items) {
    pending.add(item.interaction_id);
    upsert(item);
  }
  // A card this page showed as pending that the first page no longer lists was resolved while
  // we were away (when everything fits on one page, that is certain).
  if (body.data.total <= PAGE_SIZE) {
    for (const [id, card] of state.cards) {
      if (card.status === "pending" && !pending.has(id)) resolve(id, "answered", null);
    }
  }
  state.total = body.data.total;
  state.nextPage = body.data.next_page;
  render();
  return true;
}

async function loadMore() {
  if (!state.nextPage) return;
  const button = $("more");
  button.disabled = true;
  try {
    const resp = await fetch(`/api/interactions?page=${state.nextPage}&pageSize=${PAGE_SIZE}`, {
      headers: headers(),
      cache: "no-store",
    });
    if (resp.ok) {
      const body = await resp.json();
      for (const item of body.data.items) upsert(item);
      state.total = body.data.total;
      state.nextPage = body.data.next_page;
      render();
    }
  } finally {
    button.disabled = false;
  }
}

// -- the stream -------------------------------------------------------------------------

function stopStream() {
  if (state.abort) state.abort.abort();
  state.abort = null;
}

async function startStream() {
  stopStream();
  const abort = new AbortController();
  state.abort = abort;
  let delay = 500;
  while (!abort.signal.aborted) {
    try {
      const extra = state.lastEventId ? { "Last-Event-ID": state.lastEventId } : {};
      const resp = await fetch("/api/interactions/stream", {
        headers: headers({ Accept: "text/event-stream", ...extra }),
        signal: abort.signal,
        cache: "no-store",
      });
      if (resp.status === 401) {
        showSignIn("The token is no longer accepted.");
        return;
      }
      if (!resp.ok || !resp.body) throw new Error(`stream ${resp.status}`);
      setStatus("Live");
      delay = 500;
      await readEvents(resp.body, abort.signal);
    } catch (err) {
      if (abort.signal.aborted) return;
    }
    setStatus("Reconnecting…");
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10000);
    if (!abort.signal.aborted) await loadFirstPage();
  }
}

async function readEvents(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let frame = {};
  while (!signal.aborted) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, cut).replace(/\r$/, "");
      buffer = buffer.slice(cut + 1);
      if (line === "") {
        if (frame.data !== undefined) dispatch(frame);
        frame = {};
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const key = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        frame[key] = key === "data" && frame.data !== undefined ? `${frame.data}\n${val}` : val;
      }
    }
  }
}

function dispatch(frame) {
  if (frame.id) state.lastEventId = frame.id;
  let data;
  try {
    data = JSON.parse(frame.data);
  } catch {
    return;
  }
  if (frame.event === "interaction.add") {
    upsert(data);
    state.total += 1;
  } else if (frame.event === "interaction.answered") {
    resolve(data.interaction_id, "answered", null);
  } else if (frame.event === "interaction.removed") {
    resolve(data.interaction_id, "removed", null);
  }
  render();
}

// -- cards ------------------------------------------------------------------------------

function upsert(item) {
  const existing = state.cards.get(item.interaction_id);
  if (existing) {
    existing.item = item;
    return;
  }
  state.cards.set(item.interaction_id, { item, status: "pending", el: null, answeredAt: null, by: null });
}

function resolve(id, status, by) {
  const card = state.cards.get(id);
  if (!card || card.status !== "pending") return;
  card.status = status;
  card.answeredAt = new Date();
  card.by = by;
  if (card.el) updateCard(card);
}

function render() {
  const byGroup = new Map();
  for (const card of state.cards.values()) {
    const gid = card.item.group_id;
    if (!byGroup.has(gid)) byGroup.set(gid, []);
    byGroup.get(gid).push(card);
  }
  const activity = (cards) => Math.max(...cards.map((c) => Date.parse(c.item.created_at) || 0));
  const groups = [...byGroup.entries()].sort((a, b) => activity(b[1]) - activity(a[1]));
  const root = $("groups");
  const keep = document.activeElement;
  const nodes = [];
  for (const [gid, cards] of groups) {
    cards.sort((a, b) => Date.parse(a.item.created_at) - Date.parse(b.item.created_at));
    let group = root.querySelector(`section[data-group="${CSS.escape(gid)}"]`);
    if (!group) {
      group = el("section", { class: "group", "data-group": gid, "aria-label": cards.length > 1 ? "Related questions" : "Question" });
    }
    const children = cards.map((c) => c.el || (c.el = buildCard(c)));
    if (children.some((node, i) => group.children[i] !== node) || group.children.length !== children.length) {
      group.replaceChildren(...children);
    }
    nodes.push(group);
  }
  if (nodes.some((node, i) => root.children[i] !== node) || root.children.length !== nodes.length) {
    root.replaceChildren(...nodes);
  }
  if (keep && document.contains(keep) && document.activeElement !== keep) keep.focus();
  const open = [...state.cards.values()].filter((c) => c.status === "pending").length;
  $("count").textContent = `(${open} open${state.total > open ? ` of ${state.total}` : ""})`;
  $("empty").hidden = state.cards.size > 0;
  $("more").hidden = !state.nextPage;
}

function relative(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

function buildCard(card) {
  const item = card.item;
  const id = item.interaction_id;
  const node = el("article", { class: "card", "data-id": id, "aria-labelledby": `q-${id}` });
  node.append(el("p", { class: "question", id: `q-${id}`, text: item.question }));
  const meta = el("p", { class: "meta" });
  if (item.asked_by) meta.append(el("span", { text: `asked by ${item.asked_by}` }));
  if (item.audience) meta.append(el("span", { text: `for ${item.audience}` }));
  meta.append(el("span", { class: "age", "data-created": item.created_at }));
  meta.append(el("span", { class: "deadline", "data-deadline": item.timeout_at }));
  node.append(meta);
  if (item.media && item.media.length) node.append(buildMedia(item.media));
  const body = el("div", { class: "controls" });
  body.append(buildControl(card));
  node.append(body);
  node.append(el("p", { class: "error card-error", role: "alert", hidden: true }));
  node.append(el("p", { class: "outcome", "aria-live": "polite" }));
  card.el = node;
  updateCard(card);
  tickCard(card);
  return node;
}

function buildMedia(media) {
  const box = el("div", { class: "media" });
  for (const m of media) {
    const caption = m.caption || "";
    if (m.kind === "image") {
      box.append(el("img", { src: m.url, alt: caption, loading: "lazy" }));
    } else if (m.kind === "video") {
      box.append(el("video", { src: m.url, controls: true, preload: "metadata", "aria-label": caption || "video" }));
    } else if (m.kind === "audio") {
      box.append(el("audio", { src: m.url, controls: true, preload: "metadata", "aria-label": caption || "audio" }));
    } else if (m.kind === "document") {
      box.append(el("a", { href: m.url, download: m.filename || "", rel: "noopener noreferrer", text: caption || m.filename || "Document" }));
    } else {
      box.append(el("a", { href: m.url, target: "_blank", rel: "noopener noreferrer", text: caption || m.url }));
    }
  }
  return box;
}

function updateCard(card) {
  const node = card.el;
  node.classList.toggle("answered", card.status === "answered");
  node.classList.toggle("removed", card.status === "removed");
  const outcome = node.querySelector(".outcome");
  if (card.status === "pending") {
    outcome.textContent = "";
    outcome.className = "outcome";
    return;
  }
  for (const c of node.querySelectorAll(".controls input, .controls select, .controls textarea, .controls button")) {
    c.disabled = true;
  }
  const when = card.answeredAt ? card.answeredAt.toLocaleTimeString() : "";
  if (card.status === "answered") {
    outcome.className = "outcome done";
    outcome.textContent = card.by ? `Answered by ${card.by} at ${when}` : `Answered elsewhere at ${when}`;
  } else {
    outcome.className = "outcome gone";
    outcome.textContent = `No longer waiting (withdrawn at ${when})`;
  }
}

function tickCard(card) {
  const node = card.el;
  if (!node) return;
  const now = Date.now();
  const age = node.querySelector(".age");
  age.textContent = `asked ${relative(now - Date.parse(card.item.created_at))} ago`;
  const deadline = node.querySelector(".deadline");
  const left = Date.parse(card.item.timeout_at) - now;
  deadline.textContent = left > 0 ? `${relative(left)} left` : "deadline passed";
  deadline.classList.toggle("soon", left < 5 * 60 * 1000);
}

setInterval(() => {
  for (const card of state.cards.values()) if (card.status === "pending") tickCard(card);
}, 1000);

// -- controls ---------------------------------------------------------------------------

function buildControl(card) {
  const item = card.item;
  const fmt = item.answer_format;
  const payload = item.format_payload || {};
  const id = item.interaction_id;
  if (fmt === "confirm") {
    const wrap = el("div", { class: "actions", role: "group", "aria-label": "Answer" });
    wrap.append(
      el("button", { type: "button", onclick: () => submit(card, true), text: "Yes" }),
      el("button", { type: "button", class: "secondary", onclick: () => submit(card, false), text: "No" }),
    );
    return wrap;
  }
  if (fmt === "select") {
    const form = el("form", { novalidate: true });
    const set = el("fieldset", {}, el("legend", { text: "Choose one" }));
    (payload.options || []).forEach((opt, i) => {
      const inputId = `${id}-opt-${i}`;
      set.append(
        el("label", { class: "choice", for: inputId },
          el("input", { type: "radio", name: "choice", id: inputId, value: opt, required: true }),
          document.createTextNode(opt)),
      );
    });
    form.append(set, el("div", { class: "actions" }, el("button", { type: "submit", text: "Answer" })));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const chosen = form.querySelector("input[name=choice]:checked");
      if (!chosen) return showError(card, "Choose one of the options.", null);
      submit(card, chosen.value);
    });
    return form;
  }
  if (fmt === "form") return buildForm(card, payload);
  if (fmt === "external") {
    const wrap = el("div", { class: "external" });
    if (payload.url) {
      wrap.append(el("a", { href: payload.url, target: "_blank", rel: "noopener noreferrer", text: "Open the page to act on" }));
    }
    wrap.append(el("p", { class: "hint", text: item.server_verified
      ? "The answer arrives from the outside system (signature verified)."
      : "The answer arrives from the outside system." }));
    return wrap;
  }
  // text, with suggested replies as one-tap chips
  const form = el("form", { novalidate: true });
  const inputId = `${id}-text`;
  form.append(el("label", { for: inputId, text: "Your answer" }));
  const area = el("textarea", { id: inputId, name: "answer" });
  form.append(area);
  if (payload.options && payload.options.length) {
    const chips = el("div", { class: "chips", role: "group", "aria-label": "Suggested replies" });
    for (const opt of payload.options) chips.append(el("button", { type: "button", onclick: () => submit(card, opt), text: opt }));
    form.append(chips);
  }
  form.append(el("div", { class: "actions" }, el("button", { type: "submit", text: "Answer" })));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    submit(card, area.value);
  });
  return form;
}

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
    fields[name] = { input, prop, wrap };
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

function clearErrors(card) {
  for (const e of card.el.querySelectorAll(".error")) {
    e.hidden = true;
    e.textContent = "";
  }
  for (const i of card.el.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
}

function showError(card, message, field) {
  clearErrors(card);
  const wrap = field ? card.el.querySelector(`.field[data-field="${CSS.escape(field)}"]`) : null;
  if (wrap) {
    const err = wrap.querySelector(".field-error");
    err.textContent = message;
    err.hidden = false;
    const input = wrap.querySelector("input, select, textarea");
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
    return;
  }
  const err = card.el.querySelector(".card-error");
  err.textContent = message;
  err.hidden = false;
}

async function submit(card, answer, locate = () => null) {
  if (card.status !== "pending") return;
  clearErrors(card);
  const buttons = card.el.querySelectorAll(".controls button");
  buttons.forEach((b) => (b.disabled = true));
  let resp;
  try {
    resp = await fetch(`/api/interactions/${encodeURIComponent(card.item.interaction_id)}/answer`, {
      method: "POST",
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify({ answer }),
    });
  } catch {
    buttons.forEach((b) => (b.disabled = false));
    return showError(card, "The server cannot be reached; try again.", null);
  }
  if (resp.ok) {
    // 200 means this answer won, even if the stream's answered frame arrived first.
    card.status = "answered";
    card.by = "you";
    card.answeredAt = card.answeredAt || new Date();
    updateCard(card);
    render();
    return;
  }
  let body = {};
  try {
    body = await resp.json();
  } catch {
    body = {};
  }
  if (resp.status === 409 || resp.status === 404) {
    resolve(card.item.interaction_id, resp.status === 409 ? "answered" : "removed", null);
    render();
    return;
  }
  if (resp.status === 401) return showSignIn("The token is no longer accepted.");
  buttons.forEach((b) => (b.disabled = false));
  const field = body.field ? locate(body.field) : null;
  showError(card, body.error || `The answer was refused (${resp.status}).`, field);
}

// -- start ------------------------------------------------------------------------------

$("sign-in-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const token = $("token").value.trim();
  if (!token) return showSignIn("Enter a token.");
  signIn(token);
});
$("sign-out").addEventListener("click", signOut);
$("more").addEventListener("click", loadMore);

if (state.token) signIn(state.token);
else showSignIn("");
