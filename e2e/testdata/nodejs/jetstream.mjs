import { connect, AckPolicy, DeliverPolicy, StringCodec } from "nats";
const sc = StringCodec();
const nc = await connect({ servers: process.env.NATS_URL });
const jsm = await nc.jetstreamManager();
const js = nc.jetstream();
const si = await jsm.streams.info("TELEMETRY");
if (si.config.name !== "TELEMETRY") throw new Error("stream info " + JSON.stringify(si));
for (let i = 1; i <= 5; i++) {
  const pa = await js.publish("telemetry.node-js", sc.encode(`m${i}`), { msgID: `n${i}` });
  if (pa.stream !== "TELEMETRY" || pa.duplicate) throw new Error("pub ack " + JSON.stringify(pa));
}
const dup = await js.publish("telemetry.node-js", sc.encode("m1"), { msgID: "n1" });
if (!dup.duplicate) throw new Error("not a duplicate " + JSON.stringify(dup));
await jsm.consumers.add("TELEMETRY", { durable_name: "nodejs", ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, filter_subject: "telemetry.node-js" });
const c = await js.consumers.get("TELEMETRY", "nodejs");
const got = [];
const iter = await c.fetch({ max_messages: 5, expires: 5000 });
for await (const m of iter) {
  got.push(sc.decode(m.data));
  if (m.info.stream !== "TELEMETRY" || m.info.deliveryCount !== 1) throw new Error("info " + JSON.stringify(m.info));
  m.ack();
}
if (got.join(",") !== "m1,m2,m3,m4,m5") throw new Error("got " + got);
await nc.drain();
console.log("nats.js ok: " + got.join(","));
