/*
 * Iceberg table metadata as the REST catalog's loadTable returns it (Iceberg REST OpenAPI
 * LoadTableResult; the table spec's JSON serialization), read exactly:
 *
 * parse(text): JSON whose integers beyond 2^53 (snapshot ids are 64-bit longs) are kept as
 *   their decimal text, never rounded: with the reviver's source text where the engine gives it
 *   (JSON.parse source text access, ES2025), else by quoting such integers outside strings first.
 * typeText(type): an Iceberg type (a primitive's name, or a struct/list/map object) as one line.
 */
(function (root, factory) {
  if (typeof module === "object" && module.exports) module.exports = factory();
  else root.IcebergMeta = factory();
})(typeof self !== "undefined" ? self : this, function () {
  "use strict";

  const INTEGER = /^-?\d+$/;
  const NUMBER = /-?\d+(\.\d+)?([eE][+-]?\d+)?/y;
  const big = (literal) => INTEGER.test(literal) && !Number.isSafeInteger(Number(literal));

  const REVIVER_SOURCE = (() => {
    let seen = false;
    JSON.parse("1", (key, value, context) => { seen = !!(context && context.source); return value; });
    return seen;
  })();

  function quoteBigIntegers(text) {
    let out = "";
    let inString = false;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (inString) {
        out += c;
        if (c === "\\") out += text[++i] || "";
        else if (c === '"') inString = false;
      } else if (c === '"') {
        inString = true;
        out += c;
      } else if (c === "-" || (c >= "0" && c <= "9")) {
        NUMBER.lastIndex = i;
        const match = NUMBER.exec(text);
        if (!match) { out += c; continue; } // not a number: JSON.parse reports it
        out += big(match[0]) ? `"${match[0]}"` : match[0];
        i += match[0].length - 1;
      } else {
        out += c;
      }
    }
    return out;
  }

  function parse(text, useReviver = REVIVER_SOURCE) {
    if (useReviver) {
      return JSON.parse(text, (key, value, context) =>
        (typeof value === "number" && big(context.source) ? context.source : value));
    }
    return JSON.parse(quoteBigIntegers(text));
  }

  function typeText(t) {
    if (typeof t === "string") return t;
    if (!t || typeof t !== "object") return String(t);
    if (t.type === "struct") return `struct<${(t.fields || []).map((f) => `${f.name}: ${typeText(f.type)}`).join(", ")}>`;
    if (t.type === "list") return `list<${typeText(t.element)}>`;
    if (t.type === "map") return `map<${typeText(t.key)}, ${typeText(t.value)}>`;
    return JSON.stringify(t);
  }

  return { parse, typeText, REVIVER_SOURCE };
});
