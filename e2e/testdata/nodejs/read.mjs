// The read side with nats.js v3 (@nats-io/*): a device's last message
// (stream message get by subject), the KV view (get, watch, a refused
// put) and an ordered consumer over the stream.
// With "v2kv" and "v2ordered" the same with nats.js v2 (nats).
// usage: NATS_URL=host:port node read.mjs get|kv|ordered|v2kv|v2ordered <device>
const [what, device] = process.argv.slice(2);
if (what.startsWith("v2")) {
  const { connect } = await import("nats");
  const nc = await connect({ servers: process.env.NATS_URL });
  const js = nc.jetstream();
  const dec = new TextDecoder();
  const out = [];
  if (what === "v2kv") {
    const kv = await js.views.kv("telemetry", { bindOnly: true });
    const e = await kv.get(device);
    out.push(`get ${e.key} rev ${e.revision} ${dec.decode(e.value)}`);
    const w = await kv.watch({ key: device });
    for await (const x of w) {
      out.push(`watch ${x.key} ${dec.decode(x.value)}`);
      break;
    }
    try {
      await kv.put(device, "x");
      out.push("put accepted");
    } catch (err) {
      out.push(`put refused: ${err.message}`);
    }
  } else {
    const c = await js.consumers.get("TELEMETRY", { filterSubjects: [`telemetry.${device}`] });
    const iter = await c.fetch({ max_messages: 3, expires: 5000 });
    for await (const m of iter) {
      out.push(`ordered ${m.subject} ${m.info.streamSequence} ${dec.decode(m.data)}`);
    }
  }
  await nc.close();
  console.log(`nats.js v2 ok: ${out.join("; ")}`);
  process.exit(0);
}
const { connect } = await import("@nats-io/transport-node");
const { jetstream, jetstreamManager } = await import("@nats-io/jetstream");
const nc = await connect({ servers: process.env.NATS_URL });
const dec = new TextDecoder();
const out = [];
if (what === "get") {
  const jsm = await jetstreamManager(nc);
  const m = await jsm.streams.getMessage("TELEMETRY", { last_by_subj: `telemetry.${device}` });
  out.push(`last ${m.subject} seq ${m.seq} ${dec.decode(m.data)}`);
} else if (what === "kv") {
  const { Kvm } = await import("@nats-io/kv");
  const kv = await new Kvm(nc).open("telemetry");
  const e = await kv.get(device);
  out.push(`get ${e.key} rev ${e.revision} ${dec.decode(e.value)}`);
  const w = await kv.watch({ key: device });
  for await (const x of w) {
    out.push(`watch ${x.key} ${dec.decode(x.value)}`);
    break;
  }
  try {
    await kv.put(device, "x");
    out.push("put accepted");
  } catch (err) {
    out.push(`put refused: ${err.message}`);
  }
} else if (what === "ordered") {
  const js = jetstream(nc);
  const c = await js.consumers.get("TELEMETRY", { filter_subjects: [`telemetry.${device}`] });
  const iter = await c.fetch({ max_messages: 3, expires: 5000 });
  for await (const m of iter) {
    out.push(`ordered ${m.subject} ${m.info.streamSequence} ${dec.decode(m.data)}`);
  }
} else {
  throw new Error("usage: read.mjs get|kv|ordered <device>");
}
await nc.close();
console.log(`nats.js v3 ok: ${out.join("; ")}`);
