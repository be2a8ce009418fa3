/*
 * A small TJSONProtocol codec for the catalog explorer, driven by a schema descriptor that the
 * gateway derives from its own IDL (gateway/explorer/__init__.py, schema_descriptor).
 *
 * Wire format: Apache Thrift's TJSONProtocol (lib/java, lib/cpp): message
 * [1,"name",type,seqid,{struct}]; struct {"<id>":{"<tag>":value}}; list/set ["tag",count,...];
 * map ["ktag","vtag",count,{...}]; bools 1/0; map keys always JSON strings except container or
 * struct keys (raw JSON, as Apache's writers put them); doubles NaN/Infinity/-Infinity quoted;
 * binary as padded base64. It writes exactly what the gateway's own TJSON writer writes
 * (gateway/thrift/to_tjson.py); tests/unit/test_explorer_tjson.py proves it byte for byte.
 *
 * Values: struct → plain object keyed by IDL field name (unset fields absent); i64 → BigInt
 * (JSON numbers lose precision above 2^53, so this parser keeps the digits); other integers and
 * doubles → number; string → string; binary → Uint8Array; list/set → Array; map → Map.
 */
(function (root, factory) {
  if (typeof module === "object" && module.exports) module.exports = factory();
  else root.HmsTjson = factory();
})(typeof self !== "undefined" ? self : this, function () {
  "use strict";

  const CALL = 1, REPLY = 2, EXCEPTION = 3, ONEWAY = 4;
  const MAX_DEPTH = 64; // as the gateway (gateway/thrift/errors.py)
  const INTEGER_TAGS = new Set(["i8", "i16", "i32"]);
  const APPLICATION_EXCEPTION = " TApplicationException"; // a name no IDL struct can have
  const SPECIAL_DOUBLES = { "NaN": NaN, "Infinity": Infinity, "-Infinity": -Infinity };

  class TjsonError extends Error {}

  /** A TApplicationException (message type 3): message and type code. */
  class ApplicationException extends Error {
    constructor(message, type) { super(message); this.type = type; }
  }

  /** A declared exception of the method (result field 1..n): its IDL name and struct. */
  class DeclaredException extends Error {
    constructor(name, value) {
      super(value && typeof value.message === "string" ? value.message : name);
      this.exceptionName = name;
      this.value = value;
    }
  }

  // ---- reading: JSON text to a tree that keeps number digits and object entry order ----

  class Num { constructor(text) { this.text = text; } }
  class Obj { constructor(entries) { this.entries = entries; } }

  const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
  const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

  function parseTree(text) {
    let pos = 0;
    const fail = (what) => { throw new TjsonError(`${what} at offset ${pos}`); };
    const skip = () => {
      while (pos < text.length) {
        const c = text.charCodeAt(pos);
        if (c !== 32 && c !== 9 && c !== 10 && c !== 13) break;
        pos++;
      }
    };
    const value = (depth) => {
      if (depth > MAX_DEPTH) fail("nested too deeply");
      skip();
      const c = text[pos];
      if (c === "[") {
        pos++;
        const out = [];
        skip();
        if (text[pos] === "]") { pos++; return out; }
        for (;;) {
          out.push(value(depth + 1));
          skip();
          const d = text[pos++];
          if (d === "]") return out;
          if (d !== ",") fail("expected , or ]");
        }
      }
      if (c === "{") {
        pos++;
        const entries = [];
        skip();
        if (text[pos] === "}") { pos++; return new Obj(entries); }
        for (;;) {
          const key = value(depth + 1); // a raw container key is allowed (Apache's writers)
          skip();
          if (text[pos++] !== ":") fail("expected :");
          entries.push([key, value(depth + 1)]);
          skip();
          const d = text[pos++];
          if (d === "}") return new Obj(entries);
          if (d !== ",") fail("expected , or }");
        }
      }
      if (c === '"') {
        STRING.lastIndex = pos;
        const m = STRING.exec(text);
        if (m === null) fail("bad string");
        pos += m[0].length;
        return JSON.parse(m[0]);
      }
      NUMBER.lastIndex = pos;
      const m = NUMBER.exec(text);
      if (m === null) fail("unexpected character");
      pos += m[0].length;
      return new Num(m[0]);
    };
    const tree = value(0);
    skip();
    if (pos !== text.length) fail("trailing characters");
    return tree;
  }

  function tagOf(type) {
    if (typeof type === "string") return type === "bin" ? "str" : type;
    return type[0];
  }

  // The descriptor type if the wire tag agrees with it, else null (the wire is the truth).
  function compatible(type, tag) {
    return type != null && tagOf(type) === tag ? type : null;
  }

  function base64Decode(text) {
    let binary;
    try {
      binary = atob(text);
    } catch (e) {
      throw new TjsonError("bad base64 in binary field");
    }
    const out = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
    return out;
  }

  function base64Encode(bytes) {
    let binary = "";
    for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]);
    return btoa(binary);
  }

  function num(node, tag) {
    if (!(node instanceof Num)) throw new TjsonError(`${tag} value is not a number`);
    return node.text;
  }

  function integer(text, tag) {
    if (!/^-?[0-9]+$/.test(text)) throw new TjsonError(`${tag} value is not an integer`);
    return tag === "i64" ? BigInt(text) : Number(text);
  }

  function doubleOf(node) {
    if (typeof node === "string") {
      if (node in SPECIAL_DOUBLES) return SPECIAL_DOUBLES[node];
      throw new TjsonError("bad double");
    }
    return Number(num(node, "dbl"));
  }

  function array(node, what) {
    if (!Array.isArray(node)) throw new TjsonError(`${what} is not a JSON array`);
    return node;
  }

  /** A schema-bound codec. ``descriptor``: {structs: {name: [[id, name, type], ...]},
   *  methods: {name: {args, result, oneway}}}; a type is "tf"|"i8"|"i16"|"i32"|"i64"|"dbl"|
   *  "str"|"bin", ["lst", t], ["set", t], ["map", k, v] or ["rec", struct name]. */
  function Codec(descriptor) {
    const structs = {};
    const all = { ...descriptor.structs, [APPLICATION_EXCEPTION]: [[1, "message", "str"], [2, "type", "i32"]] };
    for (const [name, fields] of Object.entries(all)) {
      const byId = new Map();
      for (const [id, fname, type] of fields) byId.set(String(id), { id, name: fname, type });
      structs[name] = { fields, byId };
    }
    const methods = descriptor.methods;

    const struct = (name) => {
      const s = structs[name];
      if (s === undefined) throw new TjsonError(`unknown struct ${name}`);
      return s;
    };

    // ---- decoding ----

    const readStruct = (node, name) => {
      if (!(node instanceof Obj)) throw new TjsonError("struct is not a JSON object");
      const schema = name == null ? null : struct(name);
      const out = {};
      for (const [id, holder] of node.entries) {
        if (!(holder instanceof Obj) || holder.entries.length !== 1) {
          throw new TjsonError(`field ${id} is not {"<tag>": value}`);
        }
        const [tag, value] = holder.entries[0];
        const field = schema && schema.byId.get(id);
        const decoded = readValue(tag, value, field ? compatible(field.type, tag) : null);
        if (field) out[field.name] = decoded; // fields the schema does not name are skipped
      }
      return out;
    };

    const readValue = (tag, node, type) => {
      switch (tag) {
        case "tf": return num(node, tag) !== "0";
        case "i8": case "i16": case "i32": case "i64": return integer(num(node, tag), tag);
        case "dbl": return doubleOf(node);
        case "str":
          if (typeof node !== "string") throw new TjsonError("str value is not a JSON string");
          return type === "bin" ? base64Decode(node) : node;
        case "rec": return readStruct(node, type ? type[1] : null);
        case "lst": case "set": {
          const items = array(node, tag);
          const elemTag = items[0];
          const elemType = type ? compatible(type[1], elemTag) : null;
          const out = [];
          for (let i = 2; i < items.length; i++) out.push(readValue(elemTag, items[i], elemType));
          return out;
        }
        case "map": {
          const parts = array(node, tag);
          const [ktag, vtag, , body] = parts;
          if (!(body instanceof Obj)) throw new TjsonError("map body is not a JSON object");
          const ktype = type ? compatible(type[1], ktag) : null;
          const vtype = type ? compatible(type[2], vtag) : null;
          const out = new Map();
          for (const [key, value] of body.entries) out.set(readKey(ktag, key, ktype), readValue(vtag, value, vtype));
          return out;
        }
        default: throw new TjsonError(`unknown type tag ${tag}`);
      }
    };

    const readKey = (tag, key, type) => {
      if (typeof key === "string" && tag !== "str") { // numbers and bools come quoted
        if (tag === "tf") return key !== "0";
        if (tag === "dbl") return key in SPECIAL_DOUBLES ? SPECIAL_DOUBLES[key] : Number(key);
        if (INTEGER_TAGS.has(tag) || tag === "i64") return integer(key, tag);
      }
      return readValue(tag, key, type);
    };

    // ---- encoding ----

    const writeStruct = (name, value) => {
      const parts = [];
      for (const [id, fname, type] of struct(name).fields) {
        const v = value[fname];
        if (v === undefined || v === null) continue;
        parts.push(`"${id}":{"${tagOf(type)}":${writeValue(type, v)}}`);
      }
      return "{" + parts.join(",") + "}";
    };

    const writeValue = (type, v) => {
      if (typeof type !== "string") {
        switch (type[0]) {
          case "rec": return writeStruct(type[1], v);
          case "lst": case "set": {
            const items = Array.from(v, (item) => writeValue(type[1], item));
            return `["${tagOf(type[1])}",${items.length}` + items.map((x) => "," + x).join("") + "]";
          }
          case "map": {
            const entries = v instanceof Map ? Array.from(v) : Object.entries(v);
            const body = entries.map(([k, x]) => writeKey(type[1], k) + ":" + writeValue(type[2], x));
            return `["${tagOf(type[1])}","${tagOf(type[2])}",${entries.length},{${body.join(",")}}]`;
          }
          default: throw new TjsonError(`unknown type ${type[0]}`);
        }
      }
      switch (type) {
        case "tf": return v ? "1" : "0";
        case "i8": case "i16": case "i32": case "i64": return String(BigInt(v));
        case "dbl": return formatDouble(v);
        case "str": return JSON.stringify(String(v));
        case "bin": return '"' + base64Encode(v) + '"';
        default: throw new TjsonError(`unknown type ${type}`);
      }
    };

    const writeKey = (type, k) => {
      if (type === "str" || type === "bin") return writeValue(type, k);
      if (typeof type === "string") {
        const text = writeValue(type, k);
        return text[0] === '"' ? text : `"${text}"`;
      }
      return writeValue(type, k); // containers and structs: raw JSON, as Apache's writers
    };

    const method = (name) => {
      const m = methods[name];
      if (m === undefined) throw new TjsonError(`unknown method ${name}`);
      return m;
    };

    const message = (name, type, seqid, body) =>
      `[1,${JSON.stringify(name)},${type},${seqid},${body}]`;

    const header = (tree) => {
      if (!Array.isArray(tree) || tree.length !== 5) throw new TjsonError("a message is [1,name,type,seqid,{struct}]");
      const [version, name, type, seqid] = tree;
      if (!(version instanceof Num) || version.text !== "1") throw new TjsonError("TJSON version is not 1");
      if (typeof name !== "string") throw new TjsonError("method name is not a string");
      return { name, type: Number(num(type, "type")), seqid: Number(num(seqid, "seqid")) };
    };

    return {
      /** TJSON text of a CALL (ONEWAY for oneway methods) of ``name`` with ``args`` by field name. */
      encodeCall(name, seqid, args) {
        const m = method(name);
        return message(name, m.oneway ? ONEWAY : CALL, seqid, writeStruct(m.args, args || {}));
      },
      /** {name, type, seqid, args} of a TJSON call. */
      decodeCall(text) {
        const tree = parseTree(text);
        const h = header(tree);
        return { ...h, args: readStruct(tree[4], method(h.name).args) };
      },
      /** TJSON text of a REPLY carrying ``result`` (field names of the method's result struct). */
      encodeReply(name, seqid, result) {
        return message(name, REPLY, seqid, writeStruct(method(name).result, result));
      },
      /** {name, type, seqid, result} of a TJSON reply; type 3 gives ``exception`` instead. */
      decodeReply(text) {
        const tree = parseTree(text);
        const h = header(tree);
        if (h.type === EXCEPTION) {
          const e = readStruct(tree[4], APPLICATION_EXCEPTION);
          return { ...h, exception: new ApplicationException(e.message || "", e.type || 0) };
        }
        if (h.type !== REPLY) throw new TjsonError(`message type ${h.type} is not a reply`);
        return { ...h, result: readStruct(tree[4], method(h.name).result) };
      },
      /** The success value of a reply, or throws its declared exception / TApplicationException. */
      unwrapReply(name, decoded) {
        if (decoded.exception) throw decoded.exception;
        if (decoded.name !== name) throw new TjsonError(`reply names ${decoded.name}, not ${name}`);
        const fields = struct(method(name).result).fields;
        for (const [id, fname, type] of fields) {
          if (id !== 0 && decoded.result[fname] !== undefined) throw new DeclaredException(type[1], decoded.result[fname]);
        }
        return decoded.result.success;
      },
    };
  }

  /** A double as Python's repr writes it (the gateway's TJSON writer): shortest round-trip
   *  digits, exponent form below 1e-4 and from 1e16, ".0" on integral values. */
  function formatDouble(x) {
    if (Number.isNaN(x)) return '"NaN"';
    if (x === Infinity) return '"Infinity"';
    if (x === -Infinity) return '"-Infinity"';
    if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
    const [mantissa, expText] = x.toExponential().split("e");
    const exp = Number(expText);
    const negative = mantissa[0] === "-";
    const digits = mantissa.replace("-", "").replace(".", "");
    let body;
    if (exp < -4 || exp >= 16) {
      body = digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "") +
        "e" + (exp < 0 ? "-" : "+") + String(Math.abs(exp)).padStart(2, "0");
    } else if (exp < 0) {
      body = "0." + "0".repeat(-exp - 1) + digits;
    } else if (digits.length <= exp + 1) {
      body = digits + "0".repeat(exp + 1 - digits.length) + ".0";
    } else {
      body = digits.slice(0, exp + 1) + "." + digits.slice(exp + 1);
    }
    return (negative ? "-" : "") + body;
  }

  return { Codec, TjsonError, ApplicationException, DeclaredException, formatDouble, CALL, REPLY, EXCEPTION, ONEWAY };
});
