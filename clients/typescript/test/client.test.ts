/**
 * The client against a live Layby (`layby up`): LAYBY_URL and LAYBY_TOKEN name it, and
 * LAYBY_PYTHON is the Python that runs `layby` for the other side (answering from the CLI).
 * tests/e2e/test_typescript_client.py starts the stack and runs these.
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";
import { promisify } from "node:util";

import {
  BadInputError,
  ConflictError,
  InteractionRemovedError,
  InteractionTimeoutError,
  Layby,
  NotFoundError,
  UnauthorizedError,
  type InboxEvent,
} from "../src/index.js";

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these through tests/e2e/test_typescript_client.py`);
  return value;
}

const baseUrl = setting("LAYBY_URL");
const token = setting("LAYBY_TOKEN");
const python = setting("LAYBY_PYTHON");
const layby = new Layby({ baseUrl, token });
const run = promisify(execFile);

/** Answer from the Python side: the `layby` CLI, configured by the runtime file of `layby up`. */
async function answerFromPython(interactionId: string, answer: unknown): Promise<void> {
  await run(python, ["-m", "layby.cli", "interactions", "answer", interactionId, "--answer", JSON.stringify(answer)]);
}

/** `read()`'s value once `ok` holds of it: the lists are read models, a moment behind the log. */
async function eventually<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${what}: not within 10 s`);
}

/** The question asked with this text, once the list shows it. */
async function listedId(question: string): Promise<string> {
  const page = await eventually(
    () => layby.list({ q: question }),
    (p) => p.items.some((q) => q.question === question),
    `${question} listed`,
  );
  return page.items.find((q) => q.question === question)!.interaction_id;
}

/** What a frame is about: the question's id, and its text for an `interaction.add`. */
function about(frame: InboxEvent): { id: string | undefined; question: string | undefined } {
  const data = frame.data as { interaction_id?: string; question?: string };
  return { id: data.interaction_id, question: data.question };
}

/** Frames about these questions (by text, or by id once known), until `until` says enough. */
async function collect(
  frames: AsyncGenerator<InboxEvent>,
  mine: (frame: InboxEvent) => boolean,
  until: (seen: InboxEvent[]) => boolean,
): Promise<InboxEvent[]> {
  const seen: InboxEvent[] = [];
  for await (const frame of frames) {
    if (mine(frame)) seen.push(frame);
    if (until(seen)) break;
  }
  return seen;
}

/**
 * A `fetch` whose first stream connection is cut right after the chunk that holds `marker`; the
 * `Last-Event-ID` each stream connection sent (null: none).
 */
function cutAfter(marker: string): { fetch: typeof fetch; lastEventIds: (string | null)[] } {
  const lastEventIds: (string | null)[] = [];
  let cut = false;
  const cutting: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (!String(input).endsWith("/api/interactions/stream") || response.body === null) return response;
    lastEventIds.push(new Headers(init?.headers).get("Last-Event-ID"));
    if (lastEventIds.length > 1) return response;
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (cut) {
          controller.error(new Error("connection cut"));
          await reader.cancel();
          return;
        }
        const { done, value } = await reader.read();
        if (done) return controller.close();
        controller.enqueue(value);
        cut = new TextDecoder().decode(value).includes(marker);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
  return { fetch: cutting, lastEventIds };
}

describe("asking", () => {
  test("an ask answered from the Python side is the client's outcome", async () => {
    const question = `Ship ${randomUUID()}?`;
    const asked = layby.askUser({ question, answer_format: "select", options: ["yes", "no"], timeout: 60 });
    const id = await listedId(question);
    await answerFromPython(id, "yes");
    assert.equal(await asked, "yes");
    const outcome = await layby.outcome(id);
    assert.equal(outcome.status, "answered");
    assert.equal(outcome.answer, "yes");
  });

  test("a poll that fails on the way is sent again, and the answer still arrives", async () => {
    let failures = 0;
    const flaky: typeof fetch = async (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (url.includes("/outcome") && failures < 2) {
        failures++;
        throw new TypeError("fetch failed"); // what fetch throws when the connection drops
      }
      return fetch(input, init);
    };
    const client = new Layby({ baseUrl, token, fetch: flaky });
    const question = `Through a bad network ${randomUUID()}`;
    const asked = client.askUser({ question, timeout: 60 });
    const id = await listedId(question);
    await answerFromPython(id, "still here");
    assert.equal(await asked, "still here");
    assert.equal(failures, 2);
  });

  test("a poll that keeps failing is given up after giveUpAfterSeconds, with the last failure", async () => {
    const down: typeof fetch = async (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (url.includes("/outcome")) throw new TypeError("fetch failed");
      return fetch(input, init);
    };
    const client = new Layby({ baseUrl, token, fetch: down });
    const { interaction_id } = await client.ask({ question: `Nobody can poll ${randomUUID()}`, timeout: 60 });
    await assert.rejects(client.waitForOutcome(interaction_id, { giveUpAfterSeconds: 1 }), TypeError);
    await layby.withdraw(interaction_id);
  });

  test("a question nobody answers ends in an InteractionTimeoutError at its deadline", async () => {
    await assert.rejects(
      layby.askUser({ question: `Nobody answers ${randomUUID()}`, timeout: 1 }, { pollSeconds: 5 }),
      (error: unknown) => error instanceof InteractionTimeoutError && error.reason === "timeout",
    );
  });

  test("aborting askUser withdraws its question", async () => {
    const question = `Withdraw me ${randomUUID()}`;
    const controller = new AbortController();
    const ended = layby.askUser({ question, timeout: 60 }, { signal: controller.signal }).then(
      () => assert.fail("askUser resolved"),
      (error: unknown) => error,
    );
    const id = await listedId(question);
    controller.abort();
    assert.equal((await ended as Error).name, "AbortError");
    const outcome = await layby.outcome(id);
    assert.equal(outcome.status, "removed");
    assert.equal(outcome.reason, "cancelled");
  });

  test("a question withdrawn by someone else ends askUser in an InteractionRemovedError", async () => {
    const question = `Changed my mind ${randomUUID()}`;
    // Its rejection is taken as it happens: it may come before `withdraw` returns.
    const ended = layby.askUser({ question, timeout: 60 }).then(
      () => assert.fail("askUser resolved"),
      (error: unknown) => error,
    );
    const id = await listedId(question);
    assert.equal((await layby.withdraw(id)).outcome, "pruned");
    const error = await ended;
    assert.ok(error instanceof InteractionRemovedError, String(error));
    assert.equal(error.interactionId, id);
    assert.equal(error.reason, "cancelled");
    assert.equal((await layby.waitForOutcome(id)).status, "removed");
  });

  test("answering through the client resolves the question once", async () => {
    const { interaction_id } = await layby.ask({ question: `Confirm ${randomUUID()}`, answer_format: "confirm", timeout: 60 });
    const answered = await layby.answer(interaction_id, true);
    assert.equal(answered.interaction_id, interaction_id);
    assert.equal((await layby.waitForOutcome(interaction_id)).answer, true);
    await assert.rejects(layby.answer(interaction_id, false), ConflictError);
  });
});

describe("refusals are typed errors", () => {
  test("a bad body is a BadInputError naming the field", async () => {
    await assert.rejects(layby.ask({ question: "Pick one", answer_format: "select" }), (error: unknown) => {
      assert.ok(error instanceof BadInputError, String(error));
      assert.equal(error.status, 400);
      assert.equal(error.field, "options");
      return true;
    });
    await assert.rejects(layby.ask({ question: "When?", timeout: -1 }), (error: unknown) => {
      assert.ok(error instanceof BadInputError, String(error));
      assert.equal(error.field, "timeout");
      return true;
    });
  });

  test("an unknown token is an UnauthorizedError", async () => {
    const stranger = new Layby({ baseUrl, token: "not-a-token" });
    await assert.rejects(stranger.list(), (error: unknown) => {
      assert.ok(error instanceof UnauthorizedError, String(error));
      assert.equal(error.error, "invalid bearer token");
      return true;
    });
    await assert.rejects(stranger.stream().next(), UnauthorizedError);
  });

  test("an unknown question is a NotFoundError", async () => {
    await assert.rejects(layby.answer(randomUUID(), "x"), (error: unknown) => {
      assert.ok(error instanceof NotFoundError, String(error));
      assert.equal(error.error, "Interaction not found");
      return true;
    });
    await assert.rejects(layby.outcome(randomUUID()), NotFoundError);
  });
});

describe("the inbox", () => {
  test("a pending question is listed with what the list door says of it", async () => {
    const question = `Listed ${randomUUID()}`;
    const { interaction_id } = await layby.ask({ question, answer_format: "select", options: ["a", "b"], timeout: 60 });
    assert.equal(await listedId(question), interaction_id);
    const page = await layby.list({ q: question });
    const item = page.items.find((q) => q.interaction_id === interaction_id);
    assert.ok(item, "the question is listed");
    assert.equal(item.answer_format, "select");
    await layby.withdraw(interaction_id);
  });

  test("listAll walks every page", async () => {
    const tag = randomUUID();
    const asked = [];
    for (let i = 0; i < 5; i++) asked.push((await layby.ask({ question: `Page ${i} ${tag}`, timeout: 60 })).interaction_id);
    await eventually(() => layby.list({ q: tag }), (p) => p.total === 5, "all five listed");
    const seen = [];
    for await (const question of layby.listAll({ q: tag, pageSize: 2 })) seen.push(question.interaction_id);
    assert.deepEqual([...seen].sort(), [...asked].sort());
    for (const id of asked) await layby.withdraw(id);
  });

  test("a stream resumed from its last id gets what landed while it was away, without a gap", async () => {
    const first = `Before the drop ${randomUUID()}`;
    const opened = new AbortController();
    let firstAdd: InboxEvent | undefined;
    let open: () => void = () => undefined;
    const connected = new Promise<void>((ok) => (open = ok));
    const frames = layby.stream({ signal: opened.signal, onOpen: () => open() });
    // The frame may arrive before `ask` returns the id: it is recognised by its text.
    const seenFirst = collect(frames, (f) => about(f).question === first, (seen) => seen.length >= 1);
    await connected;
    const a = await layby.ask({ question: first, timeout: 60 });
    [firstAdd] = await seenFirst;
    assert.equal(firstAdd && about(firstAdd).id, a.interaction_id);
    opened.abort();
    assert.equal(firstAdd?.event, "interaction.add");

    // Away: A is answered from Python and B is asked.
    await answerFromPython(a.interaction_id, "done");
    const b = await layby.ask({ question: `While away ${randomUUID()}`, timeout: 60 });
    const ids = new Set([a.interaction_id, b.interaction_id]);

    const resumed = layby.stream({ lastEventId: firstAdd!.id });
    const seen = await collect(resumed, (f) => ids.has(about(f).id ?? ""), (got) => got.length >= 2);
    await resumed.return();
    assert.deepEqual(
      seen.map((f) => [f.event, (f.data as { interaction_id: string }).interaction_id]),
      [
        ["interaction.answered", a.interaction_id],
        ["interaction.add", b.interaction_id],
      ],
    );
    const sequence = [firstAdd!, ...seen].map((f) => Number(f.id));
    assert.deepEqual([...sequence].sort((x, y) => x - y), sequence, "frames in stream order");
    assert.ok(sequence[0]! < sequence[1]!, "nothing before the resume point again");
    await layby.withdraw(b.interaction_id);
  });

  test("a dropped connection reconnects by itself and resumes after the last frame", async () => {
    const question = `Cut after me ${randomUUID()}`;
    const { fetch: cutting, lastEventIds: lastIds } = cutAfter(question);
    const client = new Layby({ baseUrl, token, fetch: cutting });
    let open: () => void = () => undefined;
    const connected = new Promise<void>((ok) => (open = ok));
    const frames = client.stream({ retryMs: 200, onOpen: () => open() });
    let id: string | undefined;
    const seen: InboxEvent[] = [];
    const reading = (async () => {
      for await (const frame of frames) {
        if (about(frame).question === question) {
          id = about(frame).id as string;
          seen.push(frame);
          // Answered while the client holds this frame: the connection is cut on its next read,
          // so the answer lands between the two connections.
          await answerFromPython(id, "through the cut");
        } else if (id !== undefined && about(frame).id === id) {
          seen.push(frame);
          break;
        }
      }
    })();
    await connected;
    const { interaction_id } = await layby.ask({ question, timeout: 60 });
    await reading;
    assert.equal(id, interaction_id);
    assert.equal(lastIds.length, 2, "one reconnection");
    assert.equal(lastIds[0], null);
    assert.equal(lastIds[1], seen[0]?.id, "resumed right after the last frame it had");
    assert.deepEqual(
      seen.map((f) => f.event),
      ["interaction.add", "interaction.answered"],
    );
  });
});

describe("the inbox view", () => {
  test("seeded from the list, kept current by the stream, and not reloaded after a resumed drop", async () => {
    const tag = randomUUID();
    const a = await layby.ask({ question: `Before the view ${tag}`, timeout: 60 });
    await listedId(`Before the view ${tag}`);
    const { fetch: cutting, lastEventIds } = cutAfter(`cut here ${tag}`);
    const client = new Layby({ baseUrl, token, fetch: cutting });
    const controller = new AbortController();
    const view = client.inbox({ signal: controller.signal, retryMs: 200 });
    const changes: string[] = [];
    const until = async (ok: (q: ReadonlyMap<string, unknown>) => boolean): Promise<void> => {
      for (;;) {
        const { value, done } = await view.next();
        assert.ok(!done, "the view ended early");
        changes.push(value.change === "seeded" ? "seeded" : value.change.event);
        if (ok(value.questions)) return;
      }
    };
    await until((q) => q.has(a.interaction_id)); // from the list
    assert.deepEqual(changes, ["seeded"]);
    const b = await layby.ask({ question: `cut here ${tag}`, timeout: 60 });
    await until((q) => q.has(b.interaction_id)); // from the stream, which is then cut
    await answerFromPython(a.interaction_id, "seen");
    await until((q) => !q.has(a.interaction_id)); // from the stream, resumed
    controller.abort();
    assert.equal((await view.next()).done, true);
    assert.equal(lastEventIds.length, 2, "the stream reconnected once");
    assert.equal(changes.filter((c) => c === "seeded").length, 1, "a resumed stream needs no reload");
    await layby.withdraw(b.interaction_id);
  });
});

describe("runs and notifications", () => {
  test("a run started over HTTP is read back, listed and cancelled", async () => {
    const flow = `ts-client-${randomUUID().slice(0, 8)}`;
    const { run_id } = await layby.startRun({ flow, input: { order: 42 } });
    const detail = await layby.getRun(run_id);
    assert.equal(detail.run_id, run_id);
    assert.equal(detail.flow, flow);
    const page = await eventually(() => layby.listRuns({ flow }), (p) => p.items.length > 0, "the run listed");
    assert.deepEqual(
      page.items.map((r) => r.run_id),
      [run_id],
    );
    const cancelled = await layby.api.POST("/api/runs/{run_id}/cancel", { params: { path: { run_id } } });
    assert.equal(cancelled.response.status, 200);
    await assert.rejects(layby.getRun(randomUUID()), NotFoundError);
  });

  test("a notification is recorded to the feed", async () => {
    const message = `Deployed ${randomUUID()}`;
    assert.match(await layby.notify({ message }), /recorded/);
    const feed = await layby.api.GET("/api/notifications");
    assert.ok(feed.data?.data.notifications.some((n) => n.message === message));
  });
});
