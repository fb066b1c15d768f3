// What the inbox knows, shared by its modules: every pending question loaded, what resolved them,
// the open count's basis, the filter and the rows shown (docs/doors/inbox-page.md).

export const PAGE_SIZE = 200;
export const ROW = 44; // px, a question row (inbox.css .row)
export const HEAD = 32; // px, a group header row (inbox.css .ghead)
export const FORMATS = { text: "Text", confirm: "Yes/No", select: "Choice", form: "Form", external: "Outside", review: "Review" };

export const state = {
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
  picked: new Map(), // interaction_id -> question, ticked for a bulk decision
  pickedEnded: new Map(), // interaction_id -> "answered" | "removed": a ticked question resolved elsewhere
  dirty: true,
  scheduled: false,
  tab: "pending", // or "done"
  done: [], // done items, newest first (docs/doors/done.md)
  doneTotal: 0,
  doneNext: null,
  doneTimer: null,
};

// The open question, if any.
export function openCard() {
  return state.selected ? state.cards.get(state.selected) : null;
}
