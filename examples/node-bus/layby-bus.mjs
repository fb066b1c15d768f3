// Asking a person on Layby's NATS bus from Node, as the Python SDK does (docs/bus.md).
//
// A service signs in to NATS with the key derived from its Layby token, publishes a `cmd.ask.v1`
// command on `<ns>.cmd.ask` and reads the reply on its own inbox; when the question resolves, the
// resume service publishes a wake on `<ns>.wake.<kid>.<waiter>.<interaction>`, which only this
// token's key may read. Every message sent and received is checked against the bus contract's
// JSON Schema (contracts/schema/commands.schema.json).

import { createHash, randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { connect, nkeyAuthenticator, nkeys } from "nats";

const SEED_CONTEXT = "layby nats user seed v1\0";
const KID_CONTEXT = "layby nats key id v1\0";
const KID_LENGTH = 20;

// ---------------------------------------------------------------------------------------------
// The identity: the NATS key and the key id a Layby token implies (docs/bus.md, "The NATS key
// of a token").

const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** RFC 4648 base32, no padding: how NATS writes keys and seeds. */
function base32(bytes) {
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** CRC-16/XMODEM (polynomial 0x1021, initial 0), the checksum NATS appends to a key. */
function crc16(bytes) {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

const PREFIX_SEED = 18 << 3; // "S"
const PREFIX_USER = 20 << 3; // "U"

/** The NATS user seed ("SU...") of a Layby token: SHA-256 of a fixed context and the token. */
export function clientSeed(token) {
  const raw = createHash("sha256").update(SEED_CONTEXT, "utf8").update(token, "utf8").digest();
  const body = Buffer.concat([Buffer.from([PREFIX_SEED | (PREFIX_USER >> 5), (PREFIX_USER & 31) << 3]), raw]);
  const crc = crc16(body);
  return base32(Buffer.concat([body, Buffer.from([crc & 0xff, crc >> 8])]));
}

/** The token's key id: the one subject token that names what only this token's key may read. */
export function keyId(token) {
  return createHash("sha256").update(KID_CONTEXT, "utf8").update(token, "utf8").digest("hex").slice(0, KID_LENGTH);
}

/** Everything a token implies on the bus. */
export function identity(token) {
  const seed = clientSeed(token);
  const pair = nkeys.fromSeed(new TextEncoder().encode(seed));
  return { seed, publicKey: pair.getPublicKey(), kid: keyId(token) };
}

// ---------------------------------------------------------------------------------------------
// The contract: every message validated against the checked-in JSON Schema.

const HERE = dirname(fileURLToPath(import.meta.url));

/** A message that does not match the bus contract (sent or received). */
export class ContractError extends Error {
  constructor(what, errors) {
    super(`${what} does not match the bus contract: ${errors.map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ")}`);
    this.name = "ContractError";
    this.errors = errors;
  }
}

export class Contract {
  /** `schemaDir`: contracts/schema of the Layby this service talks to (default: this repository's). */
  constructor(schemaDir = process.env.LAYBY_SCHEMA_DIR ?? join(HERE, "..", "..", "contracts", "schema")) {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    addFormats(ajv);
    ajv.addSchema(JSON.parse(readFileSync(join(schemaDir, "commands.schema.json"), "utf8")), "commands");
    this.ajv = ajv;
  }

  /** `message` when it is a valid `name` (a `$defs` entry: Ask, Accepted, Refused, Wake, ...). */
  check(name, message) {
    const validate = this.ajv.getSchema(`commands#/$defs/${name}`);
    if (validate === undefined) throw new Error(`no ${name} in the bus contract`);
    if (!validate(message)) throw new ContractError(name, validate.errors ?? []);
    return message;
  }

  /** A reply, checked against the one of `names` its `type` says it is. */
  reply(message, names) {
    for (const name of names) {
      const validate = this.ajv.getSchema(`commands#/$defs/${name}`);
      if (validate(message)) return { name, message };
    }
    throw new ContractError(`a reply (expected ${names.join(" or ")}, got type ${JSON.stringify(message?.type)})`, []);
  }
}

// ---------------------------------------------------------------------------------------------
// Asking.

/** The ask service refused the command: `kind`, `message`, `field` as the bus carries them. */
export class Refusal extends Error {
  constructor(reply) {
    super(reply.field ? `${reply.kind}: ${reply.message} (field: ${reply.field})` : `${reply.kind}: ${reply.message}`);
    this.name = "Refusal";
    this.kind = reply.kind;
    this.text = reply.message;
    this.field = reply.field ?? null;
    this.protocol = reply.protocol ?? 1;
    this.retryAfter = reply.retry_after ?? null;
  }
}

/** No answer before the deadline: the question was withdrawn (or was already gone). */
export class NoAnswer extends Error {
  constructor(interactionId, reason) {
    super(`no answer to ${interactionId} (${reason})`);
    this.name = "NoAnswer";
    this.interactionId = interactionId;
    this.reason = reason;
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class LaybyBus {
  /**
   * Sign in with the token's own key. `servers`: NATS URLs; `namespace`: LAYBY_NAMESPACE.
   */
  static async connect({ servers, token, namespace = "layby", contract = new Contract() }) {
    const id = identity(token);
    const nc = await connect({
      servers,
      authenticator: nkeyAuthenticator(new TextEncoder().encode(id.seed)),
      // Replies come back on the token's own inbox, the only one its key may read.
      inboxPrefix: `_INBOX.${id.kid}`,
      name: "layby-node-bus-example",
    });
    return new LaybyBus(nc, token, namespace, id, contract);
  }

  constructor(nc, token, namespace, id, contract) {
    this.nc = nc;
    this.token = token;
    this.ns = namespace;
    this.id = id;
    this.contract = contract;
    // One waiter name per connection; the ask service prefixes it with the token's key id.
    this.waiter = randomBytes(9).toString("base64url");
  }

  /**
   * Request-reply for an idempotent command (the ask, a look, a prune: each names its question):
   * a reply that does not come in time, or no ask service listening (a restart), sends the same
   * command again until `deadline` (epoch ms), then throws the last error.
   */
  async request(subject, message, replies, deadline = Date.now() + 10_000) {
    const data = encoder.encode(JSON.stringify(message));
    for (;;) {
      try {
        const left = deadline - Date.now();
        const msg = await this.nc.request(subject, data, { timeout: Math.max(100, Math.min(left, 5_000)) });
        return this.contract.reply(JSON.parse(decoder.decode(msg.data)), replies);
      } catch (error) {
        const again = error?.code === "TIMEOUT" || error?.code === "503";
        if (!again || Date.now() >= deadline) throw error;
        await sleep(250);
      }
    }
  }

  /**
   * Ask and wait for the outcome, as `ask_user` does: listen for the wake before recording the
   * question (so an instant answer is not missed), look now and then in case a wake was lost, and
   * withdraw the question when the deadline passes. Resolves with the wake of the answer;
   * rejects with a `Refusal` or a `NoAnswer`.
   */
  async ask(fields, { timeout = 300, lookEverySeconds = 10 } = {}) {
    const interactionId = randomUUID();
    const command = this.contract.check("Ask", {
      type: "cmd.ask.v1",
      token: this.token,
      interaction_id: interactionId,
      mode: "sync",
      timeout,
      waiter: this.waiter,
      ...fields,
    });
    const wakes = this.nc.subscribe(`${this.ns}.wake.${this.id.kid}.${this.waiter}.${interactionId}`, { max: 1 });
    try {
      // The same interaction id each time: a resent ask records the question once.
      const recordBy = Date.now() + Math.min(timeout, 30) * 1000;
      const { name, message } = await this.request(`${this.ns}.cmd.ask`, command, ["Accepted", "Refused"], recordBy);
      if (name === "Refused") throw new Refusal(message);
      const deadline = Date.parse(message.timeout_at);
      const woken = (async () => {
        for await (const msg of wakes) return this.contract.check("Wake", JSON.parse(decoder.decode(msg.data)));
        return null;
      })();
      for (;;) {
        const left = deadline - Date.now();
        if (left <= 0) return await this.gaveUp(interactionId);
        const wake = await Promise.race([woken, sleep(Math.min(left, lookEverySeconds * 1000))]);
        if (wake) return wake;
        const looked = await this.look(interactionId);
        if (looked) return looked;
      }
    } finally {
      wakes.unsubscribe();
    }
  }

  /** How the question stands, as a wake would say it, or null while it is pending. */
  async look(interactionId) {
    const { name, message } = await this.request(
      `${this.ns}.cmd.ask`,
      this.contract.check("Look", { type: "cmd.ask.look.v1", token: this.token, interaction_id: interactionId }),
      ["PruneResult", "Refused"],
    );
    if (name === "Refused") throw new Refusal(message);
    return asWake(interactionId, message);
  }

  /** The deadline passed: withdraw the question; an answer that won the race still counts. */
  async gaveUp(interactionId) {
    const { name, message } = await this.request(
      `${this.ns}.cmd.prune`,
      this.contract.check("Prune", { type: "cmd.prune.v1", token: this.token, interaction_id: interactionId, reason: "timeout" }),
      ["PruneResult", "Refused"],
    );
    if (name === "Refused") throw new Refusal(message);
    if (message.outcome === "answered") return asWake(interactionId, message);
    throw new NoAnswer(interactionId, message.reason ?? "timeout");
  }

  async close() {
    await this.nc.drain();
  }
}

/** A look's or a prune's answer in a wake's shape (null while pending). */
function asWake(interactionId, result) {
  if (result.outcome === "answered") {
    return { interaction_id: interactionId, outcome: "answered", answer: result.answer, answered_by: result.answered_by ?? null };
  }
  if (result.outcome === "gone" && result.reason) {
    return { interaction_id: interactionId, outcome: "removed", reason: result.reason, detail: result.detail ?? null };
  }
  return null;
}

/** Resolves with null after `ms`, without keeping the process alive. */
function sleep(ms) {
  return new Promise((resolve) => setTimeout(() => resolve(null), ms).unref());
}
