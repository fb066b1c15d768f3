// Search, the format, group and source filters, and the order
// (docs/doors/inbox-page.md#search-filters-and-order). Everything loaded is filtered here at once;
// while the load is still under way, the list door is asked too, so its total covers the whole set.

import { $, el } from "./helpers.js";
import { render, schedule, shortId, sourceOf } from "./list.js";
import { fetchPage, upsert } from "./model.js";
import { PAGE_SIZE, state } from "./state.js";

export function matches(card, f) {
  if (f.format && card.item.answer_format !== f.format) return false;
  if (f.group && card.item.group_id !== f.group) return false;
  if (f.source && sourceOf(card.item) !== f.source) return false;
  if (f.q && !card.text.includes(f.q.toLowerCase())) return false;
  return true;
}

export function isFiltered() {
  const f = state.filter;
  return Boolean(f.q || f.format || f.group || f.source);
}

export function filterKey() {
  const f = state.filter;
  return JSON.stringify([f.q, f.format, f.group, f.source, f.sort]);
}

// The group and source menus: every group of two or more, and every source, with their pending
// counts (over everything loaded); a chosen one stays listed even when nothing is left in it.
export function renderGroups() {
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

let serverTimer = null;

export function applyFilter() {
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
