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
 * The list is paged, and each page is read at its own position: when the pages of one load do not
 * all reflect the same position (a question came or went between two of them, and another may
 * have moved from one page to the next), the load is repeated until they do.
 */

import type { InboxEvent, PendingQuestion, StreamOptions } from "./stream.js";

/** One page of the list, with the stream position it reflects. */
export interface SeedPage {
  items: PendingQuestion[];
  nextPage: number | null;
  seq: number;
}

export interface InboxSource {
  stream(options: StreamOptions): AsyncGenerator<InboxEvent, void, undefined>;
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

/**
 * Fill `questions` from the list door, read after `after`; the stream position the whole list
 * reflects. Repeated until every page of one pass was read at the same position.
 */
async function load(
  source: InboxSource,
  questions: Map<string, PendingQuestion>,
  after: number,
  signal: AbortSignal,
): Promise<number> {
  for (;;) {
    questions.clear();
    const positions = new Set<number>();
    let page: number | null = 1;
    while (page !== null) {
      const loaded: SeedPage = await source.listPage(page, after, signal);
      for (const question of loaded.items) questions.set(question.interaction_id, question);
      positions.add(loaded.seq);
      page = loaded.nextPage;
    }
    if (positions.size === 1) return [...positions][0] as number;
  }
}
