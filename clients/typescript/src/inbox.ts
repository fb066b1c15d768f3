/**
 * The inbox as a live view: the list door seeds it and the stream keeps it current, joined the
 * way docs/doors/list.md ("Seeding the stream") says, so no question is missed and none counted
 * twice.
 *
 * On each connection the stream says where its frames start (`Layby-Stream-Seq`). When that is
 * not right after the last frame seen (the first connection, or a resume the door could not
 * honour), the view reloads the list with `after=` that position and applies only the frames after
 * the list's own position; frames that arrive meanwhile wait for it. A connection that resumed
 * where the last one stopped needs no reload: the door served what landed in between.
 *
 * The list is paged, and each page is read at its own position (see `load`).
 */

import type { InboxEvent, PendingQuestion, StreamOptions } from "./stream.js";

/** One page of the list, with the stream position it reflects. */
export interface SeedPage {
  items: PendingQuestion[];
  total: number;
  nextPage: number | null;
  seq: number;
}

export interface InboxSource {
  stream(options: StreamOptions): AsyncGenerator<InboxEvent, void, undefined>;
  /** One page of the list, oldest first, `PAGE_SIZE` a page, read after stream position `after`. */
  listPage(page: number, after: number, signal: AbortSignal | undefined): Promise<SeedPage>;
}

export interface InboxOptions {
  /** Ends the view (the iterator returns). */
  signal?: AbortSignal;
  /** Milliseconds before reconnecting a dropped stream when the door gave no `retry:` (1000). */
  retryMs?: number;
}

/** The view after a change: every pending question the token may see, by id. */
export interface InboxSnapshot {
  questions: ReadonlyMap<string, PendingQuestion>;
  /** What changed it: the list loaded (`seeded`), or a frame of the stream. */
  change: "seeded" | InboxEvent;
}

type Item = { kind: "frame"; frame: InboxEvent } | { kind: "open"; seq: number } | { kind: "end"; error?: unknown };

export async function* inbox(source: InboxSource, options: InboxOptions = {}): AsyncGenerator<InboxSnapshot, void, undefined> {
  const questions = new Map<string, PendingQuestion>();
  const queue: Item[] = [];
  let wake: (() => void) | undefined;
  const push = (item: Item): void => {
    queue.push(item);
    wake?.();
  };
  const next = async (): Promise<Item> => {
    while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
    wake = undefined;
    return queue.shift() as Item;
  };

  // Its own signal, so that leaving the view ends the stream at once, whatever it is waiting on.
  const stop = new AbortController();
  const abort = (): void => stop.abort();
  options.signal?.addEventListener("abort", abort, { once: true });
  if (options.signal?.aborted) stop.abort();
  const frames = source.stream({
    signal: stop.signal,
    retryMs: options.retryMs,
    onOpen: (seq) => push({ kind: "open", seq: Number(seq) }),
  });
  const pumping = (async () => {
    try {
      for await (const frame of frames) push({ kind: "frame", frame });
      push({ kind: "end" });
    } catch (error) {
      push({ kind: "end", error });
    }
  })();

  let lastSeen: number | undefined; // the id of the last frame applied or skipped
  let listedUpTo = -1; // frames at or before this are in the list already
  try {
    for (;;) {
      const item = await next();
      if (item.kind === "end") {
        if (item.error !== undefined) throw item.error;
        return;
      }
      if (item.kind === "open") {
        if (lastSeen !== undefined && item.seq === lastSeen) continue; // resumed without a gap
        // Frames queued behind this point wait while the list loads: `next()` is not called.
        listedUpTo = await load(source, questions, item.seq, stop.signal);
        lastSeen = item.seq;
        yield { questions, change: "seeded" };
        continue;
      }
      const { frame } = item;
      lastSeen = Number(frame.id);
      if (Number(frame.id) <= listedUpTo) continue; // the list holds it already
      if (frame.event === "interaction.add") questions.set(frame.data.interaction_id, frame.data);
      else if (frame.event === "interaction.answered" || frame.event === "interaction.removed") {
        questions.delete(frame.data.interaction_id);
      } else continue;
      yield { questions, change: frame };
    }
  } finally {
    stop.abort();
    options.signal?.removeEventListener("abort", abort);
    await pumping;
  }
}

/** The most questions one page of the list holds, and the passes a changing list is read in. */
const PAGE_SIZE = 200;
const PASSES = 3;

/**
 * Fill `questions` from the list door, read after `after`; the stream position from which frames
 * are still to be applied. One page holds them all: it is one snapshot. More than a page: the
 * pages are read oldest first, from the last page to the first, so a question leaving the list
 * moves the ones after it towards pages still to be read, never past the reader; the pass is
 * repeated (at most `PASSES` times) until every page reflects the same position, and frames are
 * applied from the first page read on.
 */
async function load(
  source: InboxSource,
  questions: Map<string, PendingQuestion>,
  after: number,
  signal: AbortSignal,
): Promise<number> {
  const first = await source.listPage(1, after, signal);
  const pages = Math.max(1, Math.ceil(first.total / PAGE_SIZE));
  if (pages === 1 && first.nextPage === null) {
    questions.clear();
    for (const question of first.items) questions.set(question.interaction_id, question);
    return first.seq;
  }
  let from = first.seq;
  for (let pass = 1; pass <= PASSES; pass++) {
    questions.clear();
    const positions = new Set<number>();
    for (let page = pages; page >= 1; page--) {
      const loaded = await source.listPage(page, after, signal);
      if (page === pages) from = loaded.seq;
      for (const question of loaded.items) questions.set(question.interaction_id, question);
      positions.add(loaded.seq);
    }
    if (positions.size === 1) break;
  }
  return from;
}
