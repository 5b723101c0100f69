// js.publish as a new user writes it, with nats.js v3 (@nats-io/*) or v2
// (nats): no options (an HPUB with a header block of length 0), then a
// publish edgeq refuses, whose error must carry the reason.
// usage: NATS_URL=host:port node publish.mjs v2|v3
const which = process.argv[2];
let nc, js;
if (which === "v3") {
  const { connect } = await import("@nats-io/transport-node");
  const { jetstream } = await import("@nats-io/jetstream");
  nc = await connect({ servers: process.env.NATS_URL });
  js = jetstream(nc);
} else if (which === "v2") {
  const { connect } = await import("nats");
  nc = await connect({ servers: process.env.NATS_URL });
  js = nc.jetstream();
} else {
  throw new Error("usage: publish.mjs v2|v3");
}
const enc = new TextEncoder();
const seqs = [];
for (let i = 1; i <= 3; i++) {
  const pa = await js.publish(`telemetry.${which}-dev`, enc.encode(`r${i}`));
  if (pa.stream !== "TELEMETRY" || pa.duplicate || !(pa.seq > 0)) throw new Error("pub ack " + JSON.stringify(pa));
  seqs.push(pa.seq);
}
let refused = "";
try {
  await js.publish("telemetry.a.b", enc.encode("x"));
} catch (err) {
  refused = `${err.name}: ${err.message} ${JSON.stringify(err.api_error ?? err.apiError?.() ?? {})}`;
}
await nc.drain();
console.log(`nats.js ${which} ok: acked ${seqs.length}; refused: ${refused}`);
