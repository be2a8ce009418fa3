"""Calls and replies as thriftpy2 objects, for the steps that must read arguments or write a
reply of their own (catalog policy). Decoding costs tens of microseconds, so only steps that
need it use it; everything else stays on the byte-level translators.

thriftpy2 cannot hold ``SkewedInfo.skewedColValueLocationMaps`` (``map<list<string>,string>``
of list-bucketed tables: a dict with list keys), so the IDL's own classes fail on such a table.
:func:`lenient_class` gives the same class from a copy of the IDL that declares that map
``map<string,string>``, which thriftpy2 skips on the wire (the key types differ). Reading it is
enough for a caller that only looks (argument names, the Glue shapes); a reply that goes back
to the client uses :func:`decode_keeping` and :func:`encode_restoring`, which put every skipped
map back byte for byte.
"""

from __future__ import annotations

import os
import struct
import sys
from functools import cache

from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.thrift import TMessageType, TType
from thriftpy2.transport import TMemoryBuffer

from . import walk
from .binary import read_message_header
from .errors import ProtocolError
from .lenient import SKEW_MAP as _SKEW_MAP, SKEWED as _SKEWED, load_lenient
from .schema import ListSpec, MethodSchema, SetSpec, StructSchema



def decode_struct(message: bytes, cls: type):
    """The struct of a strict-binary message (after its header) as an instance of ``cls``.

    Raises ``ProtocolError`` when the bytes do not decode.
    """
    proto = TBinaryProtocol(TMemoryBuffer(message), strict_read=True)
    try:
        proto.read_message_begin()
        value = cls()
        value.read(proto)
    except Exception as exc:  # thriftpy2 raises its own and struct errors
        raise ProtocolError(f"message does not decode: {type(exc).__name__}") from None
    return value


def decode_args(call: bytes, method: MethodSchema):
    """The arguments of a strict-binary CALL of ``method`` (thriftpy2 ``<method>_args``); a
    skewed table's location map is left out (:func:`lenient_class`). Raises ``ProtocolError``."""
    try:
        return decode_struct(call, method.args_class)  # type: ignore[arg-type]
    except ProtocolError:
        return decode_struct(call, lenient_class(method.args_class))  # type: ignore[arg-type]


def encode_reply(name: str, seqid: int, result) -> bytes:
    """A strict-binary REPLY carrying ``result`` (thriftpy2 ``<method>_result``)."""
    buffer = TMemoryBuffer()
    proto = TBinaryProtocol(buffer, strict_write=True)
    proto.write_message_begin(name, TMessageType.REPLY, seqid)
    result.write(proto)
    proto.write_message_end()
    return buffer.getvalue()


@cache
def _lenient_module(thrift_file: str):
    return load_lenient(thrift_file, f"_hms_gateway_lenient_{abs(hash(thrift_file))}_thrift")


def lenient_class(cls: type) -> type:
    """``cls`` (a struct or ``<method>_args``/``<method>_result`` class of an IDL loaded by
    thriftpy2) from the lenient copy of the same IDL file (see the module docstring)."""
    owner = sys.modules[cls.__module__]
    module = _lenient_module(owner.__thrift_file__)
    if hasattr(module, cls.__name__):
        return getattr(module, cls.__name__)
    for service in vars(module).values():  # <method>_args/_result live on the service class
        if hasattr(service, "thrift_services") and hasattr(service, cls.__name__):
            return getattr(service, cls.__name__)
    raise KeyError(f"{cls.__name__} is not in {owner.__thrift_file__}")


# --- a reply decoded leniently, and its skew maps put back ------------------------------

Path = tuple[int, ...]  # field ids, and list indexes after a list's field id


_REACHES: dict[int, bool] = {}  # id(StructSchema) → whether a SkewedInfo can occur inside


def _spec_reaches(spec) -> bool:
    """Whether a ``SkewedInfo`` can occur in a value of ``spec`` through structs and lists
    (the only ways the HMS IDL nests it)."""
    if isinstance(spec, ListSpec | SetSpec):
        return _spec_reaches(spec.elem)
    if not isinstance(spec, StructSchema):
        return False
    key = id(spec)
    if key not in _REACHES:
        _REACHES[key] = False  # a recursive struct: no SkewedInfo through itself
        _REACHES[key] = spec.name == _SKEWED or any(_spec_reaches(f.spec) for f in spec.fields.values())
    return _REACHES[key]


def _skew_maps(data: bytes, pos: int, schema: StructSchema, path: Path, found: dict[Path, bytes]) -> None:
    """Record the wire bytes (header and entries) of every skew map in the struct at ``pos``."""
    for fid, ftype, start, end in walk.iter_fields(data, pos):
        field = schema.fields.get(fid)
        if field is None:
            continue
        spec = field.spec
        if schema.name == _SKEWED and field.name == _SKEW_MAP:
            found[path + (fid,)] = data[start:end]
        elif not _spec_reaches(spec):
            continue
        elif isinstance(spec, StructSchema) and ftype == TType.STRUCT:
            _skew_maps(data, start, spec, path + (fid,), found)
        elif isinstance(spec, ListSpec | SetSpec) and isinstance(spec.elem, StructSchema) and ftype in (TType.LIST, TType.SET):
            etype, count, at = walk.list_header(data, start)
            for i in range(count if etype == TType.STRUCT else 0):
                _skew_maps(data, at, spec.elem, path + (fid, i), found)
                at = walk.skip_value(data, at, TType.STRUCT)


def _mark(value, path: Path, found: dict[Path, bytes], nonce: str, kept: dict[bytes, bytes]) -> None:
    """Put a marker map where each recorded skew map was, keyed by its path."""
    spec = getattr(type(value), "thrift_spec", None)
    if not spec:
        return
    for fid, entry in spec.items():
        if type(value).__name__ == _SKEWED and entry[1] == _SKEW_MAP:
            original = found.get(path + (fid,))
            if original is not None:
                marker = f"{nonce}{len(kept)}"
                setattr(value, _SKEW_MAP, {marker: ""})
                kept[_marker_bytes(fid, marker)] = struct.pack("!bh", TType.MAP, fid) + original
            continue
        item = getattr(value, entry[1], None)
        if item is None:
            continue
        if isinstance(item, list):
            for i, element in enumerate(item):
                _mark(element, path + (fid, i), found, nonce, kept)
        elif hasattr(type(item), "thrift_spec"):
            _mark(item, path + (fid,), found, nonce, kept)


def _marker_bytes(fid: int, marker: str) -> bytes:
    """A ``map<string,string>`` field ``{marker: ""}`` as the binary protocol writes it."""
    key = marker.encode()
    return (struct.pack("!bhbbi", TType.MAP, fid, TType.STRING, TType.STRING, 1)
            + struct.pack("!i", len(key)) + key + struct.pack("!i", 0))


class Kept(dict):
    """Marker field bytes → the original skew-map field bytes (:func:`decode_keeping`)."""


def decode_keeping(message: bytes, method: MethodSchema):
    """``(result, kept)``: the result struct of a strict-binary REPLY of ``method`` decoded
    with the lenient classes, each skew map replaced by a marker map, and what
    :func:`encode_restoring` needs to put the original maps back. Raises ``ProtocolError``."""
    result = decode_struct(message, lenient_class(method.result_class))  # type: ignore[arg-type]
    _, pos = read_message_header(message)
    found: dict[Path, bytes] = {}
    _skew_maps(message, pos, method.result, (), found)
    kept = Kept()
    if found:
        _mark(result, (), found, f"\x00hms-gateway-skew-{os.urandom(8).hex()}-", kept)
    return result, kept


def encode_restoring(name: str, seqid: int, result, kept: Kept) -> bytes:
    """:func:`encode_reply` of a result from :func:`decode_keeping`, with every skew map its
    objects still hold back as HMS sent it (the maps of objects a filter removed go with them).
    Raises ``ProtocolError`` if a marker cannot be found exactly once."""
    message = encode_reply(name, seqid, result)
    for marker, original in kept.items():
        count = message.count(marker)
        if count > 1:
            raise ProtocolError("skew map marker found more than once")
        if count:
            message = message.replace(marker, original)
    return message
