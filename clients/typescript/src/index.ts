/**
 * A typed client for Layby's HTTP doors (docs/clients.md).
 *
 * The types are generated from the doors' OpenAPI document (`contracts/schema/openapi.json`,
 * `npm run generate`) and every call goes through `openapi-fetch`, so a request or a response
 * that does not match the document does not compile. This file is the thin layer over it: asking
 * and waiting for the outcome, answering, the inbox and its live feed, runs, notifications, and
 * refusals as typed errors. Anything else the doors offer is on `client.api`, typed the same way.
 */

import createClient, { type Client } from "openapi-fetch";

import {
  errorFrom,
  InteractionRemovedError,
  InteractionTimeoutError,
  LaybyError,
  UnavailableError,
} from "./errors.js";
import type { components, operations, paths } from "./openapi.js";
import { inbox, type InboxOptions, type InboxSnapshot } from "./inbox.js";
import { sleep, stream, type InboxEvent, type PendingQuestion, type StreamOptions } from "./stream.js";

export * from "./errors.js";
export type { InboxEvent, PendingQuestion, StreamOptions } from "./stream.js";
export type { InboxOptions, InboxSnapshot } from "./inbox.js";
export type { components, operations, paths } from "./openapi.js";

type Schemas = components["schemas"];
export type AskRequest = Schemas["AskRequest"];
export type AskCreated = Schemas["AskCreatedData"];
export type Outcome = Schemas["OutcomeData"];
export type Answered = Schemas["AnsweredData"];
export type Withdrawn = Schemas["WithdrawnData"];
export type InteractionPage = Schemas["InteractionPageData"];
export type ListQuery = NonNullable<operations["listInteractions"]["parameters"]["query"]>;
export type StartRunRequest = Schemas["StartRunRequest"];
export type RunStarted = Schemas["RunStartData"];
export type Run = Schemas["RunDetail"];
export type RunPage = Schemas["RunPageData"];
export type RunsQuery = NonNullable<operations["listRuns"]["parameters"]["query"]>;
export type NotifyRequest = Schemas["NotifyRequest"];

export interface LaybyOptions {
  /** Where the doors are, e.g. `http://127.0.0.1:8000` (what `layby up` prints as the inbox). */
  baseUrl: string;
  /** A bearer token: an operator's, or a user's (`LAYBY_API_TOKENS`). */
  token: string;
  /** Another `fetch` (a proxy agent, a test double); default the global one. */
  fetch?: typeof fetch;
}

export interface WaitOptions {
  /** Seconds each poll may wait for the outcome (the door lowers it to its own maximum). Default 30. */
  pollSeconds?: number;
  /** Stops waiting; `askUser` then withdraws its question, as the Python SDK does on cancel. */
  signal?: AbortSignal;
  /**
   * Seconds of failed polls in a row (the network, a door restarting: 502, 503, 504) after which
   * the last failure is thrown. Until then each is retried, 1 s apart and doubling up to 10 s
   * (or after the door's `Retry-After`). Default 60.
   */
  giveUpAfterSeconds?: number;
}

/** The settled outcome of a question: never `pending`. */
export type FinalOutcome = Outcome & { status: "answered" | "expired" | "removed" };

interface Result<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** The body of a successful call, or the typed error of a refused one. */
function ok<T>(result: Result<T>): T {
  if (result.error !== undefined || result.data === undefined) throw errorFrom(result.response, result.error);
  return result.data;
}

/** A poll that failed on the way: the network (fetch's TypeError), or a door busy or restarting. */
function retryable(error: unknown): boolean {
  if (error instanceof UnavailableError) return true;
  if (error instanceof LaybyError) return error.status === 502 || error.status === 504;
  return error instanceof TypeError;
}


export class Layby {
  /** Every door, typed from the OpenAPI document, with the token already attached. */
  readonly api: Client<paths>;
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly fetcher: typeof fetch;

  constructor(options: LaybyOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.headers = { Authorization: `Bearer ${options.token}` };
    this.fetcher = options.fetch ?? globalThis.fetch;
    this.api = createClient<paths>({ baseUrl: this.baseUrl, headers: this.headers, fetch: this.fetcher });
  }

  /** Record a question (`POST /api/asks`); it waits for an answer whether or not anyone polls. */
  async ask(body: AskRequest): Promise<AskCreated> {
    return ok(await this.api.POST("/api/asks", { body })).data;
  }

  /** What became of a question now, or within `wait` seconds (`pending` when the wait ends first). */
  async outcome(interactionId: string, options: { wait?: number; signal?: AbortSignal } = {}): Promise<Outcome> {
    const query = options.wait === undefined ? {} : { wait: options.wait };
    const result = await this.api.GET("/api/interactions/{interaction_id}/outcome", {
      params: { path: { interaction_id: interactionId }, query },
      signal: options.signal,
    });
    return ok(result).data;
  }

  /**
   * Long-poll until the question is answered, expires or is removed. A door at its bound of
   * waiting polls (503 with `Retry-After`) is waited out and polled again.
   */
  async waitForOutcome(interactionId: string, options: WaitOptions = {}): Promise<FinalOutcome> {
    const wait = options.pollSeconds ?? 30;
    const giveUpAfter = (options.giveUpAfterSeconds ?? 60) * 1000;
    let failingSince: number | undefined;
    let backoff = 1;
    for (;;) {
      let outcome: Outcome;
      try {
        outcome = await this.outcome(interactionId, { wait, signal: options.signal });
      } catch (error) {
        // A poll changes nothing, so any poll that failed on the way can be sent again.
        if (options.signal?.aborted || !retryable(error)) throw error;
        failingSince ??= Date.now();
        if (Date.now() - failingSince >= giveUpAfter) throw error;
        const after = error instanceof LaybyError && error.retryAfter !== undefined ? error.retryAfter : backoff;
        backoff = Math.min(backoff * 2, 10);
        await sleep(after * 1000, options.signal);
        options.signal?.throwIfAborted();
        continue;
      }
      failingSince = undefined;
      backoff = 1;
      if (outcome.status !== "pending") return outcome as FinalOutcome;
    }
  }

  /**
   * Ask and wait for the answer, as the Python SDK's `ask_user`: the answer, or an
   * `InteractionTimeoutError` when the deadline passes, or an `InteractionRemovedError`. Aborting
   * `signal` withdraws the question.
   */
  async askUser(body: AskRequest, options: WaitOptions = {}): Promise<unknown> {
    const { interaction_id } = await this.ask(body);
    let outcome: FinalOutcome;
    try {
      outcome = await this.waitForOutcome(interaction_id, options);
    } catch (error) {
      if (options.signal?.aborted) await this.withdraw(interaction_id).catch(() => undefined);
      throw error;
    }
    if (outcome.status === "answered") return outcome.answer;
    if (outcome.status === "expired") throw new InteractionTimeoutError(interaction_id, outcome.reason);
    throw new InteractionRemovedError(interaction_id, outcome.reason, outcome.detail);
  }

  /** Withdraw a pending question; says whether it was removed now, before, or answered first. */
  async withdraw(interactionId: string): Promise<Withdrawn> {
    const result = await this.api.DELETE("/api/interactions/{interaction_id}", {
      params: { path: { interaction_id: interactionId } },
    });
    return ok(result).data;
  }

  /** Answer a pending question; the first resolution recorded wins (409 `ConflictError` after). */
  async answer(interactionId: string, answer: unknown): Promise<Answered> {
    const result = await this.api.POST("/api/interactions/{interaction_id}/answer", {
      params: { path: { interaction_id: interactionId } },
      body: { answer },
    });
    return ok(result).data;
  }

  /** One page of the pending questions this token may see. */
  async list(query: ListQuery = {}): Promise<InteractionPage> {
    return ok(await this.api.GET("/api/interactions", { params: { query } })).data;
  }

  /** Every pending question that matches `query`, page after page (`next_page`), in its order. */
  async *listAll(query: ListQuery = {}): AsyncGenerator<PendingQuestion, void, undefined> {
    let page: number | null = query.page ?? 1;
    while (page !== null) {
      const result = await this.list({ ...query, page });
      yield* result.items;
      page = result.next_page ?? null;
    }
  }

  /**
   * The inbox as a live view: every pending question this token may see, seeded from the list
   * and kept current by the stream, yielded after each change (see `src/inbox.ts`).
   */
  inbox(options: InboxOptions = {}): AsyncGenerator<InboxSnapshot, void, undefined> {
    return inbox(
      {
        stream: (streamOptions) => this.stream(streamOptions),
        listPage: async (page, after, signal) => {
          const result = await this.api.GET("/api/interactions", {
            params: { query: { page, pageSize: 200, sort: "oldest", after: String(after) } },
            signal,
          });
          const data = ok(result).data;
          const seq = Number(result.response.headers.get("Layby-Stream-Seq"));
          return { items: data.items, total: data.total, nextPage: data.next_page ?? null, seq };
        },
      },
      options,
    );
  }

  /** The live feed of the inbox, resumed after drops (see `StreamOptions`). */
  stream(options: StreamOptions = {}): AsyncGenerator<InboxEvent, void, undefined> {
    return stream(`${this.baseUrl}/api/interactions/stream`, this.headers, this.fetcher, options);
  }

  /** Start a run of a flow that a worker serves (`version`: a version a worker serves). */
  async startRun(body: StartRunRequest): Promise<RunStarted> {
    return ok(await this.api.POST("/api/runs", { body })).data;
  }

  /** A run: its status, what it waits on, its questions and calls. */
  async getRun(runId: string): Promise<Run> {
    return ok(await this.api.GET("/api/runs/{run_id}", { params: { path: { run_id: runId } } })).data;
  }

  /** One page of runs, newest first. */
  async listRuns(query: RunsQuery = {}): Promise<RunPage> {
    return ok(await this.api.GET("/api/runs", { params: { query } })).data;
  }

  /** Tell a person something, asking nothing: to the feed, or on a channel. What became of it. */
  async notify(body: NotifyRequest): Promise<string> {
    return ok(await this.api.POST("/api/notifications", { body })).data;
  }
}
