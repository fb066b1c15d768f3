/**
 * Typed errors from the doors' error bodies.
 *
 * Every refusal of a JSON door is `{"error": "...", "field"?: "..."}` (docs/doors/common.md,
 * "Envelope and errors"). The status decides the class, so a caller can `catch` what it can act
 * on: a `BadInputError` names the field to fix, a `TooManyRequestsError` or an `UnavailableError`
 * says when to retry.
 */

/** The error body every JSON door answers a refusal with. */
export interface ErrorBody {
  error: string;
  field?: string;
}

/** Any refusal from a Layby door. */
export class LaybyError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The door's own message, for a person to read. */
  readonly error: string;
  /** The input field to blame, when there is one. */
  readonly field: string | undefined;
  /** Seconds to wait before trying again, when the door said (`Retry-After`). */
  readonly retryAfter: number | undefined;

  constructor(status: number, body: ErrorBody, retryAfter?: number) {
    super(body.field === undefined ? `${status}: ${body.error}` : `${status}: ${body.error} (field: ${body.field})`);
    this.name = new.target.name;
    this.status = status;
    this.error = body.error;
    this.field = body.field;
    this.retryAfter = retryAfter;
  }
}

/** 400: the request is wrong; `field` names what to fix. */
export class BadInputError extends LaybyError {}
/** 401: no token, a malformed one, or one the server does not know. */
export class UnauthorizedError extends LaybyError {}
/** 403: the token is known but may not do this. */
export class ForbiddenError extends LaybyError {}
/** 404: nothing there for this caller (unknown and not-yours look the same). */
export class NotFoundError extends LaybyError {}
/** 409: the state moved on (an answer won first, a run is not in a state that allows it). */
export class ConflictError extends LaybyError {}
/** 413: the body is over the server's cap. */
export class PayloadTooLargeError extends LaybyError {}
/** 429: the concurrency cap or the rate limit; `retryAfter` says when to try again. */
export class TooManyRequestsError extends LaybyError {}
/** 501: a channel cannot do what the request needs. */
export class UnsupportedError extends LaybyError {}
/** 502: a channel's provider refused or failed the send. */
export class ChannelFailedError extends LaybyError {}
/** 503: a service or the event log is unavailable, or a bound is reached; retry later. */
export class UnavailableError extends LaybyError {}

const BY_STATUS: Record<number, new (status: number, body: ErrorBody, retryAfter?: number) => LaybyError> = {
  400: BadInputError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  429: TooManyRequestsError,
  501: UnsupportedError,
  502: ChannelFailedError,
  503: UnavailableError,
};

function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== "object" || value === null) return false;
  const body = value as Record<string, unknown>;
  return typeof body.error === "string" && (body.field === undefined || typeof body.field === "string");
}

/** The typed error for a refused response and its body (parsed JSON, or text when it was not). */
export function errorFrom(response: Response, body: unknown): LaybyError {
  const header = response.headers.get("Retry-After");
  const seconds = header === null ? undefined : Number(header);
  const retryAfter = seconds !== undefined && Number.isFinite(seconds) ? seconds : undefined;
  const parsed: ErrorBody = isErrorBody(body)
    ? body
    : { error: typeof body === "string" && body !== "" ? body : response.statusText || "request failed" };
  const Kind = BY_STATUS[response.status] ?? LaybyError;
  return new Kind(response.status, parsed, retryAfter);
}

/** A question's deadline passed unanswered (`expired`), as the Python SDK's `InteractionTimeoutError`. */
export class InteractionTimeoutError extends Error {
  readonly interactionId: string;
  /** `timeout` (a waiter saw the deadline pass) or `abandoned` (the sweeper removed it). */
  readonly reason: string | undefined;

  constructor(interactionId: string, reason: string | undefined) {
    super(`question ${interactionId} expired unanswered (${reason ?? "timeout"})`);
    this.name = "InteractionTimeoutError";
    this.interactionId = interactionId;
    this.reason = reason;
  }
}

/** A question was removed before an answer: withdrawn, or its channel failed to deliver it. */
export class InteractionRemovedError extends Error {
  readonly interactionId: string;
  /** `cancelled`, `delivery_failed`, ... */
  readonly reason: string | undefined;
  readonly detail: string | undefined;

  constructor(interactionId: string, reason: string | undefined, detail: string | undefined) {
    super(`question ${interactionId} was removed (${reason ?? "unknown"}${detail ? `: ${detail}` : ""})`);
    this.name = "InteractionRemovedError";
    this.interactionId = interactionId;
    this.reason = reason;
    this.detail = detail;
  }
}
