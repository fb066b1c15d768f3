// The Layby inbox: every pending question, live, as dense rows with one open question beside
// them (docs/doors/inbox-page.md).
//
// Loading: the stream opens first; it says which stream sequence its frames follow
// (Layby-Stream-Seq), and the list is loaded page by page at least that far (`after=`), so nothing
// recorded between the two is lost (docs/doors/list.md#seeding-the-stream). Every page says which
// sequence it reflects: a question resolved by a frame is never brought back by a page, and the
// open count is the newest page's total plus the frames after it. All pending questions are loaded
// (pages of 200, in the background), so sorting, filtering and search are instant and cover the
// whole set; while the load is still under way a filter also asks the server, whose answer covers
// everything. Only the rows in sight are in the document (virtualized list), so 10,000 pending
// questions scroll smoothly. Every text from the server is set as text, never parsed as HTML.

import { el } from "./dom.js";

const TOKEN_KEY = "layby.token";
const NOTIFY_KEY = "layby.notify";
const PAGE_SIZE = 200;
const ROW = 44; // px, a question row (inbox.css .row)
const HEAD = 32; // px, a group header row (inbox.css .ghead)
const OVERSCAN = 8;
const EXPIRED = "layby:interaction_expired";
const FORMATS = { text: "Text", confirm: "Yes/No", select: "Choice", form: "Form", external: "Outside" };

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  cards: new Map(), // interaction_id -> {item, status, el, answeredAt, by}
  resolved: new Set(), // ids a frame or an answer resolved: a later page never revives them
  known: new Set(), // ids ever pending here (their resolution lowers the count)
  decremented: new Set(), // ids whose resolution the count has taken
  incremented: new Set(), // ids whose add frame the count has taken
  lastEventId: null,
  abort: null,
  base: { total: 0, seq: -1 }, // the newest list page's total, and the stream sequence it reflects
  frames: [], // [{id, delta}] frames after base.seq: the open count is base.total + their deltas
  loading: 0, // generation of the running full load (0: none)
  loaded: false, // every pending question is loaded
  filter: { q: "", format: "", group: "", source: "", sort: "group" },
  origins: new Set(), // sources that are an `origin` (the list door can filter on those)
  server: null, // {key, total} the server's count for the filter while the load is under way
  view: [], // the rows shown: {kind: "head", gid, n} | {kind: "row", card}
  offsets: [0],
  selected: null, // interaction_id of the open question
  dirty: true,
  scheduled: false,
  tab: "pending", // or "done"
  done: [], // done items, newest first (docs/doors/done.md)
  doneTotal: 0,
  doneNext: null,
  doneTimer: null,
};

function setStatus(text) {
  $("status").textContent = text;
}

function emit(name, detail = {}) {
  document.dispatchEvent(new CustomEvent(name, { detail }));
}

// -- sign-in ----------------------------------------------------------------------------

function showSignIn(message) {
  stopStream();
  state.loading = 0;
  $("inbox").hidden = true;
  $("runs").hidden = true;
  $("views").hidden = true;
  $("sign-out").hidden = true;
  $("notify").hidden = true;
  $("sign-in").hidden = false;
  const err = $("sign-in-error");
  err.hidden = !message;
  err.textContent = message || "";
  $("token").focus();
}

async function signIn(token) {
  state.token = token;
  // One probe checks the token before anything is shown; the stream's own load follows.
  let resp;
  try {
    resp = await fetch("/api/interactions?page=1&pageSize=1", { headers: headers(), cache: "no-store" });
  } catch {
    setStatus("The server cannot be reached; retrying…");
    setTimeout(() => signIn(token), 2000);
    return;
  }
  if (resp.status === 401) return showSignIn("That token was refused.");
  if (!resp.ok) {
    setStatus(`The inbox could not be loaded (${resp.status}).`);
    return;
  }
  const body = await resp.json();
  rebase(body.data.total, Number(resp.headers.get("Layby-Stream-Seq")) || 0);
  sessionStorage.setItem(TOKEN_KEY, token);
  $("sign-in").hidden = true;
  $("sign-out").hidden = false;
  $("views").hidden = false;
  $("notify").hidden = !("Notification" in window);
  updateNotifyButton();
  emit("layby:signed-in", { token });
  showView();
  schedule();
  loadDone();
  startStream();
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.cards.clear();
  state.resolved.clear();
  state.known.clear();
  state.decremented.clear();
  state.incremented.clear();
  state.done = [];
  state.selected = null;
  state.loaded = false;
  state.base = { total: 0, seq: -1 };
  state.frames = [];
  state.dirty = true;
  $("detail").replaceChildren();
  emit("layby:signed-out");
  showSignIn("");
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${state.token}`, ...extra };
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
  if (view === "inbox") schedule();
}

window.addEventListener("hashchange", showView);
document.addEventListener("layby:unauthorized", (e) => showSignIn((e.detail && e.detail.message) || "The token is no longer accepted."));

// -- the open count -----------------------------------------------------------------------

function rebase(total, seq) {
  if (seq < state.base.seq) return; // an older snapshot than the one the count rests on
  state.base = { total, seq };
  state.frames = state.frames.filter((f) => f.id > seq);
}

function openCount() {
  let n = state.base.total;
  for (const f of state.frames) if (f.id > state.base.seq) n += f.delta;
  return Math.max(n, 0);
}

// -- loading every pending question --------------------------------------------------------

async function fetchPage(query) {
  const resp = await fetch(`/api/interactions?${query}`, { headers: headers(), cache: "no-store" });
  if (resp.status === 401) {
    showSignIn("The token is no longer accepted.");
    return null;
  }
  if (!resp.ok) return null;
  const body = await resp.json();
  return { data: body.data, seq: Number(resp.headers.get("Layby-Stream-Seq")) || 0 };
}

// Load every pending question, at least as far as stream sequence `after`: the first page shows
// at once, the rest follow in the background, LOADERS pages at a time (oldest first, the order
// the door pages most cheaply). A question pending here that the complete load no longer holds
// was resolved while the page was away (a reconnect): it is marked so.
const LOADERS = 4;

async function loadAll(after, attempt = 0) {
  const generation = ++state.loading;
  const seen = new Set();
  const started = state.base.seq;
  const take = (got) => {
    for (const item of got.data.items) {
      seen.add(item.interaction_id);
      if (!state.resolved.has(item.interaction_id)) upsert(item);
    }
    rebase(got.data.total, got.seq);
    state.dirty = true;
    schedule();
  };
  const page = (n, seed = "") => fetchPage(`page=${n}&pageSize=${PAGE_SIZE}&sort=oldest${seed}`).catch(() => null);
  const first = await page(1, after !== null ? `&after=${after}` : "");
  if (!first || generation !== state.loading) return;
  take(first);
  const pages = Math.ceil(first.data.total / PAGE_SIZE);
  let next = 2;
  let failed = false;
  const worker = async () => {
    while (next <= pages && generation === state.loading && !failed) {
      const got = await page(next++);
      if (!got) failed = true;
      else if (generation === state.loading) take(got);
    }
  };
  await Promise.all(Array.from({ length: LOADERS }, worker));
  if (generation !== state.loading || failed) return;
  state.loading = 0;
  for (const [id, card] of state.cards) {
    // Pending here, not in any page, and not added by a frame since the load began: resolved.
    if (card.status === "pending" && !seen.has(id) && !(card.addedBy > started)) resolve(id, "answered", null);
  }
  state.loaded = true;
  state.server = null;
  const pendingHere = [...state.cards.values()].filter((c) => c.status === "pending").length;
  // Pages read at different moments can skip a question that moved between them; the count says so.
  if (pendingHere !== openCount() && attempt < 2 && pages > 1) {
    loadAll(null, attempt + 1);
    return;
  }
  state.dirty = true;
  schedule();
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
      loadAll(Number.isNaN(from) ? null : from);
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
  const id = Number(frame.id) || 0;
  // A frame the newest page already reflects changes nothing in the count.
  const counts = id > state.base.seq;
  if (frame.event === "interaction.add") {
    if (state.resolved.has(data.interaction_id)) return;
    const known = state.known.has(data.interaction_id);
    upsert(data).addedBy = id;
    if (counts && !state.incremented.has(data.interaction_id)) {
      state.frames.push({ id, delta: 1 });
      state.incremented.add(data.interaction_id);
    }
    if (!known) notifyNew(data);
  } else if (frame.event === "interaction.answered" || frame.event === "interaction.removed") {
    const qid = data.interaction_id;
    // Counted once: if it was pending here, or may be among the questions not loaded yet.
    if (counts && !state.decremented.has(qid) && (state.known.has(qid) || !state.loaded)) {
      state.frames.push({ id, delta: -1 });
      state.decremented.add(qid);
    }
    resolve(qid, frame.event === "interaction.answered" ? "answered" : "removed", null);
    loadDoneSoon(id);
  }
  state.dirty = true;
  schedule();
}

// -- the model -----------------------------------------------------------------------------

function upsert(item) {
  const existing = state.cards.get(item.interaction_id);
  if (existing) {
    existing.item = item;
    return existing;
  }
  const card = { item, status: "pending", el: null, answeredAt: null, by: null, addedBy: 0, text: item.question.toLowerCase() };
  state.known.add(item.interaction_id);
  state.cards.set(item.interaction_id, card);
  return card;
}

function resolve(id, status, by) {
  const card = state.cards.get(id);
  state.resolved.add(id);
  if (!card || card.status !== "pending") return;
  card.status = status;
  card.answeredAt = new Date();
  card.by = by;
  if (card.el) updateCard(card);
  // It leaves the list at once; the open question keeps showing what happened to it.
  if (state.selected !== id) state.cards.delete(id);
  state.dirty = true;
  schedule();
}

function matches(card, f) {
  if (f.format && card.item.answer_format !== f.format) return false;
  if (f.group && card.item.group_id !== f.group) return false;
  if (f.source && sourceOf(card.item) !== f.source) return false;
  if (f.q && !card.text.includes(f.q.toLowerCase())) return false;
  return true;
}

const BY = {
  newest: (a, b) => cmp(b.item.created_at, a.item.created_at) || cmp(b.item.interaction_id, a.item.interaction_id),
  oldest: (a, b) => cmp(a.item.created_at, b.item.created_at) || cmp(a.item.interaction_id, b.item.interaction_id),
  deadline: (a, b) => cmp(a.item.timeout_at, b.item.timeout_at) || cmp(a.item.created_at, b.item.created_at),
};

function cmp(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

// The rows in order: pending questions that match the filter; grouped, groups come by their most
// recent question (as the list door orders them), a header over every group of two or more.
function buildView() {
  const f = state.filter;
  const cards = [];
  for (const card of state.cards.values()) if (card.status === "pending" && matches(card, f)) cards.push(card);
  const view = [];
  if (f.sort !== "group") {
    cards.sort(BY[f.sort] || BY.newest);
    for (const card of cards) view.push({ kind: "row", card });
  } else {
    const groups = new Map();
    for (const card of cards) {
      const g = groups.get(card.item.group_id);
      if (g) g.push(card);
      else groups.set(card.item.group_id, [card]);
    }
    const ordered = [...groups.entries()].map(([gid, list]) => {
      list.sort(BY.oldest);
      return { gid, list, latest: list[list.length - 1].item.created_at };
    });
    ordered.sort((a, b) => cmp(a.latest, b.latest) || cmp(a.gid, b.gid));
    for (const g of ordered) {
      if (g.list.length > 1) view.push({ kind: "head", gid: g.gid, n: g.list.length });
      for (const card of g.list) view.push({ kind: "row", card });
    }
  }
  const offsets = new Array(view.length + 1);
  offsets[0] = 0;
  for (let i = 0; i < view.length; i++) offsets[i + 1] = offsets[i] + (view[i].kind === "head" ? HEAD : ROW);
  state.view = view;
  state.offsets = offsets;
  state.matching = cards.length;
}

// -- rendering -----------------------------------------------------------------------------

function schedule() {
  if (state.scheduled) return;
  state.scheduled = true;
  requestAnimationFrame(() => {
    state.scheduled = false;
    render();
  });
}

function render() {
  if (state.dirty) {
    buildView();
    state.dirty = false;
    renderGroups();
  }
  // The open question: the selected one, else the first row.
  if (!state.selected || !state.cards.has(state.selected)) {
    const first = state.view.find((v) => v.kind === "row");
    state.selected = first ? first.card.item.interaction_id : null;
  }
  renderRows();
  renderDetail();
  const n = openCount();
  $("count").textContent = `(${n} open)`;
  document.title = n ? `(${n}) Layby inbox` : "Layby inbox";
  $("tab-count").textContent = `(${n})`;
  $("tab-pending").textContent = `Pending (${n})`;
  const filtered = isFiltered();
  let shown = "";
  if (filtered) {
    const total = !state.loaded && state.server && state.server.key === filterKey() ? state.server.total : state.matching;
    shown = `${total} match${total === 1 ? "" : "es"}`;
  } else if (!state.loaded && state.loading) {
    shown = `loading ${state.view.length ? state.matching : 0} of ${n}…`;
  }
  $("shown").textContent = shown;
  $("empty").hidden = state.view.length > 0;
  $("empty").textContent = filtered ? "No pending question matches." : "Nothing is waiting for an answer.";
}

function isFiltered() {
  const f = state.filter;
  return Boolean(f.q || f.format || f.group || f.source);
}

function filterKey() {
  const f = state.filter;
  return JSON.stringify([f.q, f.format, f.group, f.source, f.sort]);
}

// Only the rows in sight (and a few either side) are in the document.
function renderRows() {
  const scroller = $("rows");
  const inner = $("rows-inner");
  const total = state.offsets[state.offsets.length - 1] || 0;
  inner.style.height = `${total}px`;
  const top = scroller.scrollTop;
  const bottom = top + (scroller.clientHeight || 600);
  let first = lowerBound(state.offsets, top) - 1 - OVERSCAN;
  first = Math.max(first, 0);
  let last = lowerBound(state.offsets, bottom) + OVERSCAN;
  last = Math.min(last, state.view.length);
  const keep = new Map();
  for (const node of inner.children) keep.set(node.dataset.key, node);
  const wanted = new Set();
  for (let i = first; i < last; i++) {
    const v = state.view[i];
    wanted.add(v.kind === "head" ? `g:${v.gid}` : v.card.item.interaction_id);
  }
  // Rows that scrolled out of sight are reused for the ones coming in (no churn while scrolling).
  const spare = { row: [], head: [] };
  for (const [key, node] of keep) {
    if (wanted.has(key)) continue;
    spare[node.classList.contains("ghead") ? "head" : "row"].push(node);
    keep.delete(key);
  }
  for (let i = first; i < last; i++) {
    const v = state.view[i];
    const key = v.kind === "head" ? `g:${v.gid}` : v.card.item.interaction_id;
    let node = keep.get(key);
    if (!node) {
      node = spare[v.kind].pop() || (v.kind === "head" ? buildHead() : buildRow());
      if (v.kind === "head") fillHead(node, v);
      else fillRow(node, v.card);
      if (!node.parentNode) inner.append(node);
    } else if (v.kind === "head") {
      node.querySelector(".gcount").textContent = `${v.n} questions`;
    }
    node.style.transform = `translateY(${state.offsets[i]}px)`;
    if (v.kind === "row") {
      const on = v.card.item.interaction_id === state.selected;
      node.setAttribute("aria-selected", on ? "true" : "false");
      node.classList.toggle("selected", on);
      tickRow(node, v.card);
    }
  }
  for (const node of [...spare.row, ...spare.head]) node.remove();
  if (state.selected) scroller.setAttribute("aria-activedescendant", `row-${state.selected}`);
  else scroller.removeAttribute("aria-activedescendant");
}

function lowerBound(arr, x) {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function isGenerated(id) {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-/i.test(id);
}

function shortId(id) {
  return isGenerated(id) ? id.slice(0, 8) : id;
}

function sourceOf(item) {
  if (item.origin) return item.origin;
  if (item.channel) return item.recipient ? `${item.channel} · ${item.recipient}` : item.channel;
  if (item.audience) return `for ${item.audience}`;
  return "";
}

function buildHead() {
  return el("div", { class: "ghead", role: "presentation" }, el("span", { class: "gname" }), el("span", { class: "gcount" }));
}

function fillHead(node, v) {
  node.dataset.key = `g:${v.gid}`;
  node.firstChild.textContent = `Group ${shortId(v.gid)}`;
  node.lastChild.textContent = `${v.n} questions`;
}

function buildRow() {
  return el("div", { class: "row", role: "option", "aria-selected": "false" },
    el("span", { class: "fmt" }), el("span", { class: "rq" }), el("span", { class: "chip src" }),
    el("span", { class: "chip grp" }), el("span", { class: "age" }), el("span", { class: "deadline" }));
}

function fillRow(node, card) {
  const item = card.item;
  const id = item.interaction_id;
  node.id = `row-${id}`;
  node.dataset.key = id;
  node.dataset.id = id;
  const [fmt, question, src, grp] = node.children;
  fmt.className = `fmt fmt-${item.answer_format}`;
  fmt.textContent = FORMATS[item.answer_format] || item.answer_format;
  question.textContent = item.question;
  const source = sourceOf(item);
  src.textContent = source;
  src.hidden = !source;
  // A generated group id (a UUID) names nothing a person knows: its chip is left out.
  grp.textContent = shortId(item.group_id);
  grp.title = `group ${item.group_id}`;
  grp.hidden = isGenerated(item.group_id);
}

function near(item, left) {
  // Coloured only when genuinely near: the last fifth of the question's time, and at most 5 minutes.
  const lifetime = Date.parse(item.timeout_at) - Date.parse(item.created_at);
  return left < Math.min(5 * 60 * 1000, lifetime / 5);
}

function tickRow(node, card) {
  const now = Date.now();
  node.querySelector(".age").textContent = relative(now - Date.parse(card.item.created_at));
  const deadline = node.querySelector(".deadline");
  const left = Date.parse(card.item.timeout_at) - now;
  deadline.textContent = left > 0 ? `${relative(left)} left` : "due";
  deadline.classList.toggle("soon", near(card.item, left));
}

function renderGroups() {
  // The group filter's options: every group with its pending count (over everything loaded).
  const counts = new Map();
  for (const card of state.cards.values()) {
    if (card.status !== "pending") continue;
    counts.set(card.item.group_id, (counts.get(card.item.group_id) || 0) + 1);
  }
  const select = $("filter-group");
  const current = select.value;
  const options = [el("option", { value: "", text: "All groups" })];
  const groups = [...counts.entries()].filter(([, n]) => n > 1 || current).sort((a, b) => b[1] - a[1]).slice(0, 200);
  for (const [gid, n] of groups) options.push(el("option", { value: gid, text: `${shortId(gid)} (${n})` }));
  if (current && !counts.has(current)) options.push(el("option", { value: current, text: `${shortId(current)} (0)` }));
  select.replaceChildren(...options);
  select.value = current;
  // Where questions come from (asker, channel, audience), with their counts.
  const sources = new Map();
  for (const card of state.cards.values()) {
    if (card.status !== "pending") continue;
    const source = sourceOf(card.item);
    if (!source) continue;
    if (card.item.origin) state.origins.add(source);
    sources.set(source, (sources.get(source) || 0) + 1);
  }
  const from = $("filter-source");
  const chosen = from.value;
  const choices = [el("option", { value: "", text: "All sources" })];
  for (const [source, n] of [...sources.entries()].sort((a, b) => b[1] - a[1]).slice(0, 200)) {
    choices.push(el("option", { value: source, text: `${source} (${n})` }));
  }
  if (chosen && !sources.has(chosen)) choices.push(el("option", { value: chosen, text: `${chosen} (0)` }));
  from.replaceChildren(...choices);
  from.value = chosen;
}

function select(id, { focusList = false } = {}) {
  state.selected = id;
  const index = state.view.findIndex((v) => v.kind === "row" && v.card.item.interaction_id === id);
  if (index >= 0) {
    const scroller = $("rows");
    const top = state.offsets[index];
    if (top < scroller.scrollTop) scroller.scrollTop = top;
    else if (top + ROW > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = top + ROW - scroller.clientHeight;
  }
  render();
  if (focusList) $("rows").focus({ preventScroll: true });
}

// j / k: the next or previous question still waiting (one being answered right now is skipped;
// from a question just answered at the end of the list, the one before it).
function move(step) {
  const rows = state.view.filter((v) => v.kind === "row");
  if (!rows.length) return;
  const waiting = (i) => rows[i].card.status === "pending" && !rows[i].card.sending;
  const at = rows.findIndex((v) => v.card.item.interaction_id === state.selected);
  let target = -1;
  if (at < 0) {
    target = rows.findIndex((_, i) => waiting(i));
  } else {
    for (let i = at + step; i >= 0 && i < rows.length; i += step) {
      if (waiting(i)) {
        target = i;
        break;
      }
    }
    if (target < 0 && !waiting(at)) {
      for (let i = at - step; i >= 0 && i < rows.length; i -= step) {
        if (waiting(i)) {
          target = i;
          break;
        }
      }
    }
  }
  if (target >= 0) select(rows[target].card.item.interaction_id, { focusList: true });
}

// -- the open question ---------------------------------------------------------------------

function renderDetail() {
  const pane = $("detail");
  const card = state.selected ? state.cards.get(state.selected) : null;
  if (!card) {
    if (pane.firstChild) pane.replaceChildren();
    return;
  }
  if (!card.el) buildCard(card);
  if (pane.firstChild !== card.el) {
    pane.replaceChildren(card.el);
    // A question no longer open that was kept only to show its outcome can go now.
    for (const [id, other] of state.cards) if (id !== card.item.interaction_id && other.status !== "pending") state.cards.delete(id);
  }
  tickCard(card);
}

function openControls() {
  const card = state.selected ? state.cards.get(state.selected) : null;
  if (!card || !card.el) return;
  const first = card.el.querySelector(".controls input, .controls select, .controls textarea, .controls button");
  if (first) first.focus();
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
  meta.append(el("span", { class: "chip", text: FORMATS[item.answer_format] || item.answer_format }));
  const source = sourceOf(item);
  if (source) meta.append(el("span", { text: source }));
  meta.append(el("span", { text: `group ${shortId(item.group_id)}` }));
  meta.append(el("span", { class: "age" }));
  meta.append(el("span", { class: "deadline" }));
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
  if (!node || card.status !== "pending") return;
  const now = Date.now();
  node.querySelector(".age").textContent = `asked ${relative(now - Date.parse(card.item.created_at))} ago`;
  const deadline = node.querySelector(".deadline");
  const left = Date.parse(card.item.timeout_at) - now;
  deadline.textContent = left > 0 ? `${relative(left)} left` : "deadline passed";
  deadline.classList.toggle("soon", near(card.item, left));
}

setInterval(() => {
  if (!$("inbox").hidden) renderRows();
  const card = state.selected ? state.cards.get(state.selected) : null;
  if (card) tickCard(card);
}, 1000);

// -- filters -------------------------------------------------------------------------------

let serverTimer = null;

function applyFilter() {
  state.filter = {
    q: $("search").value.trim(),
    format: $("filter-format").value,
    group: $("filter-group").value,
    source: $("filter-source").value,
    sort: $("sort").value,
  };
  state.dirty = true;
  $("rows").scrollTop = 0;
  render();
  // While the load is under way, the server answers for the whole pending set (and its first
  // matches join the loaded ones, so they show now).
  if (!state.loaded && isFiltered()) {
    clearTimeout(serverTimer);
    serverTimer = setTimeout(askServer, 150);
  }
}

async function askServer() {
  const key = filterKey();
  const f = state.filter;
  const query = new URLSearchParams({ page: "1", pageSize: String(PAGE_SIZE), sort: f.sort });
  if (f.q) query.set("q", f.q);
  if (f.format) query.set("format", f.format);
  if (f.group) query.set("group", f.group);
  if (f.source && state.origins.has(f.source)) query.set("origin", f.source);
  else if (f.source) return; // a channel or audience: only what is loaded can say
  const got = await fetchPage(query.toString()).catch(() => null);
  if (!got || key !== filterKey()) return;
  for (const item of got.data.items) if (!state.resolved.has(item.interaction_id)) upsert(item);
  state.server = { key, total: got.data.total };
  state.dirty = true;
  schedule();
}

// -- done -----------------------------------------------------------------------------------

function showTab(tab) {
  state.tab = tab;
  $("tab-pending").setAttribute("aria-selected", tab === "pending" ? "true" : "false");
  $("tab-done").setAttribute("aria-selected", tab === "done" ? "true" : "false");
  $("pending-pane").hidden = tab !== "pending";
  $("done-pane").hidden = tab !== "done";
  if (tab === "done") loadDone();
  else schedule();
}

async function loadDone(after = null, page = 1) {
  const seed = after ? `&after=${after}` : "";
  let resp;
  try {
    resp = await fetch(`/api/interactions/done?page=${page}&pageSize=50${seed}`, { headers: headers(), cache: "no-store" });
  } catch {
    return;
  }
  if (!resp.ok) return;
  const body = await resp.json();
  const byId = new Map(state.done.map((d) => [d.interaction_id, d]));
  for (const item of body.data.items) byId.set(item.interaction_id, { ...byId.get(item.interaction_id), ...item });
  state.done = [...byId.values()].sort((a, b) => cmp(b.at || "", a.at || "")).slice(0, 500);
  state.doneTotal = body.data.total;
  state.doneNext = body.data.next_page;
  renderDone();
}

function loadDoneSoon(after) {
  clearTimeout(state.doneTimer);
  state.doneTimer = setTimeout(() => loadDone(after), 300);
}

function answeredHere(card, answer) {
  const item = card.item;
  state.done = [
    { interaction_id: item.interaction_id, group_id: item.group_id, question: item.question, answer_format: item.answer_format,
      status: "answered", at: new Date().toISOString(), by: "you", via: "inbox", answer: item.sensitive ? undefined : answer,
      sensitive: item.sensitive || undefined },
    ...state.done.filter((d) => d.interaction_id !== item.interaction_id),
  ];
  renderDone();
}

const VIA = { inbox: "in the inbox", cli: "from the CLI", api: "through the API", callback: "by callback", expiry: "by expiry" };

function answerText(value) {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  if (value === true) return "Yes";
  if (value === false) return "No";
  return JSON.stringify(value);
}

function renderDone() {
  $("tab-done").textContent = `Done (${Math.max(state.doneTotal, state.done.length)})`;
  if (state.tab !== "done") return;
  const list = $("done-list");
  const nodes = state.done.slice(0, 200).map((d) => {
    const row = el("li", { class: `done-row ${d.status}`, "data-id": d.interaction_id });
    row.append(el("p", { class: "rq", text: d.question }));
    const what = el("p", { class: "meta" });
    if (d.status === "answered") {
      const answer = d.sensitive ? "(sensitive: not shown)" : answerText(d.answer);
      what.append(el("span", { class: "answer", text: answer }));
      what.append(el("span", { text: `by ${d.by === "you" ? "you" : d.by}` }));
      if (d.via) what.append(el("span", { class: "via", text: VIA[d.via] || d.via }));
    } else if (d.status === "expired") {
      what.append(el("span", { class: "answer", text: "Expired: no one answered in time" }));
    } else {
      what.append(el("span", { class: "answer", text: `Withdrawn (${d.reason || "removed"})` }));
    }
    if (d.at) what.append(el("time", { datetime: d.at, text: new Date(d.at).toLocaleString() }));
    row.append(what);
    return row;
  });
  list.replaceChildren(...nodes);
  $("done-empty").hidden = nodes.length > 0;
  $("done-more").hidden = !state.doneNext;
}

// -- notifications ---------------------------------------------------------------------------

function updateNotifyButton() {
  const on = sessionStorage.getItem(NOTIFY_KEY) === "1" && "Notification" in window && Notification.permission === "granted";
  $("notify").textContent = on ? "Notifications on" : "Notify me";
  $("notify").setAttribute("aria-pressed", on ? "true" : "false");
}

async function toggleNotify() {
  if (!("Notification" in window)) return;
  if (sessionStorage.getItem(NOTIFY_KEY) === "1") {
    sessionStorage.removeItem(NOTIFY_KEY);
  } else {
    const permission = Notification.permission === "granted" ? "granted" : await Notification.requestPermission();
    if (permission === "granted") sessionStorage.setItem(NOTIFY_KEY, "1");
    else setStatus("Notifications are blocked for this page in the browser's settings.");
  }
  updateNotifyButton();
}

function notifyNew(item) {
  if (!document.hidden || sessionStorage.getItem(NOTIFY_KEY) !== "1") return;
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const note = new Notification("New question in Layby", { body: item.question.slice(0, 200), tag: item.interaction_id });
  note.addEventListener("click", () => {
    window.focus();
    select(item.interaction_id);
  });
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
  if (card.status !== "pending" || card.sending) return;
  card.sending = true;
  try {
    await send(card, answer, locate);
  } finally {
    card.sending = false;
  }
}

async function send(card, answer, locate) {
  clearErrors(card);
  const buttons = card.el.querySelectorAll(".controls button");
  buttons.forEach((b) => (b.disabled = true));
  let resp;
  try {
    resp = await fetch(`/api/interactions/${encodeURIComponent(card.item.interaction_id)}/answer`, {
      method: "POST",
      headers: headers({ "Content-Type": "application/json", "Layby-Client": "inbox" }),
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
    state.resolved.add(card.item.interaction_id);
    updateCard(card);
    answeredHere(card, answer);
    state.dirty = true;
    schedule();
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
    loadDoneSoon(null);
    return;
  }
  if (resp.status === 401) return showSignIn("The token is no longer accepted.");
  buttons.forEach((b) => (b.disabled = false));
  const plain = plainDoorError(card, body.error || `The answer was refused (${resp.status}).`, body.field);
  const field = plain.field ? locate(plain.field) : null;
  showError(card, plain.message, field);
}

// -- keyboard ---------------------------------------------------------------------------
// j / k move between questions, Enter goes to the open question's controls, y / n answer a
// yes/no question, 1-9 pick that option of a choice, Ctrl/Cmd+Enter sends the form being filled
// in, / goes to the search, Escape goes back to the list, ? shows the list of shortcuts. Typing in
// a field is never taken for a shortcut.

const SHORTCUTS = [
  ["j / k", "next / previous question"],
  ["Enter", "go to the answer controls of the open question"],
  ["y / n", "answer Yes / No"],
  ["1 – 9", "choose that option and answer"],
  ["Ctrl+Enter / ⌘+Enter", "send the answer being filled in"],
  ["/", "search"],
  ["Escape", "back to the list"],
  ["?", "show or hide this list"],
];

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
  if (e.key === "Escape") {
    e.preventDefault();
    $("rows").focus({ preventScroll: true });
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "j" || e.key === "k") {
    e.preventDefault();
    if (state.tab !== "pending") showTab("pending");
    move(e.key === "j" ? 1 : -1);
    return;
  }
  if (e.key === "?") {
    e.preventDefault();
    toggleHelp();
    return;
  }
  if (e.key === "/") {
    e.preventDefault();
    $("search").focus();
    return;
  }
  const card = state.selected ? state.cards.get(state.selected) : null;
  if (!card || card.status !== "pending" || state.tab !== "pending") return;
  // Buttons and links keep their own Enter; anywhere else Enter opens the controls.
  if (e.key === "Enter") {
    if (e.target.closest && e.target.closest("button, a, article.card")) return;
    e.preventDefault();
    openControls();
    return;
  }
  const fmt = card.item.answer_format;
  if (fmt === "confirm" && (e.key === "y" || e.key === "n")) {
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
});

// -- start ------------------------------------------------------------------------------

$("sign-in-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const token = $("token").value.trim();
  if (!token) return showSignIn("Enter a token.");
  signIn(token);
});
$("sign-out").addEventListener("click", signOut);
$("notify").addEventListener("click", toggleNotify);
$("rows").addEventListener("scroll", () => renderRows(), { passive: true });
$("rows").addEventListener("click", (e) => {
  const node = e.target.closest && e.target.closest(".row");
  if (node) select(node.dataset.id, { focusList: true });
});
$("rows").addEventListener("dblclick", (e) => {
  if (e.target.closest && e.target.closest(".row")) openControls();
});
$("search").addEventListener("input", applyFilter);
for (const id of ["filter-format", "filter-group", "filter-source", "sort"]) $(id).addEventListener("change", applyFilter);
$("tab-pending").addEventListener("click", () => showTab("pending"));
$("tab-done").addEventListener("click", () => showTab("done"));
$("done-more").addEventListener("click", () => loadDone(null, Math.floor(state.done.length / 50) + 1));
window.addEventListener("resize", () => schedule());

if (state.token) signIn(state.token);
else showSignIn("");
