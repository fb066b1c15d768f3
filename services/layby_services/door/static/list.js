// The list of pending questions: the rows in the chosen order, and only the rows in sight (and a
// few either side) in the document — rows that scroll out are reused for the rows scrolling in, so
// 10,000 pending questions scroll smoothly (docs/doors/inbox-page.md#layout).

import { filterKey, isFiltered, matches, renderGroups } from "./filters.js";
import { $, cmp, duration, el } from "./helpers.js";
import { openCount } from "./model.js";
import { renderDetail } from "./question.js";
import { FORMATS, HEAD, ROW, state } from "./state.js";

const OVERSCAN = 8;

const BY = {
  newest: (a, b) => cmp(b.item.created_at, a.item.created_at) || cmp(b.item.interaction_id, a.item.interaction_id),
  oldest: (a, b) => cmp(a.item.created_at, b.item.created_at) || cmp(a.item.interaction_id, b.item.interaction_id),
  deadline: (a, b) => cmp(a.item.timeout_at, b.item.timeout_at) || cmp(a.item.created_at, b.item.created_at),
};

// The rows in order: pending questions that match the filter. Grouped, the group with the newest
// question comes first (the list door pages groups the other way round, oldest activity first;
// the page orders its own view), its questions in creation order, and a header over every group
// of two or more.
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
    ordered.sort((a, b) => cmp(b.latest, a.latest) || cmp(a.gid, b.gid));
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

export function schedule() {
  if (state.scheduled) return;
  state.scheduled = true;
  requestAnimationFrame(() => {
    state.scheduled = false;
    render();
  });
}

export function render() {
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

// Only the rows in sight (and a few either side) are in the document.
export function renderRows() {
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
      node.firstChild.checked = state.picked.has(v.card.item.interaction_id);
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

// -- one row ---------------------------------------------------------------------------------

function isGenerated(id) {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-/i.test(id);
}

export function shortId(id) {
  return isGenerated(id) ? id.slice(0, 8) : id;
}

// Where a question comes from, as its row says it: the asker, the channel and recipient, or whom it is for.
export function sourceOf(item) {
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
    el("input", { type: "checkbox", class: "pick", "aria-label": "Select for a bulk decision" }),
    el("span", { class: "fmt" }), el("span", { class: "rq" }), el("span", { class: "chip src" }),
    el("span", { class: "chip grp" }), el("span", { class: "age" }), el("span", { class: "deadline" }));
}

function fillRow(node, card) {
  const item = card.item;
  const id = item.interaction_id;
  node.id = `row-${id}`;
  node.dataset.key = id;
  node.dataset.id = id;
  const [pick, fmt, question, src, grp] = node.children;
  pick.checked = state.picked.has(id);
  pick.setAttribute("aria-label", `Select “${item.question.slice(0, 80)}”`);
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

export function near(item, left) {
  // Coloured only when genuinely near: the last fifth of the question's time, and at most 5 minutes.
  const lifetime = Date.parse(item.timeout_at) - Date.parse(item.created_at);
  return left < Math.min(5 * 60 * 1000, lifetime / 5);
}

function tickRow(node, card) {
  const now = Date.now();
  node.querySelector(".age").textContent = duration(now - Date.parse(card.item.created_at));
  const deadline = node.querySelector(".deadline");
  const left = Date.parse(card.item.timeout_at) - now;
  deadline.textContent = left > 0 ? `${duration(left)} left` : "due";
  deadline.classList.toggle("soon", near(card.item, left));
}

// -- moving between questions -----------------------------------------------------------------

export function select(id, { focusList = false } = {}) {
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
export function move(step) {
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
