// The pending questions and the open count: every pending question is loaded page by page, kept
// current by the stream's frames, and counted exactly (docs/doors/inbox-page.md#loading-every-pending-question).
//
// The stream opens first; it says which stream sequence its frames follow (Layby-Stream-Seq), and
// the list is loaded at least that far (`after=`), so nothing recorded between the two is lost
// (docs/doors/list.md#seeding-the-stream). Every page says which sequence it reflects: a question
// resolved by a frame is never brought back by a page, and the open count is the newest page's
// total plus the frames after it.

import { loadDoneSoon } from "./done.js";
import { emit } from "./helpers.js";
import { schedule } from "./list.js";
import { notifyNew } from "./notify.js";
import { updateCard } from "./question.js";
import { authHeaders } from "./session.js";
import { showSignIn } from "./signin.js";
import { PAGE_SIZE, state } from "./state.js";

// -- the open count -----------------------------------------------------------------------

export function rebase(total, seq) {
  if (seq < state.base.seq) return; // an older snapshot than the one the count rests on
  state.base = { total, seq };
  state.frames = state.frames.filter((f) => f.id > seq);
}

export function openCount() {
  let n = state.base.total;
  for (const f of state.frames) if (f.id > state.base.seq) n += f.delta;
  return Math.max(n, 0);
}

// -- the questions --------------------------------------------------------------------------

export function upsert(item) {
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

export function resolve(id, status, by) {
  const card = state.cards.get(id);
  state.resolved.add(id);
  if (state.picked.has(id) && !state.pickedEnded.has(id)) state.pickedEnded.set(id, status);
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

// -- loading every pending question --------------------------------------------------------

export async function fetchPage(query) {
  const resp = await fetch(`/api/interactions?${query}`, { headers: authHeaders(), cache: "no-store" });
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

export async function loadAll(after, attempt = 0) {
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

// -- a frame of the stream -------------------------------------------------------------------

export function applyFrame(frame) {
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
