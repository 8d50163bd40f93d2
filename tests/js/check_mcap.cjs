// Reads an MCAP file the way Foxglove Studio does, with the packages Studio reads MCAP with:
// @mcap/core (indexed and streaming readers; zstd and lz4 chunks through @foxglove/wasm-zstd
// and @foxglove/wasm-lz4), protobufjs (each protobuf schema loaded from the FileDescriptorSet
// the file embeds) and @foxglove/schemas (the official definitions of foxglove.* messages).
//
// Usage: node check_mcap.cjs FILE.mcap  -> prints one JSON object:
//   {"topics": {topic: {"schema", "encoding", "indexed", "streamed", "first"}}, "problems": [...]}
// where "first" is the first message of the topic as decoded (bytes as their length,
// non-finite numbers as strings) and "problems" lists everything Studio would refuse.
//
// JSON schemas are checked with the rules of Studio's JSON Schema parser, as in Lichtblick's
// packages/mcap-support/src/parseJsonSchema.ts (the open-source Foxglove Studio's
// packages/mcap-support/src/parseJsonSchema.ts is the same function): a field has exactly one
// "type" (a string), one of boolean, string (contentEncoding absent or "base64"), number,
// integer, object (checked recursively) or array; an array's "items" has one type among
// boolean, string (no contentEncoding), number, integer, object; "oneOf" is allowed only as
// a list of number constants; "null", type lists and a missing type are refused.
"use strict";

const fs = require("fs");
const { McapIndexedReader, McapStreamReader } = require("@mcap/core");
const protobuf = require("protobufjs");
const descriptor = require("protobufjs/ext/descriptor");
const zstd = require("@foxglove/wasm-zstd");
const lz4 = require("@foxglove/wasm-lz4");
const { foxgloveMessageSchemas, generateProto } = require("@foxglove/schemas/internal");

const ARRAY_ITEM_TYPES = new Set(["boolean", "string", "number", "integer", "object"]);

/** The problems Studio's JSON Schema parser reports for the object schema `schema`. */
function jsonSchemaProblems(schema, path) {
  if (schema === null || typeof schema !== "object" || schema.type !== "object") {
    return [`${path || "(root)"}: expected "type": "object", got ${JSON.stringify(schema && schema.type)}`];
  }
  const out = [];
  for (const [name, field] of Object.entries(schema.properties ?? {})) {
    const where = path ? `${path}.${name}` : name;
    if (Array.isArray(field.oneOf)) {
      if (!field.oneOf.every((alt) => typeof alt.const === "number")) {
        out.push(`${where}: oneOf alternatives must have number values`);
      }
      continue;
    }
    switch (field.type) {
      case "boolean":
      case "number":
      case "integer":
        break;
      case "string":
        if (field.contentEncoding !== undefined && field.contentEncoding !== "base64") {
          out.push(`${where}: unsupported contentEncoding ${JSON.stringify(field.contentEncoding)}`);
        }
        break;
      case "object":
        out.push(...jsonSchemaProblems(field, where));
        break;
      case "array": {
        const items = field.items ?? {};
        if (!ARRAY_ITEM_TYPES.has(items.type)) {
          out.push(`${where}: unsupported type ${JSON.stringify(items.type)} for array item`);
        } else if (items.type === "string" && items.contentEncoding !== undefined) {
          out.push(`${where}: unsupported contentEncoding for array item`);
        } else if (items.type === "object") {
          out.push(...jsonSchemaProblems(items, where));
        }
        break;
      }
      default:
        out.push(`Unsupported type ${JSON.stringify(field.type)} for ${where}`);
    }
  }
  return out;
}

/** A JSON-safe summary of a decoded value: bytes as their length, NaN/Infinity as strings. */
function summarize(value) {
  if (value instanceof Uint8Array) return { bytes: value.length };
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  if (typeof value === "bigint") return value.toString();
  if (protobuf.util.Long && protobuf.util.Long.isLong(value)) return value.toString();
  if (Array.isArray(value)) return value.map(summarize);
  if (value !== null && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = summarize(v);
    return out;
  }
  return value;
}

/** Field name -> [number, type] of a protobufjs type. */
function protoFields(type) {
  const out = {};
  for (const f of type.fieldsArray) out[f.name] = [f.id, f.type.replace(/^\./, "")];
  return out;
}

/** Problems of an embedded foxglove.* type against the official definition. */
function officialProblems(name, type) {
  const short = name.replace(/^foxglove\./, "");
  const official = foxgloveMessageSchemas[short];
  if (official === undefined) return [`${name}: not a message of @foxglove/schemas`];
  const root = protobuf.parse(generateProto(official, []), { keepCase: true }).root;
  const want = protoFields(root.lookupType(name));
  const got = protoFields(type);
  const out = [];
  for (const [field, spec] of Object.entries(want)) {
    const mine = got[field];
    const wantType = spec[1].replace(/^foxglove\./, "");
    if (mine === undefined) out.push(`${name}.${field}: missing`);
    else if (mine[0] !== spec[0] || mine[1].replace(/^foxglove\./, "") !== wantType) {
      out.push(`${name}.${field}: ${JSON.stringify(mine)}, officially ${JSON.stringify(spec)}`);
    }
  }
  return out;
}

function makeDecoder(channel, schema, problems) {
  const where = `${channel.topic} (${schema ? schema.name : "no schema"})`;
  if (channel.messageEncoding === "protobuf") {
    const set = descriptor.FileDescriptorSet.decode(schema.data);
    const root = protobuf.Root.fromDescriptor(set);
    root.resolveAll();
    const type = root.lookupType(schema.name);
    if (schema.name.startsWith("foxglove.")) problems.push(...officialProblems(schema.name, type));
    return (data) => type.toObject(type.decode(data), { longs: String, defaults: true });
  }
  if (channel.messageEncoding === "json") {
    if (schema !== undefined) {
      if (schema.encoding !== "jsonschema") {
        problems.push(`${where}: json messages with a ${schema.encoding} schema`);
      } else {
        const doc = JSON.parse(new TextDecoder().decode(schema.data));
        problems.push(...jsonSchemaProblems(doc, "").map((p) => `${where}: ${p}`));
      }
    }
    return (data) => JSON.parse(new TextDecoder().decode(data));
  }
  return (data) => ({ undecoded: data.length }); // foreign encodings (cdr, ros1...) pass through
}

async function main() {
  const path = process.argv[2];
  const bytes = fs.readFileSync(path);
  await zstd.isLoaded;
  await lz4.isLoaded;
  const decompressHandlers = {
    zstd: (buffer, size) => zstd.decompress(buffer, Number(size)),
    lz4: (buffer, size) => lz4(buffer, Number(size)),
  };
  const problems = [];
  const topics = {};
  const decoders = new Map();
  const topicOf = (channel, schema) => {
    let t = topics[channel.topic];
    if (t === undefined) {
      t = topics[channel.topic] = {
        schema: schema ? schema.name : "",
        encoding: channel.messageEncoding,
        indexed: 0,
        streamed: 0,
        first: null,
      };
    }
    return t;
  };
  const decode = (channel, schema, data, where) => {
    let d = decoders.get(channel.id);
    if (d === undefined) {
      try {
        d = makeDecoder(channel, schema, problems);
      } catch (err) {
        problems.push(`${channel.topic}: schema ${schema && schema.name}: ${err.message}`);
        d = () => null;
      }
      decoders.set(channel.id, d);
    }
    try {
      return d(data);
    } catch (err) {
      problems.push(`${channel.topic} (${where}): message does not decode: ${err.message}`);
      return null;
    }
  };

  // the indexed reader, as Studio opens a local file
  const readable = {
    size: async () => BigInt(bytes.length),
    read: async (offset, length) => bytes.subarray(Number(offset), Number(offset + length)),
  };
  const reader = await McapIndexedReader.Initialize({ readable, decompressHandlers });
  for await (const m of reader.readMessages()) {
    const channel = reader.channelsById.get(m.channelId);
    const schema = reader.schemasById.get(channel.schemaId);
    const t = topicOf(channel, schema);
    const value = decode(channel, schema, m.data, "indexed");
    if (t.indexed === 0) t.first = summarize(value);
    t.indexed += 1;
  }

  // the streaming reader, as Studio reads a file it cannot seek in
  const stream = new McapStreamReader({ decompressHandlers, validateCrcs: true });
  stream.append(bytes);
  const channels = new Map();
  const schemas = new Map();
  for (let rec; (rec = stream.nextRecord()) !== undefined; ) {
    if (rec.type === "Schema") schemas.set(rec.id, rec);
    else if (rec.type === "Channel") channels.set(rec.id, rec);
    else if (rec.type === "Message") {
      const channel = channels.get(rec.channelId);
      const schema = schemas.get(channel.schemaId);
      decode(channel, schema, rec.data, "streamed");
      topicOf(channel, schema).streamed += 1;
    }
  }
  if (!stream.done()) problems.push("the streaming reader did not reach the end of the file");
  for (const [topic, t] of Object.entries(topics)) {
    if (t.indexed !== t.streamed) {
      problems.push(`${topic}: ${t.indexed} messages indexed, ${t.streamed} streamed`);
    }
  }
  process.stdout.write(JSON.stringify({ topics, problems }) + "\n");
}

// self-checks of the JSON-schema rules, so that the check itself can fail:
// node check_mcap.cjs --rules SCHEMA.json -> {"problems": [...]}
if (process.argv[2] === "--rules") {
  const doc = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
  process.stdout.write(JSON.stringify({ problems: jsonSchemaProblems(doc, "") }) + "\n");
} else if (process.argv[2] === "--official-jsonschemas") {
  const js = require("@foxglove/schemas/jsonschema");
  const problems = [];
  for (const [name, doc] of Object.entries(js)) {
    problems.push(...jsonSchemaProblems(doc, "").map((p) => `${name}: ${p}`));
  }
  process.stdout.write(JSON.stringify({ count: Object.keys(js).length, problems }) + "\n");
} else {
  main().catch((err) => {
    process.stdout.write(JSON.stringify({ topics: {}, problems: [`fatal: ${err.stack}`] }) + "\n");
    process.exitCode = 1;
  });
}
