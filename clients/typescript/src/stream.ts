/**
 * The inbox as a live feed: `GET /api/interactions/stream` (docs/doors/stream.md), read with
 * `fetch` so it carries the bearer token (a browser `EventSource` cannot), and resumed with
 * `Last-Event-ID` after every drop so nothing that landed meanwhile is missed.
 */

import { createParser, type EventSourceMessage } from "eventsource-parser";

import { errorFrom, type LaybyError } from "./errors.js";
import type { components } from "./openapi.js";

/** A question as the list door returns it, which is what an `interaction.add` frame carries. */
export type PendingQuestion = components["schemas"]["PendingQuestion"];

/** One frame of the feed. `id` is the event's stream sequence: pass the last one to resume. */
export type InboxEvent =
  | { id: string; event: "interaction.add"; data: PendingQuestion }
  | { id: string; event: "interaction.answered" | "interaction.removed"; data: { interaction_id: string; group_id: string } }
  | { id: string; event: "stream.evicted"; data: unknown };

export interface StreamOptions {
  /** Resume right after this id (the last one seen); absent: only what happens from now on. */
  lastEventId?: string;
  /** Ends the stream (the iterator returns). */
  signal?: AbortSignal;
  /** Reconnect after a drop, resuming from the last id (default true). */
  reconnect?: boolean;
  /**
   * Milliseconds before reconnecting when the server gave no `retry:` (default 1000); doubled for
   * each connection in a row that fails, up to 30 s.
   */
  retryMs?: number;
  /**
   * Called on each (re)connection with `Layby-Stream-Seq`: the frames that follow are the
   * events after that sequence. Seed a list from the list door, then overlay the frames.
   */
  onOpen?: (streamSeq: string) => void;
}

/** Statuses worth a reconnect: the door is busy or briefly without its log, or a proxy failed. */
const RETRYABLE = new Set([429, 500, 502, 503, 504]);

/** Resolves after `ms`, or at once when `signal` aborts (the caller looks which). */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

function frame(message: EventSourceMessage): InboxEvent {
  return { id: message.id ?? "", event: message.event as InboxEvent["event"], data: JSON.parse(message.data) } as InboxEvent;
}

/** A refused connection, its body read as JSON when it is JSON. */
async function refusal(response: Response): Promise<LaybyError> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the text is the message
  }
  return errorFrom(response, body);
}

/**
 * The frames of the feed, in order, each once: after a drop it reconnects with the last id it
 * yielded, so the door serves what landed in between. A refusal that a retry cannot fix (401,
 * 403, 400) is thrown; aborting `signal` ends the iteration.
 */
export async function* stream(
  url: string,
  headers: Record<string, string>,
  fetcher: typeof fetch,
  options: StreamOptions = {},
): AsyncGenerator<InboxEvent, void, undefined> {
  const { signal, reconnect = true, onOpen } = options;
  let lastEventId = options.lastEventId;
  let retryMs = options.retryMs ?? 1000;
  // Connections that failed in a row: each waits twice as long as the last, at most 30 s.
  let failures = 0;
  const backoff = (): number => Math.min(retryMs * 2 ** failures++, 30_000);
  while (!signal?.aborted) {
    let response: Response;
    try {
      response = await fetcher(url, {
        headers: {
          ...headers,
          Accept: "text/event-stream",
          ...(lastEventId ? { "Last-Event-ID": lastEventId } : {}),
        },
        signal,
      });
    } catch (error) {
      if (signal?.aborted) return;
      if (!reconnect) throw error;
      await sleep(backoff(), signal);
      continue;
    }
    if (response.status !== 200 || response.body === null) {
      const error = await refusal(response);
      if (!reconnect || !RETRYABLE.has(response.status)) throw error;
      await sleep(error.retryAfter !== undefined ? error.retryAfter * 1000 : backoff(), signal);
      continue;
    }
    failures = 0;
    onOpen?.(response.headers.get("Layby-Stream-Seq") ?? "");
    const pending: InboxEvent[] = [];
    const parser = createParser({
      onEvent: (message) => {
        if (message.event !== undefined) pending.push(frame(message));
      },
      onRetry: (ms) => {
        retryMs = ms;
      },
    });
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(decoder.decode(value, { stream: true }));
        while (pending.length > 0) {
          const event = pending.shift() as InboxEvent;
          lastEventId = event.id;
          yield event;
        }
      }
    } catch (error) {
      if (signal?.aborted) return;
      if (!reconnect) throw error;
    } finally {
      reader.releaseLock();
      await response.body.cancel().catch(() => undefined);
    }
    if (!reconnect || signal?.aborted) return;
    await sleep(retryMs, signal);
  }
}
