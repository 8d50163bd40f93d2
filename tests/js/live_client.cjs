// Connects to a Foxglove WebSocket server with Foxglove's own client (@foxglove/ws-protocol),
// subscribes to every channel it advertises, decodes each message with the schema the
// channel advertised (protobufjs over the FileDescriptorSet, as Foxglove does; JSON as
// JSON) and prints one JSON document: the server's info, the channels, and per topic the
// messages received, summarized (tests/test_live_foxglove_js.py).
//
//   node live_client.cjs URL SUBPROTOCOL COUNT TIMEOUT_MS
//
// Exits once every channel has COUNT messages, or at TIMEOUT_MS with what it has; a
// refused connection prints {"error": ...}.
const crypto = require("crypto");
const WebSocket = require("ws");
const protobuf = require("protobufjs");
const descriptor = require("protobufjs/ext/descriptor");
const { FoxgloveClient } = require("@foxglove/ws-protocol");

const [url, subprotocol, countText, timeoutText] = process.argv.slice(2);
const want = Number(countText);
const ws = new WebSocket(url, [subprotocol]);
const client = new FoxgloveClient({ ws });
const channels = new Map(); // subscription id -> channel
const decoders = new Map(); // channel id -> (bytes) -> object
const got = {}; // topic -> summaries
let info = null;

function decoderFor(channel) {
  if (channel.encoding === "json") {
    return (data) => JSON.parse(Buffer.from(data).toString("utf8"));
  }
  if (channel.encoding !== "protobuf" || channel.schemaEncoding !== "protobuf") {
    throw new Error(`${channel.topic}: no decoder for ${channel.encoding}/${channel.schemaEncoding}`);
  }
  const set = descriptor.FileDescriptorSet.decode(Buffer.from(channel.schema, "base64"));
  const type = protobuf.Root.fromDescriptor(set).lookupType(channel.schemaName);
  return (data) => type.toObject(type.decode(data), { longs: String, bytes: Buffer });
}

function summary(topic, msg) {
  if (msg.data instanceof Uint8Array) {
    const out = { bytes: msg.data.length, sha256: crypto.createHash("sha256").update(msg.data).digest("hex") };
    if (msg.format !== undefined) out.format = msg.format;
    const stride = msg.pointStride ?? msg.point_stride; // names as the descriptor spells them
    if (stride !== undefined) out.pointStride = stride;
    if (msg.fields !== undefined) out.fields = msg.fields.map((f) => f.name);
    return out;
  }
  return msg;
}

function finish() {
  const out = {
    info: info && { name: info.name, capabilities: info.capabilities },
    channels: [...channels.values()].map((c) => ({ topic: c.topic, encoding: c.encoding, schemaName: c.schemaName })),
    got,
  };
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0)); // a pipe: flush first
}

client.on("serverInfo", (i) => {
  info = i;
});
client.on("advertise", (advertised) => {
  for (const c of advertised) {
    decoders.set(c.id, decoderFor(c));
    channels.set(client.subscribe(c.id), c);
  }
});
client.on("message", ({ subscriptionId, timestamp, data }) => {
  const channel = channels.get(subscriptionId);
  const msg = decoders.get(channel.id)(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  (got[channel.topic] ||= []).push({ logTime: String(timestamp), ...summary(channel.topic, msg) });
  if (channels.size && [...channels.values()].every((c) => (got[c.topic] || []).length >= want)) {
    finish();
  }
});
ws.on("error", (e) => {
  process.stdout.write(JSON.stringify({ error: String(e.message || e) }) + "\n", () => process.exit(0));
});
setTimeout(finish, Number(timeoutText));
