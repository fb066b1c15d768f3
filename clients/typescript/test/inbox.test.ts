/**
 * How `inbox()` joins the list and the stream, on a scripted door: a list that changes between
 * the reads of its pages, and frames that arrive while it loads. (client.test.ts runs the view
 * against a real `layby up`; a list of several pages while it changes is what this one adds.)
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { inbox, type InboxSource, type SeedPage } from "../src/inbox.js";
import type { InboxEvent, PendingQuestion, StreamOptions } from "../src/stream.js";

function question(id: string): PendingQuestion {
  return { interaction_id: id, group_id: "g", question: id } as PendingQuestion;
}

/**
 * A door whose log is a list of events: the list door reads the pending set at the log's end
 * (oldest first), the stream serves the events after its start position. `beforeRead` runs before
 * each page is read, so a test can change the log between two pages.
 */
class ScriptedDoor implements InboxSource {
  log: InboxEvent[] = [];
  reads: number[] = [];
  beforeRead: (page: number) => void = () => undefined;
  private listeners: (() => void)[] = [];

  add(id: string): void {
    this.append({ id: "", event: "interaction.add", data: question(id) });
  }

  answer(id: string): void {
    this.append({ id: "", event: "interaction.answered", data: { interaction_id: id, group_id: "g" } });
  }

  private append(event: InboxEvent): void {
    this.log.push({ ...event, id: String(this.log.length + 1) } as InboxEvent);
    for (const wake of this.listeners.splice(0)) wake();
  }

  pending(): string[] {
    const open = new Set<string>();
    for (const e of this.log) {
      if (e.event === "interaction.add") open.add(e.data.interaction_id);
      else if (e.event !== "stream.evicted") open.delete(e.data.interaction_id);
    }
    return [...open];
  }

  async listPage(page: number, _after: number, _signal: AbortSignal | undefined): Promise<SeedPage> {
    this.beforeRead(page);
    this.reads.push(page);
    const all = this.pending();
    const items = all.slice((page - 1) * 200, page * 200).map(question);
    return { items, total: all.length, nextPage: page * 200 < all.length ? page + 1 : null, seq: this.log.length };
  }

  async *stream(options: StreamOptions): AsyncGenerator<InboxEvent, void, undefined> {
    let at = this.log.length;
    options.onOpen?.(String(at));
    while (!options.signal?.aborted) {
      while (at < this.log.length) yield this.log[at++] as InboxEvent;
      await new Promise<void>((resolve) => {
        this.listeners.push(resolve);
        options.signal?.addEventListener("abort", () => resolve(), { once: true });
      });
    }
  }
}

/** The view's questions once `ok` holds of them. */
async function viewUntil(
  view: AsyncGenerator<{ questions: ReadonlyMap<string, PendingQuestion> }>,
  ok: (ids: Set<string>) => boolean,
): Promise<Set<string>> {
  for (;;) {
    const { value, done } = await view.next();
    assert.ok(!done);
    const ids = new Set(value.questions.keys());
    if (ok(ids)) return ids;
  }
}

describe("the inbox view over a list of several pages", () => {
  test("a question answered while the pages are read moves no other out of reach", async () => {
    const door = new ScriptedDoor();
    for (let i = 0; i < 450; i++) door.add(`q${i}`);
    let changed = false;
    door.beforeRead = (page) => {
      // Once the last page has been read, answer a question on the first: every question after
      // it moves one place towards the first page.
      if (!changed && door.reads.length >= 2 && page < 3) {
        changed = true;
        door.answer("q10");
      }
    };
    const controller = new AbortController();
    const view = inbox(door, { signal: controller.signal });
    const ids = await viewUntil(view, (got) => got.size === 449 && !got.has("q10"));
    assert.deepEqual([...ids].sort(), door.pending().sort());
    assert.ok(changed);
    controller.abort();
    assert.equal((await view.next()).done, true);
  });

  test("a question asked while the pages are read arrives, and one answered meanwhile goes", async () => {
    const door = new ScriptedDoor();
    for (let i = 0; i < 250; i++) door.add(`q${i}`);
    door.beforeRead = (page) => {
      if (page === 1 && door.reads.length === 2) {
        door.add("late");
        door.answer("q249");
      }
    };
    const controller = new AbortController();
    const view = inbox(door, { signal: controller.signal });
    const ids = await viewUntil(view, (got) => got.has("late") && !got.has("q249"));
    assert.deepEqual([...ids].sort(), door.pending().sort());
    door.answer("late");
    await viewUntil(view, (got) => !got.has("late"));
    controller.abort();
  });

  test("a list that fits one page is read once", async () => {
    const door = new ScriptedDoor();
    for (let i = 0; i < 3; i++) door.add(`q${i}`);
    const controller = new AbortController();
    const view = inbox(door, { signal: controller.signal });
    await viewUntil(view, (got) => got.size === 3);
    assert.deepEqual(door.reads, [1]);
    controller.abort();
  });
});
