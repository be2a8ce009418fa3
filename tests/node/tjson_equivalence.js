// Runs the explorer's browser TJSON codec (gateway/explorer/static/tjson.js) on cases written by
// tests/unit/test_explorer_tjson.py: reads {descriptor, codec, cases} as JSON on stdin, writes
// one result per case on stdout. Values cross the boundary in a typed plain form:
// {"$i64": "digits"}, {"$bin": base64}, {"$map": [[k, v], ...]}, {"$dbl": "NaN"|"Infinity"|
// "-Infinity"|"-0.0"}; everything else is plain JSON.
"use strict";
const fs = require("fs");

const input = JSON.parse(fs.readFileSync(0, "utf8"));
const { Codec } = require(input.codec);
const codec = Codec(input.descriptor);

function toPlain(v) {
  if (typeof v === "bigint") return { $i64: v.toString() };
  if (v instanceof Uint8Array) return { $bin: Buffer.from(v).toString("base64") };
  if (v instanceof Map) return { $map: Array.from(v, ([k, x]) => [toPlain(k), toPlain(x)]) };
  if (typeof v === "number") {
    if (Number.isNaN(v)) return { $dbl: "NaN" };
    if (v === Infinity) return { $dbl: "Infinity" };
    if (v === -Infinity) return { $dbl: "-Infinity" };
    if (Object.is(v, -0)) return { $dbl: "-0.0" };
    return v;
  }
  if (Array.isArray(v)) return v.map(toPlain);
  if (v !== null && typeof v === "object") {
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = toPlain(x);
    return out;
  }
  return v;
}

function fromPlain(v) {
  if (Array.isArray(v)) return v.map(fromPlain);
  if (v !== null && typeof v === "object") {
    if ("$i64" in v) return BigInt(v.$i64);
    if ("$bin" in v) return new Uint8Array(Buffer.from(v.$bin, "base64"));
    if ("$map" in v) return new Map(v.$map.map(([k, x]) => [fromPlain(k), fromPlain(x)]));
    if ("$dbl" in v) return v.$dbl === "-0.0" ? -0 : Number(v.$dbl);
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = fromPlain(x);
    return out;
  }
  return v;
}

const results = input.cases.map((c) => {
  try {
    const call = codec.encodeCall(c.method, c.seqid, fromPlain(c.args));
    const decodedCall = codec.decodeCall(call);
    const reply = codec.decodeReply(c.reply);
    return {
      call,
      call_args: toPlain(decodedCall.args),
      reply_result: toPlain(reply.result),
      reply_seqid: reply.seqid,
      reencoded: codec.encodeReply(c.method, reply.seqid, reply.result),
    };
  } catch (e) {
    return { error: `${e.name}: ${e.message}` };
  }
});
process.stdout.write(JSON.stringify(results));
