// The Layby inbox: the pending questions, live (issue 5).
// Seeded from GET /api/interactions, kept live by GET /api/interactions/stream (SSE read over
// fetch, so the bearer token travels in a header), reconnecting with Last-Event-ID. Each time the
// stream (re)connects, the first page is loaded again *at least as far as the stream starts*
// (`after=`, docs/doors/list.md#seeding-the-stream), so nothing recorded between the two is
// missed; the list says which stream sequence it reflects (Layby-Stream-Seq), and only frames
// after it change the count. Every text from the server is set as text, never parsed as HTML.

const TOKEN_KEY = "layby.token";
const PAGE_SIZE = 200;
const EXPIRED = "layby:interaction_expired";

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  cards: new Map(), // interaction_id -> {item, status, el, answeredAt, by}
  lastEventId: null,
  abort: null,
  total: 0, // pending questions this identity may see, all of them, loaded or not
  listSeq: 0, // the stream sequence the loaded list reflects
  nextPage: null,
  refresh: null,
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

function emit(name, detail = {}) {
  document.dispatchEvent(new CustomEvent(name, { detail }));
}

function showSignIn(message) {
  stopStream();
  $("inbox").hidden = true;
  $("runs").hidden = true;
  $("views").hidden = true;
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
  $("sign-out").hidden = false;
  $("views").hidden = false;
  emit("layby:signed-in", { token });
  showView();
  startStream();
}

// -- views: the inbox (#inbox, the default) and the runs dashboard (#runs, runs.js) -------

function currentView() {
  return location.hash === "#runs" ? "runs" : "inbox";
}

function showView() {
  if (!state.token) return;
  const view = currentView();
  $("inbox").hidden = view !== "inbox";
  $("runs").hidden = view !== "runs";
  for (const [tab, name] of [["tab-inbox", "inbox"], ["tab-runs", "runs"]]) {
    if (name === view) $(tab).setAttribute("aria-current", "page");
    else $(tab).removeAttribute("aria-current");
  }
  emit("layby:view", { view });
}

window.addEventListener("hashchange", showView);
document.addEventListener("layby:unauthorized", (e) => showSignIn((e.detail && e.detail.message) || "The token is no longer accepted."));

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.cards.clear();
  $("groups").replaceChildren();
  emit("layby:signed-out");
  showSignIn("");
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${state.token}`, ...extra };
}

// -- the paged list ---------------------------------------------------------------------

async function loadFirstPage(after = null) {
  let resp;
  const seed = after === null ? "" : `&after=${after}`;
  try {
    resp = await fetch(`/api/interactions?page=1&pageSize=${PAGE_SIZE}${seed}`, { headers: headers(), cache: "no-store" });
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
  state.listSeq = Number(resp.headers.get("Layby-Stream-Seq")) || 0;
  state.nextPage = body.data.next_page;
  render();
  return true;
}

// A question resolved that this page never loaded (it lies past the first page): whether the
// total counted it is the server's to say. Ask for the total again, at least as far as the stream.
function refreshTotalSoon() {
  if (state.refresh) return;
  state.refresh = setTimeout(async () => {
    state.refresh = null;
    try {
      const after = state.lastEventId ? `&after=${state.lastEventId}` : "";
      const resp = await fetch(`/api/interactions?page=1&pageSize=1${after}`, { headers: headers(), cache: "no-store" });
      if (!resp.ok) return;
      const body = await resp.json();
      state.total = body.data.total;
      state.listSeq = Math.max(state.listSeq, Number(resp.headers.get("Layby-Stream-Seq")) || 0);
      render();
    } catch {
      // the next reconnect reloads the list anyway
    }
  }, 300);
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
      // The stream's frames follow this sequence; the list is loaded at least that far, so a
      // question recorded between the two is in one or the other (frames wait in the body).
      const from = Number(resp.headers.get("Layby-Stream-Seq"));
      if (!Number.isNaN(from)) await loadFirstPage(from);
      setStatus("Live");
      delay = 500;
      await readEvents(resp.body, abort.signal);
    } catch (err) {
      if (abort.signal.aborted) return;
    }
    setStatus("Reconnecting…");
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10000);
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
  emit("layby:frame", { event: frame.event, id: frame.id, data });
  // A frame the loaded list already reflects updates its card; only a later one moves the count.
  const counts = Number(frame.id) > state.listSeq;
  if (frame.event === "interaction.add") {
    upsert(data);
    if (counts) state.total += 1;
  } else if (frame.event === "interaction.answered" || frame.event === "interaction.removed") {
    const id = data.interaction_id;
    if (counts) {
      if (state.cards.has(id)) state.total = Math.max(state.total - 1, 0);
      else if (state.nextPage) refreshTotalSoon(); // past the first page: the server decides
    }
    resolve(id, frame.event === "interaction.answered" ? "answered" : "removed", null);
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
  $("count").textContent = `(${state.total} open)`;
  document.title = state.total ? `(${state.total}) Layby inbox` : "Layby inbox";
  $("tab-count").textContent = `(${state.total})`;
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
  const deadline = node.querySelector(".deadline");
  deadline.textContent = ""; // a resolved question has no countdown
  deadline.classList.remove("soon");
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
  // Coloured only when genuinely near: the last fifth of the question's time, and at most 5 minutes.
  const lifetime = Date.parse(card.item.timeout_at) - Date.parse(card.item.created_at);
  deadline.classList.toggle("soon", left < Math.min(5 * 60 * 1000, lifetime / 5));
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
    // Plain-language checks at the field before sending; the door stays the authority.
    for (const [name, { input, prop }] of Object.entries(fields)) {
      const problem = checkField(name, prop, answer[name], required.has(name), input);
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

// The first thing wrong with one form field's value, in plain words, or null.
function checkField(name, prop, value, isRequired, input) {
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
  if (Array.isArray(prop.enum) && !prop.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
    return `Choose one of the options for ${title}.`;
  }
  return null;
}

// A door's schema message, said plainly and pinned to the field it names when it names one.
function plainDoorError(card, message, field) {
  const props = ((card.item.format_payload || {}).schema || {}).properties || {};
  const missing = /^answer does not match schema: '([^']+)' is a required property/.exec(message || "");
  if (missing) return { field: missing[1], message: `Enter ${fieldTitle(missing[1], props[missing[1]])}.` };
  const name = field && field.split(".")[0].replace(/\[.*$/, "");
  if (name && props[name] && / does not match /.test(message || "")) {
    return { field: name, message: `${fieldTitle(name, props[name])} is not in the expected form.` };
  }
  return { field, message };
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
  const plain = plainDoorError(card, body.error || `The answer was refused (${resp.status}).`, body.field);
  const field = plain.field ? locate(plain.field) : null;
  showError(card, plain.message, field);
}

// -- keyboard ---------------------------------------------------------------------------
// j / k move between questions, Enter opens the focused one's control, y / n answer a yes/no
// question, 1-9 pick that option of a choice, Ctrl/Cmd+Enter sends the form being filled in,
// ? shows the list. Typing in a field is never taken for a shortcut.

const SHORTCUTS = [
  ["j / k", "next / previous question"],
  ["Enter", "go to the answer controls of the question"],
  ["y / n", "answer Yes / No"],
  ["1 – 9", "choose that option and answer"],
  ["Ctrl+Enter / ⌘+Enter", "send the answer being filled in"],
  ["?", "show or hide this list"],
];

function pendingCards() {
  return [...$("groups").querySelectorAll("article.card:not(.answered):not(.removed)")];
}

function focusCard(node) {
  for (const other of $("groups").querySelectorAll("article.card.focused")) other.classList.remove("focused");
  if (!node) return;
  node.classList.add("focused");
  node.tabIndex = -1;
  node.focus();
  node.scrollIntoView({ block: "nearest" });
}

function cardOf(node) {
  const article = node && node.closest ? node.closest("article.card") : null;
  return article ? state.cards.get(article.dataset.id) : null;
}

function toggleHelp() {
  let help = $("shortcuts");
  if (!help) {
    help = el("section", { id: "shortcuts", class: "shortcuts", "aria-label": "Keyboard shortcuts", hidden: true },
      el("h2", { text: "Keyboard shortcuts" }));
    const list = el("dl");
    for (const [key, what] of SHORTCUTS) list.append(el("dt", {}, el("kbd", { text: key })), el("dd", { text: what }));
    help.append(list);
    $("inbox").prepend(help);
  }
  help.hidden = !help.hidden;
}

document.addEventListener("keydown", (e) => {
  if ($("inbox").hidden) return;
  const typing = e.target.closest && e.target.closest("input, textarea, select, [contenteditable]");
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
    const form = e.target.closest && e.target.closest("article.card form");
    if (form) {
      e.preventDefault();
      form.requestSubmit();
    }
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  const cards = pendingCards();
  const current = e.target.closest ? e.target.closest("article.card") : null;
  const at = cards.indexOf(current);
  if (e.key === "j" || e.key === "k") {
    e.preventDefault();
    const next = e.key === "j" ? Math.min(at + 1, cards.length - 1) : Math.max(at - 1, 0);
    focusCard(cards[at < 0 ? 0 : next]);
  } else if (e.key === "?") {
    e.preventDefault();
    toggleHelp();
  } else if (current && e.target === current) {
    const card = cardOf(current);
    if (!card || card.status !== "pending") return;
    const fmt = card.item.answer_format;
    if (e.key === "Enter") {
      e.preventDefault();
      const first = current.querySelector(".controls input, .controls select, .controls textarea, .controls button");
      if (first) first.focus();
    } else if (fmt === "confirm" && (e.key === "y" || e.key === "n")) {
      e.preventDefault();
      submit(card, e.key === "y");
    } else if (fmt === "select" && /^[1-9]$/.test(e.key)) {
      const options = (card.item.format_payload || {}).options || [];
      const choice = options[Number(e.key) - 1];
      if (choice !== undefined) {
        e.preventDefault();
        submit(card, choice);
      }
    }
  }
});

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
