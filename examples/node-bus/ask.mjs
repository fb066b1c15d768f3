#!/usr/bin/env node
// Ask a person from a Node service on Layby's bus, and print what they answered.
//
//   LAYBY_NATS_URL=nats://127.0.0.1:4222 LAYBY_TOKEN=... node ask.mjs "Deploy v2?" --option yes --option no
//
// Standard output: one JSON line, the outcome ({"outcome": "answered", "answer": ...}).
// Exit codes: 0 answered; 2 refused by Layby (the refusal on standard error as JSON: kind,
// message, field); 3 no answer (removed, or the deadline passed); 4 the command does not match
// the bus contract (nothing was sent); 1 anything else. `--identity` prints the token's NATS
// public key and key id (what `layby nats-config` puts in NATS's configuration), never its seed.

import { parseArgs } from "node:util";

import { ContractError, identity, LaybyBus, NoAnswer, Refusal } from "./layby-bus.mjs";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    format: { type: "string", default: "text" },
    option: { type: "string", multiple: true },
    timeout: { type: "string", default: "300" },
    audience: { type: "string" },
    identity: { type: "boolean", default: false },
  },
});

const token = process.env.LAYBY_TOKEN;
if (!token) {
  console.error("error: LAYBY_TOKEN is not set (a token of LAYBY_API_TOKENS)");
  process.exit(1);
}
if (values.identity) {
  const { publicKey, kid } = identity(token);
  console.log(JSON.stringify({ public_key: publicKey, kid }));
  process.exit(0);
}
const [question] = positionals;
if (question === undefined) {
  console.error('usage: node ask.mjs "QUESTION" [--format F] [--option O ...] [--timeout S] [--audience A]');
  process.exit(1);
}

const fields = { question, answer_format: values.format };
if (values.option) fields.options = values.option;
if (values.audience) fields.audience = values.audience;
const timeout = Number(values.timeout);

let bus;
try {
  bus = await LaybyBus.connect({
    servers: (process.env.LAYBY_NATS_URL ?? "nats://127.0.0.1:4222").split(","),
    token,
    namespace: process.env.LAYBY_NAMESPACE ?? "layby",
  });
} catch (error) {
  const refused = error?.code === "AUTHORIZATION_VIOLATION";
  console.error(
    refused
      ? "error: NATS refused this token's key: the token must be in LAYBY_API_TOKENS and NATS's " +
          "authorization written from them (`layby nats-config`; `layby up` does it at start)"
      : `error: cannot reach NATS at ${process.env.LAYBY_NATS_URL ?? "nats://127.0.0.1:4222"}: ${error?.message ?? error}`,
  );
  process.exit(1);
}
let code = 1;
try {
  const wake = await bus.ask(fields, { timeout: Number.isFinite(timeout) ? timeout : values.timeout });
  console.log(JSON.stringify(wake));
  code = wake.outcome === "answered" ? 0 : 3;
} catch (error) {
  if (error instanceof Refusal) {
    console.error(JSON.stringify({ refused: { kind: error.kind, message: error.text, field: error.field } }));
    code = 2;
  } else if (error instanceof NoAnswer) {
    console.error(JSON.stringify({ no_answer: error.reason }));
    code = 3;
  } else if (error instanceof ContractError) {
    console.error(`error: ${error.message}`);
    code = 4;
  } else if (error?.code === "503") {
    console.error(`error: no ask service answers on ${bus.ns}.cmd.ask: is Layby running, on this namespace?`);
  } else {
    console.error(`error: ${error?.message ?? error}`);
  }
} finally {
  await bus.close();
}
process.exit(code);
