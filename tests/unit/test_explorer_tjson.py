"""The explorer's browser TJSON codec (``gateway/explorer/static/tjson.js``, run under Node)
against the gateway's own TJSON (``gateway/thrift``), on random calls and replies of every IDL
method, written by thriftpy2 in strict binary:

* the JS codec's TJSON call translates (gateway) to the very bytes thriftpy2 writes;
* the JS codec reads the gateway's TJSON of each reply to the values thriftpy2 wrote
  (i64 beyond 2^53, binary, doubles NaN/±Infinity/-0.0, unicode and control characters);
* written back, it gives the gateway's TJSON byte for byte.
"""

from __future__ import annotations

import base64
import json
import math
import random
import subprocess
from pathlib import Path

import pytest
from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.thrift import TMessageType, TType
from thriftpy2.transport import TMemoryBuffer

from gateway.explorer import METHODS, schema_descriptor
from gateway.thrift.schema import load_schema
from gateway.thrift.translate import binary_reply_to_tjson, tjson_call_to_binary

REPO = Path(__file__).resolve().parents[2]
CODEC = REPO / "gateway" / "explorer" / "static" / "tjson.js"
HARNESS = REPO / "tests" / "node" / "tjson_equivalence.js"
SEED = 20261122
CASES_PER_METHOD = 3

_I64 = [0, -1, 2**53 + 1, -(2**63), 2**63 - 1, 1_700_000_000_123]
_DOUBLES = [0.0, -0.0, 1.0, 0.1, -2.5, 1e16, 1.5e-07, 1e-05, 123456.789, 5e-324,
            1.7976931348623157e308, math.nan, math.inf, -math.inf, 1 / 3]
_ALPHABET = "az09 _-.:/=\"\\'<>&\n\t\r\x00\x01\x1f\x7f\u00e9\u6f22\u2028\U0001f600"


def _split(args):
    return (args[0], args[1]) if isinstance(args, tuple) else (args, None)


class _Random:
    """Random thriftpy2 values for a thrift_spec type, bounded in depth and size."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def value(self, ttype: int, args, depth: int):
        rng = self.rng
        if ttype == TType.BOOL:
            return rng.random() < 0.5
        if ttype == TType.BYTE:
            return rng.randint(-128, 127)
        if ttype == TType.I16:
            return rng.randint(-(2**15), 2**15 - 1)
        if ttype == TType.I32:
            return rng.choice([0, -1, 7, 2**31 - 1, -(2**31), rng.randint(-(2**31), 2**31 - 1)])
        if ttype == TType.I64:
            return rng.choice(_I64 + [rng.randint(-(2**63), 2**63 - 1)])
        if ttype == TType.DOUBLE:
            return rng.choice(_DOUBLES + [rng.uniform(-1e6, 1e6)])
        if ttype == TType.STRING:
            return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12)))
        if ttype == TType.BINARY:
            return bytes(rng.randrange(256) for _ in range(rng.randint(0, 9)))
        if ttype == TType.STRUCT:
            return self.struct(args, depth + 1)
        size = rng.randint(0, 3 if depth < 4 else 0)
        if ttype in (TType.LIST, TType.SET):
            elem = _split(args)
            return [self.value(*elem, depth + 1) for _ in range(size)]
        if ttype == TType.MAP:
            key, value = _split(args[0]), _split(args[1])
            out = {}
            for _ in range(size):
                k = self.value(*key, depth + 1)
                out[tuple(k) if isinstance(k, list) else k] = self.value(*value, depth + 1)
            return out
        raise AssertionError(f"type {ttype}")

    def struct(self, cls, depth: int, only: int | None = None):
        kwargs = {}
        for fid, entry in cls.thrift_spec.items():
            ttype, name, args = entry[0], entry[1], (entry[2] if len(entry) == 4 else None)
            chosen = fid == only if only is not None else self.rng.random() < (0.8 if depth < 4 else 0.2)
            if chosen:
                kwargs[name] = self.value(ttype, args, depth)
        return cls(**kwargs)


def _plain(value, ttype: int, args):
    """The typed plain form of tests/node/tjson_equivalence.js."""
    if ttype == TType.I64:
        return {"$i64": str(value)}
    if ttype == TType.BINARY:
        return {"$bin": base64.b64encode(value).decode()}
    if ttype == TType.DOUBLE:
        if math.isnan(value):
            return {"$dbl": "NaN"}
        if math.isinf(value):
            return {"$dbl": "Infinity" if value > 0 else "-Infinity"}
        if value == 0 and math.copysign(1, value) < 0:
            return {"$dbl": "-0.0"}
        return value
    if ttype == TType.STRUCT:
        return _plain_struct(value)
    if ttype in (TType.LIST, TType.SET):
        return [_plain(v, *_split(args)) for v in value]
    if ttype == TType.MAP:
        key, val = _split(args[0]), _split(args[1])
        return {"$map": [[_plain(list(k) if isinstance(k, tuple) else k, *key), _plain(v, *val)]
                         for k, v in value.items()]}
    return value


def _plain_struct(obj) -> dict:
    out = {}
    for entry in obj.thrift_spec.values():
        value = getattr(obj, entry[1])
        if value is not None:
            out[entry[1]] = _plain(value, entry[0], entry[2] if len(entry) == 4 else None)
    return out


def _binary_message(name: str, mtype: int, seqid: int, obj) -> bytes:
    buf = TMemoryBuffer()
    proto = TBinaryProtocol(buf)
    proto.write_message_begin(name, mtype, seqid)
    obj.write(proto)
    proto.write_message_end()
    return buf.getvalue()


def _run_node(descriptor: dict, cases: list[dict]) -> list[dict]:
    done = subprocess.run(
        ["node", str(HARNESS)], input=json.dumps({"descriptor": descriptor, "codec": str(CODEC), "cases": cases}),
        capture_output=True, text=True, check=True, timeout=300,
    )
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def schema():
    return load_schema()


def _cases(schema, methods, seed: int):
    gen = _Random(seed)
    cases, expected = [], []
    for name in methods:
        m = schema.methods[name]
        for i in range(CASES_PER_METHOD):
            args = gen.struct(m.args_class, 0)
            fields = list(m.result_class.thrift_spec)
            result = gen.struct(m.result_class, 0, only=gen.rng.choice(fields)) if fields else m.result_class()
            seqid = gen.rng.randint(1, 2**31 - 1)
            reply = binary_reply_to_tjson(_binary_message(name, TMessageType.REPLY, seqid, result), schema)
            cases.append({"method": name, "seqid": seqid, "args": _plain_struct(args), "reply": reply.decode()})
            expected.append((_binary_message(name, TMessageType.CALL, seqid, args), _plain_struct(args),
                             _plain_struct(result), seqid))
    return cases, expected


def test_browser_codec_is_equivalent_to_the_gateway_on_every_method(schema):
    methods = sorted(m for m in schema.methods if not schema.methods[m].oneway)
    cases, expected = _cases(schema, methods, SEED)
    results = _run_node(schema_descriptor(schema), cases)
    assert len(results) == len(cases) > 400
    for case, result, (call_binary, args, reply, seqid) in zip(cases, results, expected):
        where = f"{case['method']} (seqid {case['seqid']})"
        assert "error" not in result, f"{where}: {result.get('error')}"
        _, translated = tjson_call_to_binary(result["call"].encode(), schema)
        assert translated == call_binary, where
        assert result["call_args"] == args, where
        assert result["reply_result"] == reply, where
        assert result["reply_seqid"] == seqid
        assert result["reencoded"] == case["reply"], where


def test_the_comparison_sees_a_difference(schema):
    # The check can fail: a reply changed by one digit of an i64 beyond 2^53 is caught.
    cases, expected = _cases(schema, ["get_current_notificationEventId"], SEED)
    case = cases[0]
    case["reply"] = case["reply"].replace('{"i64":', '{"i64":1', 1)
    result = _run_node(schema_descriptor(schema), [case])[0]
    assert result["reply_result"] != expected[0][2]


def test_the_explorer_descriptor_holds_its_methods_only(schema):
    descriptor = schema_descriptor(schema, METHODS)
    assert set(descriptor["methods"]) == set(METHODS)
    assert "Table" in descriptor["structs"] and "Partition" in descriptor["structs"]
    table = {name: type_ for _, name, type_ in descriptor["structs"]["Table"]}
    assert table["sd"] == ["rec", "StorageDescriptor"] and table["parameters"] == ["map", "str", "str"]
    assert "ColumnStatistics" not in descriptor["structs"]


def test_malformed_replies_raise_the_codec_error(schema, tmp_path):
    script = tmp_path / "bad.js"
    script.write_text(
        f"const {{ Codec }} = require({json.dumps(str(CODEC))});\n"
        f"const codec = Codec({json.dumps(schema_descriptor(schema, METHODS))});\n"
        "const out = [];\n"
        "for (const text of process.argv.slice(2)) {\n"
        "  try { codec.decodeReply(text); out.push('ok'); } catch (e) { out.push(e.name + ':' + e.constructor.name); }\n"
        "}\n"
        "console.log(JSON.stringify(out));\n"
    )
    bad = ['[1,"get_table",2,1,{"0":{"rec":{"1":{"str":"t"}}}', '[2,"get_table",2,1,{}]',
           '[1,"get_table",2,1,{"0":{"i64":12x}}]', '[1,"get_table",2,1,{"0":{"rec":' + "[" * 70 + "]" * 70 + "}}]",
           '[1,"nope",2,1,{}]', '{}']
    done = subprocess.run(["node", str(script), *bad], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(done.stdout) == ["Error:TjsonError"] * len(bad)


def test_unwrap_gives_success_or_raises_the_declared_or_application_exception(schema, tmp_path):
    from gateway.thrift.translate import tapplication_exception_tjson

    replies = [
        '[1,"get_all_databases",2,3,{"0":{"lst":["str",2,"a","b"]}}]',
        '[1,"get_table",2,4,{"2":{"rec":{"1":{"str":"lab.t table not found"}}}}]',
        tapplication_exception_tjson("get_partitions_by_names", 5, "Method not exposed", 1).decode(),
    ]
    script = tmp_path / "unwrap.js"
    script.write_text(
        f"const T = require({json.dumps(str(CODEC))});\n"
        f"const codec = T.Codec({json.dumps(schema_descriptor(schema, METHODS))});\n"
        f"const out = [];\n"
        f"for (const text of {json.dumps(replies)}) {{\n"
        "  const d = codec.decodeReply(text);\n"
        "  try { out.push(['ok', codec.unwrapReply(d.name, d)]); }\n"
        "  catch (e) { out.push([e.constructor.name, e.exceptionName || e.type, e.message]); }\n"
        "}\n"
        "console.log(JSON.stringify(out));\n"
    )
    done = subprocess.run(["node", str(script)], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(done.stdout) == [
        ["ok", ["a", "b"]],
        ["DeclaredException", "NoSuchObjectException", "lab.t table not found"],
        ["ApplicationException", 1, "Method not exposed"],
    ]
