"""Seeded, deterministic hostile request bodies and the checks a battery of them must pass (issue 9).

:func:`hostile_bodies` mutates and truncates the MS-HMSHTTP spec's nine read calls (section
3.1.5; ``tests/support/spec_calls.py``) written in TJSON, strict TBinaryProtocol and
TCompactProtocol. Each original is a message header written here (so that out-of-range types
and seqids can be written at all) followed by the args struct written by Apache Thrift's own
Python protocols and generated code. Mutations: byte flips, insertions, deletions, duplicated
spans, number and type-tag swaps, message types 0-7 and out of range, seqid extremes, method
name changes, splices and truncations; about one body in eight is left valid (with a random
seqid) so that a desynchronised upstream connection shows as a wrong reply.

:func:`run_battery` sends bodies to a running gateway (aiohttp, keep-alive, bounded
concurrency) and :func:`check_answers` judges the answers; :func:`differential` runs the C and
pure-Python translators on the same hostile inputs. The integration test, the unit test and
``bench/fuzz.py`` share them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import re
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from thrift.protocol import TBinaryProtocol, TCompactProtocol, TJSONProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import TTransport

from tests.support.spec_calls import DB, TABLE
from tests.support.thrift_gen import hive_metastore_modules

__all__ = [
    "PROTOCOLS", "SPEC_CALLS", "READ_METHODS", "CONTENT_TYPES", "Answer", "Verdict",
    "hostile_bodies", "original", "request_header", "reply_header", "run_battery",
    "check_answers", "expected_results", "mutated_replies", "differential",
]

CALL, REPLY, EXCEPTION, ONEWAY = 1, 2, 3, 4
PROTOCOLS = ("tjson", "binary", "compact")
CONTENT_TYPES = {
    "tjson": "application/vnd.apache.thrift.json",
    "binary": "application/x-thrift",
    "compact": "application/vnd.apache.thrift.compact",
}
#: The nine read methods of MS-HMSHTTP 3.1.5 with the spec's sample arguments.
SPEC_CALLS: dict[str, tuple] = {
    "get_all_databases": (),
    "get_databases": ("hms*",),
    "get_database": (DB,),
    "get_all_tables": (DB,),
    "get_tables": (DB, "test*"),
    "get_table": (DB, TABLE),
    "get_tables_by_type": (DB, "*", "MANAGED_TABLE"),
    "get_partition_names": (DB, TABLE, -1),
    "get_partitions": (DB, TABLE, -1),
}
READ_METHODS = list(SPEC_CALLS)
# Real HMS methods a read-only service does not expose (none of them changes anything when
# called with a read method's arguments: missing required fields fail in HMS).
NOT_EXPOSED = ["get_config_value", "getVersion", "get_fields", "create_database", "set_ugi",
               "get_table_objects_by_name"]
NOT_EXPOSED_TEXT = "is not exposed by this service"

_I32 = struct.Struct("!i")
_SEQIDS = [0, -1, 1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**32, 2**63, -(2**63) - 1, 10**30]
_NUMBERS = [b"0", b"-1", b"1", b"127", b"128", b"-129", b"32767", b"32768", b"-32769",
            b"2147483647", b"2147483648", b"-2147483649", b"9223372036854775807",
            b"9223372036854775808", b"-9223372036854775809", b"1e309", b"-0", b"0.5", b"1E2",
            b"00", b"01", b"-", b"1.", b".5", b"9" * 400, b"NaN", b'"NaN"', b"true", b"null"]
_TAGS = [b"tf", b"i8", b"i16", b"i32", b"i64", b"dbl", b"str", b"rec", b"lst", b"set", b"map",
         b"", b"STR", b"bin", b"i128", b"\xff"]
_STRINGS = [b"", b"x" * 4000, b"\\u0000", b"\\ud800", b"\\udc00\\ud800", b"\\x41", b"\\",
            b"\x00", b"\x01\x1f", b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\\u00e9\\/",
            b"\xe2\x80\xa8", b"%s", b"' OR 1=1 --", b"../../etc/passwd"]
_INT_EXTREMES_16 = [0, -1, 1, 32767, -32768]
_INT_EXTREMES_32 = [0, -1, 1, 2**31 - 1, -(2**31), 0x10000000, 70000]
_INT_EXTREMES_64 = [0, -1, 2**63 - 1, -(2**63)]


# ------------------------------------------------------------------ originals

def _args_struct(factory, name: str, args: tuple) -> bytes:
    service, _ = hive_metastore_modules()
    buffer = TTransport.TMemoryBuffer()
    getattr(service, f"{name}_args")(*args).write(factory(buffer))
    return buffer.getvalue()


_STRUCT_FACTORIES = {
    "tjson": TJSONProtocol.TJSONProtocol,
    "binary": lambda t: TBinaryProtocol.TBinaryProtocol(t, strictRead=True, strictWrite=True),
    "compact": TCompactProtocol.TCompactProtocol,
}
_struct_cache: dict[tuple[str, str], bytes] = {}


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def header(protocol: str, name: str | bytes, mtype: int, seqid: int | bytes) -> bytes:
    """A message header in ``protocol`` as written on the wire, out-of-range values included.

    TJSON: ``[1,"name",type,seqid,`` (``seqid`` bytes are written verbatim); binary: version
    word ``0x80010000 | (type & 0xff)``, name, seqid modulo 2**32; compact: ``0x82``,
    ``(type & 7) << 5 | 1``, seqid as varint of its value modulo 2**32 (or ``seqid`` bytes
    verbatim), name.
    """
    raw = name.encode("utf-8", "surrogatepass") if isinstance(name, str) else name
    if protocol == "tjson":
        quoted = (json.dumps(name) if isinstance(name, str) else '"' + name.decode("latin-1") + '"')
        seq = seqid if isinstance(seqid, bytes) else str(seqid).encode()
        return b"[1," + quoted.encode("utf-8", "surrogatepass") + b",%d," % mtype + seq + b","
    if protocol == "binary":
        seq = seqid if isinstance(seqid, bytes) else struct.pack("!I", seqid % 2**32)
        return struct.pack("!I", 0x80010000 | (mtype & 0xFF)) + _I32.pack(len(raw)) + raw + seq
    seq = seqid if isinstance(seqid, bytes) else _uvarint(seqid % 2**32)
    return b"\x82" + bytes([((mtype & 7) << 5) | 1]) + seq + _uvarint(len(raw)) + raw


def original(protocol: str, name: str, seqid: int = 1, mtype: int = CALL, args: tuple | None = None) -> bytes:
    """The spec call ``name`` (sample arguments unless ``args``) as a complete message."""
    key = (protocol, name)
    if args is not None:
        body = _args_struct(_STRUCT_FACTORIES[protocol], name, args)
    else:
        if key not in _struct_cache:
            _struct_cache[key] = _args_struct(_STRUCT_FACTORIES[protocol], name, SPEC_CALLS[name])
        body = _struct_cache[key]
    return header(protocol, name, mtype, seqid) + body + (b"]" if protocol == "tjson" else b"")


# ------------------------------------------------------------------ wire slots

@dataclass(frozen=True)
class Slot:
    """A place in a message worth mutating: ``kind`` (``ttype``, ``fid``, ``len``, ``count``,
    ``i16``/``i32``/``i64``, ``varint``, ``ctype``), byte offset and size."""

    kind: str
    offset: int
    size: int


def binary_slots(data: bytes, pos: int) -> list[Slot]:
    """Slots of the strict-binary struct at ``pos`` (nested values included); stops quietly at
    anything malformed."""
    slots: list[Slot] = []
    fixed = {2: 1, 3: 1, 4: 8, 6: 2, 8: 4, 10: 8}

    def value(pos: int, ttype: int, depth: int) -> int:
        if depth > 20:
            raise IndexError
        if ttype in fixed:
            size = fixed[ttype]
            if ttype in (6, 8, 10):
                slots.append(Slot(f"i{size * 8}", pos, size))
            return pos + size
        if ttype == 11:
            (n,) = _I32.unpack_from(data, pos)
            slots.append(Slot("len", pos, 4))
            return pos + 4 + n
        if ttype == 12:
            return struct_at(pos, depth + 1)
        if ttype in (14, 15):
            slots.append(Slot("ttype", pos, 1))
            (n,) = _I32.unpack_from(data, pos + 1)
            slots.append(Slot("count", pos + 1, 4))
            elem, pos = data[pos], pos + 5
            for _ in range(min(n, 10_000)):
                pos = value(pos, elem, depth + 1)
            return pos
        if ttype == 13:
            slots.extend([Slot("ttype", pos, 1), Slot("ttype", pos + 1, 1), Slot("count", pos + 2, 4)])
            k, v = data[pos], data[pos + 1]
            (n,) = _I32.unpack_from(data, pos + 2)
            pos += 6
            for _ in range(min(n, 10_000)):
                pos = value(value(pos, k, depth + 1), v, depth + 1)
            return pos
        raise IndexError

    def struct_at(pos: int, depth: int) -> int:
        while True:
            ttype = data[pos]
            slots.append(Slot("ttype", pos, 1))
            if ttype == 0:
                return pos + 1
            slots.append(Slot("fid", pos + 1, 2))
            pos = value(pos + 3, ttype, depth)

    try:
        struct_at(pos, 0)
    except (IndexError, struct.error):
        pass
    return slots


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[pos]
        n |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise IndexError


def compact_slots(data: bytes, pos: int) -> list[Slot]:
    """Slots of the compact struct at ``pos``; stops quietly at anything malformed."""
    slots: list[Slot] = []

    def varint(pos: int, kind: str = "varint") -> tuple[int, int]:
        n, end = _read_uvarint(data, pos)
        slots.append(Slot(kind, pos, end - pos))
        return n, end

    def value(pos: int, ctype: int, depth: int) -> int:
        if depth > 20:
            raise IndexError
        if ctype in (1, 2, 3):
            return pos + 1
        if ctype in (4, 5, 6):
            return varint(pos)[1]
        if ctype == 7:
            return pos + 8
        if ctype == 8:
            n, pos = varint(pos, "len")
            return pos + n
        if ctype == 12:
            return struct_at(pos, depth + 1)
        if ctype in (9, 10):
            slots.append(Slot("ctype", pos, 1))
            head = data[pos]
            n, elem, pos = head >> 4, head & 0x0F, pos + 1
            if n == 15:
                n, pos = varint(pos, "count")
            for _ in range(min(n, 10_000)):
                pos = value(pos, elem, depth + 1) if elem not in (1, 2) else pos + 1
            return pos
        if ctype == 11:
            n, pos = varint(pos, "count")
            if n == 0:
                return pos
            slots.append(Slot("ctype", pos, 1))
            k, v = data[pos] >> 4, data[pos] & 0x0F
            pos += 1
            for _ in range(min(n, 10_000)):
                pos = value(value(pos, k, depth + 1), v, depth + 1)
            return pos
        raise IndexError

    def struct_at(pos: int, depth: int) -> int:
        while True:
            head = data[pos]
            slots.append(Slot("ctype", pos, 1))
            if head == 0:
                return pos + 1
            ctype, pos = head & 0x0F, pos + 1
            if head >> 4 == 0:
                pos = varint(pos, "fid")[1]
            pos = value(pos, ctype, depth) if ctype not in (1, 2) else pos

    try:
        struct_at(pos, 0)
    except IndexError:
        pass
    return slots


# ------------------------------------------------------------------ mutations

def _struct_start(protocol: str, body: bytes) -> int:
    if protocol == "tjson":
        return body.index(b"{")
    if protocol == "binary":
        (n,) = _I32.unpack_from(body, 4)
        return 12 + n
    pos = _read_uvarint(body, 2)[1]
    n, pos = _read_uvarint(body, pos)
    return pos + n


def _bytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


def _generic(rng: random.Random, body: bytes) -> tuple[str, bytes]:
    """Format-blind mutations."""
    data = bytearray(body)
    op = rng.choice(["flip", "byte", "insert", "delete", "duplicate", "append", "truncate", "swap"])
    if op == "flip":
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif op == "byte":
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.choice([0, 0x7F, 0x80, 0xFF, rng.getrandbits(8)])
    elif op == "insert":
        at = rng.randrange(len(data) + 1)
        data[at:at] = _bytes(rng, rng.randint(1, 16))
    elif op == "delete":
        at = rng.randrange(len(data))
        del data[at: at + rng.randint(1, 8)]
    elif op == "duplicate":
        at = rng.randrange(len(data))
        span = data[at: at + rng.randint(1, 32)]
        data[at:at] = span * rng.choice([1, 2, 50])
    elif op == "append":
        data += rng.choice([b"\x00", b"]", b"}", b" ", b"\x80\x01\x00\x01", _bytes(rng, 8)])
    elif op == "truncate":
        del data[rng.randrange(len(data)):]
    else:  # swap two bytes
        i, j = rng.randrange(len(data)), rng.randrange(len(data))
        data[i], data[j] = data[j], data[i]
    return op, bytes(data)


_TJSON_NUMBER = re.compile(rb"(?<=[:,\[])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_TJSON_TAG = re.compile(rb'(?<=\{")(?:tf|i8|i16|i32|i64|dbl|str|rec|lst|set|map)(?=":)')
_TJSON_STRING = re.compile(rb'(?<=\{"str":")(?:[^"\\]|\\.)*(?=")')


def _tjson_body(rng: random.Random, body: bytes) -> tuple[str, bytes]:
    start = _struct_start("tjson", body)
    head, rest = body[:start], body[start:]
    op = rng.choice(["number", "tag", "string", "unknown-field", "duplicate-field", "wrong-json-type",
                     "whitespace", "unbalanced", "nested", "container"])
    if op in ("number", "tag", "string"):
        pattern = {"number": _TJSON_NUMBER, "tag": _TJSON_TAG, "string": _TJSON_STRING}[op]
        matches = list(pattern.finditer(rest))
        if not matches:
            return _generic(rng, body)
        m = rng.choice(matches)
        new = rng.choice({"number": _NUMBERS, "tag": _TAGS, "string": _STRINGS}[op])
        return op, head + rest[: m.start()] + new + rest[m.end():]
    if op == "unknown-field":
        extra = rng.choice([b'"99":{"str":"x"}', b'"-1":{"i32":1}', b'"32768":{"i32":1}',
                            b'"0":{"rec":{}}', b'"7":{"lst":["i32",2147483647]}',
                            b'"8":{"map":["str","i32",1,{"a":1}]}', b'"9":{"dbl":"Infinity"}',
                            b'"x":{"str":"y"}', b'"":{}', b'"1":{}', b'"2":{"str":"a","i32":1}'])
        inner = rest[1:]
        return op, head + b"{" + extra + (b"," if inner[:1] != b"}" else b"") + inner
    if op == "duplicate-field":
        m = re.search(rb'"\d+":\{"[a-z0-9]+":(?:"(?:[^"\\]|\\.)*"|-?\d+)\}', rest)
        if not m:
            return _generic(rng, body)
        return op, head + rest[: m.end()] + b"," + m.group(0) + rest[m.end():]
    if op == "wrong-json-type":
        m = rng.choice(list(re.finditer(rb'\{"(str|i32|i16)":', rest)) or [None])
        if m is None:
            return _generic(rng, body)
        end = rest.index(b"}", m.end())
        value = rng.choice([b"5", b'"5"', b"[]", b"{}", b"null", b"true", b"1.5", b'"\\u0035"'])
        return op, head + rest[: m.end()] + value + rest[end:]
    if op == "whitespace":
        at = rng.randrange(len(body))
        return op, body[:at] + rng.choice([b" ", b"\n", b"\t", b"\r\n ", b"\x0b", b"\xc2\xa0"]) + body[at:]
    if op == "unbalanced":
        at = rng.randrange(len(body))
        return op, body[:at] + rng.choice([b"[", b"]", b"{", b"}", b",", b":", b'"']) + body[at:]
    if op == "nested":
        depth = rng.choice([10, 65, 1000])
        inner = rest[1:]
        extra = b'"50":' + b'{"rec":{"1":' * depth + b'{"i32":1}' + b"}}" * depth
        return op, head + b"{" + extra + (b"," if inner[:1] != b"}" else b"") + inner
    extra = rng.choice([b'"50":{"lst":["str",3,"a"]}', b'"50":{"lst":["str",-1]}',
                        b'"50":{"set":["i32",1,1,2]}', b'"50":{"map":["str","str",0,{}]}',
                        b'"50":{"map":["i32","str",1,{"x":"y"}]}', b'"50":{"lst":["rec",1,{"1":{"tf":2}}]}'])
    inner = rest[1:]
    return "container", head + b"{" + extra + (b"," if inner[:1] != b"}" else b"") + inner


def _put_int(data: bytearray, slot: Slot, value: int) -> None:
    data[slot.offset: slot.offset + slot.size] = (value % 2 ** (8 * slot.size)).to_bytes(slot.size, "big")


def _binary_body(rng: random.Random, body: bytes) -> tuple[str, bytes]:
    slots = binary_slots(body, _struct_start("binary", body))
    if not slots:
        return _generic(rng, body)
    slot = rng.choice(slots)
    data = bytearray(body)
    if slot.kind == "ttype":
        data[slot.offset] = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 0x7F, 0xFF])
    elif slot.kind == "fid":
        _put_int(data, slot, rng.choice(_INT_EXTREMES_16))
    elif slot.kind in ("len", "count", "i32"):
        _put_int(data, slot, rng.choice(_INT_EXTREMES_32 + [_I32.unpack_from(body, slot.offset)[0] + rng.choice([-1, 1])]))
    elif slot.kind == "i16":
        _put_int(data, slot, rng.choice(_INT_EXTREMES_16))
    else:
        _put_int(data, slot, rng.choice(_INT_EXTREMES_64))
    return f"{slot.kind}-swap", bytes(data)


def _compact_body(rng: random.Random, body: bytes) -> tuple[str, bytes]:
    slots = compact_slots(body, _struct_start("compact", body))
    if not slots:
        return _generic(rng, body)
    slot = rng.choice(slots)
    data = bytearray(body)
    if slot.kind == "ctype":
        old = data[slot.offset]
        data[slot.offset] = rng.choice([(old & 0xF0) | rng.randrange(16), rng.getrandbits(8), 0xF0 | (old & 0x0F)])
    else:  # a varint: extreme values, overlong and unterminated forms
        new = rng.choice([b"\x00", b"\x7f", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x7f",
                          b"\x80\x80\x80\x80\x80\x00", b"\xff" * 10 + b"\x01", b"\xff" * 11,
                          b"\x80\x00", b"\xfe\xff\xff\xff\x0f", b"\x01"])
        data[slot.offset: slot.offset + slot.size] = new
    return f"{slot.kind}-swap", bytes(data)


_BODY_MUTATORS = {"tjson": _tjson_body, "binary": _binary_body, "compact": _compact_body}


def _header_mutation(rng: random.Random, protocol: str, name: str) -> tuple[str, bytes]:
    struct_part = original(protocol, name)[_struct_start(protocol, original(protocol, name)):]
    op = rng.choice(["mtype", "mtype", "seqid", "name", "version"])
    if op == "mtype":
        mtype = rng.choice([0, 2, 3, 4, 4, 5, 7] + ([-1, 255, 256, 2**31, 2**32 + 1] if protocol == "tjson"
                                                  else [0x7F, 0xFF] if protocol == "binary" else []))
        return f"mtype={mtype}", header(protocol, name, mtype, rng.randrange(2**31)) + struct_part
    if op == "seqid":
        if protocol == "tjson":
            seqid = rng.choice(_SEQIDS + [b"1.0", b"-0", b"1e3", b'"1"', b"null", b"01"])
        elif protocol == "binary":
            seqid = rng.choice(_SEQIDS)
        else:
            seqid = rng.choice(_SEQIDS + [b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x7f",
                                          b"\x80\x80\x80\x80\x80\x01", b"\xff" * 11, b"\x80\x00"])
        return f"seqid={seqid!r}"[:40], header(protocol, name, CALL, seqid) + struct_part
    if op == "name":
        new = rng.choice(READ_METHODS + NOT_EXPOSED + [
            "", "x" * 5000, name.upper(), name + " ", " " + name, name + "\x00", "n\u00e9", "\U0001f600",
            "get_database\ud800", b"get_\xff\xfe", "get_database.get_table", "../get_table"])
        label = f"name={new!r}"[:40]
        if protocol == "tjson" and isinstance(new, bytes):
            return label, header(protocol, new, CALL, 1) + struct_part
        return label, header(protocol, new, CALL, rng.randrange(2**31)) + struct_part
    # version / protocol id
    good = header(protocol, name, CALL, 1)
    if protocol == "tjson":
        bad = rng.choice([b"[2,", b"[0,", b"[-1,", b'["1",', b"[1.0,", b"[ 1 ,", b"[[1],"])
        return "version", bad + good[3:] + struct_part
    if protocol == "binary":
        word = rng.choice([0x80020001, 0x80000001, 0x80010100, 0x7FFF0001, 0xFFFF0001, len(name)])
        return "version", struct.pack("!I", word) + good[4:] + struct_part
    byte1 = rng.choice([0x00, 0x02, 0x1F, 0x21, 0xE1, 0x3F])
    return "version", bytes([rng.choice([0x82, 0x82, 0x83, 0x80])]) + bytes([byte1]) + good[2:] + struct_part


def hostile_bodies(seed: int, count: int) -> Iterator[tuple[str, bytes]]:
    """``count`` (label, body) pairs, the same for the same ``seed``.

    Labels read ``protocol:method:mutation`` (``valid`` for an unmutated call with a random
    seqid). Mutations: header (message type 0,2,3,4,5,7 and out of range, seqid extremes and
    malformed forms, name changes to other read methods, methods not exposed, empty, huge,
    invalid UTF-8; version/protocol id), body (per protocol: number, type-tag, string,
    length/count and field-id swaps at real wire positions, unknown and duplicate fields,
    wrong JSON types, nesting), format-blind byte mutations, truncations, splices of two calls.
    """
    rng = random.Random(seed)
    for _ in range(count):
        protocol = rng.choice(PROTOCOLS)
        name = rng.choice(READ_METHODS)
        body = original(protocol, name, seqid=rng.randrange(2**31))
        kind = rng.random()
        if kind < 0.12:
            op = "valid"
        elif kind < 0.32:
            op, body = _header_mutation(rng, protocol, name)
        elif kind < 0.62:
            op, body = _BODY_MUTATORS[protocol](rng, body)
        elif kind < 0.82:
            op, body = _generic(rng, body)
        elif kind < 0.92:
            op, body = "truncate", body[: rng.randrange(len(body))]
        else:
            other = original(rng.choice(PROTOCOLS), rng.choice(READ_METHODS))
            op, body = "splice", body[: rng.randrange(len(body))] + other[rng.randrange(len(other)):]
        if kind >= 0.12 and rng.random() < 0.15:  # a second mutation on top
            second, body = _generic(rng, body) if body else ("none", body)
            op += "+" + second
        yield f"{protocol}:{name}:{op}", body


# ------------------------------------------------------------------ reading headers

_TJSON_HEAD = re.compile(rb'\[1,("(?:[^"\\]|\\.)*"),(-?\d+),(-?\d+),')


def request_header(body: bytes) -> tuple[str, int, int] | None:
    """``(name, type, seqid)`` of a well-formed message header in any of the three protocols
    (compact JSON, i32 seqid), else None."""
    try:
        if body[:1] == b"[":
            m = _TJSON_HEAD.match(body)
            if not m:
                return None
            name = json.loads(m.group(1))
            mtype, seqid = int(m.group(2)), int(m.group(3))
            if not -(2**31) <= seqid < 2**31:
                return None
            return name, mtype, seqid
        if body[:2] == b"\x80\x01":
            (n,) = _I32.unpack_from(body, 4)
            if n < 0:
                return None
            name = body[8: 8 + n].decode("utf-8")
            (seqid,) = _I32.unpack_from(body, 8 + n)
            return name, body[3], seqid
        if body[:1] == b"\x82":
            seqid, pos = _read_uvarint(body, 2)
            n, pos = _read_uvarint(body, pos)
            if pos + n > len(body) or seqid >= 2**32:
                return None
            return body[pos: pos + n].decode("utf-8"), body[1] >> 5, seqid - 2**32 if seqid >= 2**31 else seqid
    except (IndexError, struct.error, UnicodeDecodeError, json.JSONDecodeError, ValueError):
        return None
    return None


_READERS = {
    "tjson": TJSONProtocol.TJSONProtocol,
    "binary": TBinaryProtocol.TBinaryProtocolAccelerated,
    "compact": TCompactProtocol.TCompactProtocolAccelerated,
}


def reply_header(protocol: str, body: bytes) -> tuple[str, int, int]:
    """``(name, type, seqid)`` of a reply the gateway wrote in ``protocol``."""
    if protocol == "tjson":
        tree = json.loads(body)
        return tree[1], tree[2], tree[3]
    protocol_obj = _READERS[protocol](TTransport.TMemoryBuffer(body))
    name, mtype, seqid = protocol_obj.readMessageBegin()
    return name, mtype, seqid


def read_reply(protocol: str, body: bytes):
    """``(name, type, seqid, value)``: ``value`` is the ``<name>_result`` object for a REPLY, the
    ``TApplicationException`` for an EXCEPTION (Apache's readers and generated code)."""
    service, _ = hive_metastore_modules()
    prot = _READERS[protocol](TTransport.TMemoryBuffer(body))
    name, mtype, seqid = prot.readMessageBegin()
    if mtype == EXCEPTION:
        value = TApplicationException()
    else:
        value = getattr(service, f"{name}_result")()
    value.read(prot)
    prot.readMessageEnd()
    return name, mtype, seqid, value


# ------------------------------------------------------------------ the battery

@dataclass
class Answer:
    index: int
    label: str
    body: bytes
    protocol: str
    status: int
    reply: bytes
    elapsed: float  # seconds, request sent to reply read
    request_id: str


@dataclass
class Verdict:
    """What :func:`check_answers` found: ``violations`` (human-readable), the answers that went
    upstream, and counts by kind."""

    violations: list[str] = field(default_factory=list)
    upstream: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1


def _protocol_of(body: bytes) -> str:
    first = body[:1]
    return "tjson" if first == b"[" else "binary" if first == b"\x80" else "compact" if first == b"\x82" else "tjson"


async def run_battery(gw, items: Iterable[tuple[str, bytes]], *, concurrency: int = 6,
                      prefix: str = "hb", user: str = "admin", password: str = "admin-password",
                      timeout: float = 30.0) -> list[Answer]:
    """POST every ``(label, body)`` to ``gw`` (a RunningGateway) over ``concurrency`` kept-alive
    connections; each answer with its status, body and wall time (seconds).

    The request id is ``<prefix>-<index>`` so that audit lines can be matched.
    """
    import aiohttp

    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    queue: asyncio.Queue = asyncio.Queue()
    for i, (label, body) in enumerate(items):
        queue.put_nowait((i, label, body))
    answers: list[Answer] = []
    connector = aiohttp.TCPConnector(limit=concurrency, ssl=gw.ssl_context())
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        async def worker() -> None:
            while not queue.empty():
                i, label, body = queue.get_nowait()
                protocol = label.split(":", 1)[0] if label.split(":", 1)[0] in PROTOCOLS else _protocol_of(body)
                rid = f"{prefix}-{i}"
                headers = {"Authorization": f"Basic {token}", "Content-Type": CONTENT_TYPES[protocol],
                           "X-Request-Id": rid}
                started = time.monotonic()
                async with session.post(gw.url(), data=body, headers=headers) as response:
                    reply = await response.read()
                    status = response.status
                answers.append(Answer(i, label, body, protocol, status, reply, time.monotonic() - started, rid))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    answers.sort(key=lambda a: a.index)
    return answers


def expected_results(direct) -> dict[str, object]:
    """The nine spec calls' results from a direct strict-binary client of the same HMS."""
    return {name: getattr(direct, name)(*args) for name, args in SPEC_CALLS.items()}


def _audit_details(gw) -> dict[str, str]:
    details = {}
    for line in gw.log().splitlines():
        if line.startswith("{") and '"request_id"' in line:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            details[record.get("request_id")] = record.get("detail")
    return details


UPSTREAM_FAULTS = {"upstream_unavailable", "upstream_timeout"}


def check_answers(gw, answers: list[Answer], expected: dict[str, object], *, max_seconds: float = 1.0) -> Verdict:
    """Judge a battery's answers (issue 9):

    * no 5xx, except a 502/504 whose audit line says the upstream failed (HMS may close the
      connection on a call it accepted);
    * every answer within ``max_seconds``;
    * a 200 to a ONEWAY-typed read call is a violation (the nine methods are two-way);
    * a 200 carries a REPLY or EXCEPTION whose name and seqid are the request's; an unmutated
      call's reply equals ``expected`` (a direct call): anything else means a reply reached
      the wrong caller;
    * ``upstream`` counts the answers that went to HMS: 200s carrying HMS's REPLY/EXCEPTION
      (not the gateway's own "not exposed" TApplicationException) and upstream 502/504s.
    """
    verdict = Verdict()
    details: dict[str, str] | None = None
    for a in answers:
        where = f"#{a.index} {a.label}"
        if a.elapsed > max_seconds:
            verdict.violations.append(f"{where}: answered in {a.elapsed:.2f} s")
        head = request_header(a.body)
        if a.status >= 500:
            if details is None:
                time.sleep(0.3)  # audit lines are written in batches every 0.1 s
                details = _audit_details(gw)
            detail = details.get(a.request_id)
            if a.status in (502, 504) and detail in UPSTREAM_FAULTS:
                verdict.upstream += 1
                verdict.count(f"{a.status} {detail}")
            else:
                verdict.violations.append(f"{where}: {a.status} ({detail}) {a.reply[:200]!r}")
            continue
        verdict.count(str(a.status))
        if a.status != 200:
            if a.label.endswith(":valid"):
                verdict.violations.append(f"{where}: a valid call got {a.status} {a.reply[:200]!r}")
            continue
        if head is not None and head[1] == ONEWAY and head[0] in SPEC_CALLS:
            verdict.violations.append(f"{where}: ONEWAY-typed call of two-way {head[0]} got 200 "
                                      f"{a.reply[:80]!r} (HMS will reply on a connection nobody reads)")
            verdict.upstream += 1  # it was forwarded
            continue
        if not a.reply:
            verdict.violations.append(f"{where}: 200 with an empty body")
            continue
        try:
            name, mtype, seqid, value = read_reply(a.protocol, a.reply)
        except Exception as exc:  # noqa: BLE001 - any failure to read is the finding
            verdict.violations.append(f"{where}: unreadable 200 reply ({exc!r}): {a.reply[:200]!r}")
            continue
        own = mtype == EXCEPTION and value.type == TApplicationException.UNKNOWN_METHOD and \
            NOT_EXPOSED_TEXT in (value.message or "")
        if not own:
            verdict.upstream += 1
        verdict.count("200 not exposed" if own else f"200 type {mtype}")
        if head is not None and (name, seqid) != (head[0], head[2]):
            verdict.violations.append(f"{where}: reply {name!r} seqid {seqid} to request {head[0]!r} "
                                      f"seqid {head[2]}")
        elif a.label.endswith(":valid"):
            method = a.label.split(":")[1]
            if mtype != REPLY or value.success != expected[method]:
                verdict.violations.append(f"{where}: reply differs from a direct call: {a.reply[:200]!r}")
    return verdict


# ------------------------------------------------------------------ translator differential

def mutated_replies(replies: list[bytes], seed: int, count: int) -> Iterator[tuple[str, bytes]]:
    """``count`` (label, message) pairs: strict-binary replies from ``replies``, unchanged,
    truncated, with slot swaps at real wire positions (types, field ids, lengths, counts,
    numbers), header changes (type 0-255, name) and format-blind byte mutations."""
    rng = random.Random(seed)
    for _ in range(count):
        message = rng.choice(replies)
        (n,) = _I32.unpack_from(message, 4)
        pos = 12 + n
        kind = rng.random()
        if kind < 0.1:
            yield "reply:valid", message
        elif kind < 0.5:
            slots = binary_slots(message, pos)
            if not slots:
                continue
            slot = rng.choice(slots)
            data = bytearray(message)
            if slot.kind == "ttype":
                data[slot.offset] = rng.randrange(20) if rng.random() < 0.9 else rng.getrandbits(8)
            elif slot.kind in ("len", "count"):
                old = _I32.unpack_from(message, slot.offset)[0]
                _put_int(data, slot, rng.choice(_INT_EXTREMES_32 + [old + 1, old - 1, old * 2]))
            else:
                _put_int(data, slot, rng.choice(_INT_EXTREMES_16 if slot.size <= 2 else
                                                _INT_EXTREMES_32 if slot.size == 4 else _INT_EXTREMES_64))
            yield f"reply:{slot.kind}-swap", bytes(data)
        elif kind < 0.6:
            data = bytearray(message)
            data[3] = rng.choice([0, 1, 3, 4, 5, 0xFF])
            yield "reply:mtype", bytes(data)
        elif kind < 0.7:
            new = rng.choice([b"", b"get_table", b"\xff\xfe", b"x" * 5000, b"get_\x00"])
            yield "reply:name", message[:4] + _I32.pack(len(new)) + new + message[8 + n:]
        elif kind < 0.85:
            yield "reply:truncate", message[: rng.randrange(len(message))]
        else:
            op, data = _generic(rng, message)
            yield f"reply:{op}", data


def _outcome(fn, *args):
    from gateway.thrift.errors import ProtocolError

    try:
        return ("ok", fn(*args))
    except ProtocolError as exc:
        return ("refused", exc.reason)
    except Exception as exc:  # noqa: BLE001 - any other exception is a crash to report
        return ("crash", f"{type(exc).__name__}: {exc}")


def _stream(schema, message: bytes, max_bytes: int, chunks: list[int]):
    """``("ended", length, TJSON)`` or ``("not ended",)`` after feeding ``message`` in
    ``chunks`` to a streaming reply translator.

    The C translator emits TJSON before the end and checks the header and the size limit as
    bytes arrive; the Python one looks ahead at lengths and translates once the message is
    complete. So when and why an unfinished or refused message stops differ by design; what
    must agree is whether a translation is delivered, and its bytes.
    """
    from gateway.thrift.errors import ProtocolError
    from gateway.thrift.reply_translator import reply_translator

    translator = reply_translator(schema, max_bytes, 7)
    out, pos, end = [], 0, None
    try:
        for size in chunks:
            end = translator.feed(message[pos: pos + size])
            out.append(translator.take())
            pos += size
            if end is not None or pos >= len(message):
                break
    except ProtocolError:
        return ("not ended",)
    return ("not ended",) if end is None else ("ended", end, b"".join(out))


def differential(schema, calls: Iterable[tuple[str, bytes]], replies: Iterable[tuple[str, bytes]],
                 *, seed: int = 0) -> tuple[int, list[str]]:
    """Run the C and pure-Python translators on the same inputs; ``(inputs, disagreements)``.

    TJSON calls: ``translate.tjson_call_to_binary`` under each implementation, and the C
    fast path alone (its answer, when it gives one, must be Python's). Binary replies:
    ``translate.binary_reply_to_tjson`` under each, and the streaming ``reply_translator``
    fed in random chunks. Same bytes or the same ``ProtocolError`` reason is agreement; any
    other exception is a crash and always reported. Compact calls are run through
    ``compact_message_to_binary``, which must return or raise ``ProtocolError``.
    """
    from gateway.thrift import _speedups, accel
    from gateway.thrift.compact import binary_message_to_compact, compact_message_to_binary
    from gateway.thrift.translate import binary_reply_to_tjson, tjson_call_to_binary

    rng = random.Random(seed)
    problems: list[str] = []
    n = 0
    c_args, _ = accel.compiled(schema)

    def call_result(body):
        header_, message = tjson_call_to_binary(body, schema)
        return header_.name, header_.type, header_.seqid, message

    for label, body in calls:
        n += 1
        if body[:1] == b"\x82":
            got = _outcome(compact_message_to_binary, body)
            if got[0] == "crash":
                problems.append(f"{label} {body[:120]!r}: compact_message_to_binary {got[1]}")
            continue
        if body[:1] != b"[":
            continue
        with accel.using("python"):
            slow = _outcome(call_result, body)
        with accel.using("c"):
            fast = _outcome(call_result, body)
        raw = _outcome(_speedups.tjson_call_to_binary, body, c_args)
        if fast != slow or "crash" in (fast[0], slow[0]):
            problems.append(f"{label} {body[:120]!r}: C {fast!r:.200} / Python {slow!r:.200}")
        elif raw[0] == "crash" or (raw[0] == "ok" and raw[1] is not None and ("ok", raw[1]) != slow):
            problems.append(f"{label} {body[:120]!r}: C fast path {raw!r:.200} / Python {slow!r:.200}")
    for label, message in replies:
        n += 1
        seqid = rng.choice([None, 0, -1, 2**31 - 1])
        with accel.using("python"):
            slow = _outcome(binary_reply_to_tjson, message, schema, seqid)
        with accel.using("c"):
            fast = _outcome(binary_reply_to_tjson, message, schema, seqid)
        if fast != slow or "crash" in (fast[0], slow[0]):
            problems.append(f"{label} {message[:80]!r}: C {fast!r:.200} / Python {slow!r:.200}")
            continue
        max_bytes = rng.choice([max(1, len(message)), max(1, len(message) - 1), 1 << 20])
        chunks = [rng.choice([1, 2, 3, 7, 64, 4096]) for _ in range(len(message) + 1)]
        with accel.using("python"):
            slow = _outcome(_stream, schema, message, max_bytes, chunks)
        with accel.using("c"):
            fast = _outcome(_stream, schema, message, max_bytes, chunks)
        if fast != slow or "crash" in (fast[0], slow[0]):
            problems.append(f"{label} {message[:80]!r} (max {max_bytes}): streaming C {fast!r:.200} / "
                            f"Python {slow!r:.200}")
        got = _outcome(binary_message_to_compact, message, 5)
        if got[0] == "crash" and not got[1].startswith("error:"):  # struct.error: the codec's to map
            problems.append(f"{label} {message[:80]!r}: binary_message_to_compact {got[1]}")
    return n, problems
