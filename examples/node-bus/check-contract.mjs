#!/usr/bin/env node
// The bus contract's documents, read by tools of another language (docs/bus.md#the-documents):
// asyncapi.json is a valid AsyncAPI 3.0.0 document (the official JSON Schema of the spec, from
// @asyncapi/specs), every `$ref` in it resolves (to a channel, or to a message schema of
// commands.schema.json or events.schema.json), and both JSON Schema documents compile under Ajv's
// draft 2020-12. Exit 1 naming each problem.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import Ajv from "ajv";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const here = dirname(fileURLToPath(import.meta.url));
const dir = process.env.LAYBY_SCHEMA_DIR ?? join(here, "..", "..", "contracts", "schema");
const read = (name) => JSON.parse(readFileSync(join(dir, name), "utf8"));
const problems = [];

const asyncapi = read("asyncapi.json");
const require = createRequire(import.meta.url);
const specFile = require.resolve(`@asyncapi/specs/schemas/${asyncapi.asyncapi}-without-$id.json`);
const spec = new Ajv({ allErrors: true, strict: false, validateSchema: false });
addFormats(spec);
const validSpec = spec.compile(JSON.parse(readFileSync(specFile, "utf8")));
if (!validSpec(asyncapi)) {
  for (const e of validSpec.errors ?? []) problems.push(`asyncapi.json${e.instancePath}: ${e.message}`);
}

const documents = { "commands.schema.json": read("commands.schema.json"), "events.schema.json": read("events.schema.json") };
for (const [name, schema] of Object.entries(documents)) {
  try {
    const ajv = new Ajv2020({ strict: false });
    addFormats(ajv);
    ajv.compile(schema);
  } catch (error) {
    problems.push(`${name} does not compile: ${error.message}`);
  }
}

/** The value a JSON pointer names in `doc`, or undefined. */
function at(doc, pointer) {
  return pointer
    .split("/")
    .slice(1)
    .map((part) => part.replaceAll("~1", "/").replaceAll("~0", "~"))
    .reduce((node, key) => (node === undefined ? undefined : node[key]), doc);
}

let refs = 0;
(function walk(node, path) {
  if (Array.isArray(node)) return node.forEach((item, i) => walk(item, `${path}/${i}`));
  if (node === null || typeof node !== "object") return;
  if (typeof node.$ref === "string") {
    refs++;
    const [file, pointer = ""] = node.$ref.split("#");
    const target = file === "" ? asyncapi : documents[file];
    if (target === undefined || at(target, pointer) === undefined) problems.push(`${path}: ${node.$ref} resolves to nothing`);
  }
  for (const [key, value] of Object.entries(node)) walk(value, `${path}/${key}`);
})(asyncapi, "asyncapi.json#");

if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log(
  `asyncapi.json: valid AsyncAPI ${asyncapi.asyncapi}, ${Object.keys(asyncapi.channels).length} channels, ` +
    `${refs} references resolved; commands.schema.json and events.schema.json compile (draft 2020-12)`,
);
