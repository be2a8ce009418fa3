"""The service schema: the HMS IDL parsed once, reduced to what translation needs.

Translation is driven by the wire type tags; the schema only says, for every
``string`` position (struct field, list/set element, map key/value, nested),
whether the IDL declares it ``binary`` (base64 in TJSON, raw bytes on the
binary wire), and names the methods and their argument/result structs.

The IDL is parsed with ``thriftpy2`` (no home-made IDL parser). Enum-typed
positions are plain ``i32`` here, exactly as on the wire.

Type specs (``TypeSpec``) are one of:

* an ``int`` wire type from :class:`TType` (``BOOL``, ``I8``, ``DOUBLE``,
  ``I16``, ``I32``, ``I64``, ``STRING``), or the marker ``BINARY`` (wire type
  ``STRING``, base64 in TJSON);
* :class:`ListSpec` / :class:`SetSpec` (``elem``), :class:`MapSpec`
  (``key``, ``value``);
* :class:`StructSchema`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar, Union

import thriftpy2
from thriftpy2.thrift import TType as _PyTType

__all__ = [
    "TType",
    "BINARY",
    "ListSpec",
    "SetSpec",
    "MapSpec",
    "FieldSchema",
    "StructSchema",
    "MethodSchema",
    "ServiceSchema",
    "TypeSpec",
    "DEFAULT_IDL",
    "load_schema",
]

DEFAULT_IDL = Path(__file__).parent / "idl" / "hive_metastore.thrift"
DEFAULT_SERVICE = "ThriftHiveMetastore"


class TType:
    """Thrift wire type codes (the same numbers in the binary and JSON protocols)."""

    STOP = 0
    BOOL = 2
    I8 = 3
    DOUBLE = 4
    I16 = 6
    I32 = 8
    I64 = 10
    STRING = 11
    STRUCT = 12
    MAP = 13
    SET = 14
    LIST = 15


# Marker for IDL ``binary``: wire type STRING, base64 in TJSON. Not a wire code.
BINARY = 18


@dataclass(frozen=True, slots=True)
class ListSpec:
    """``list<elem>``."""

    elem: "TypeSpec"
    ttype = TType.LIST


@dataclass(frozen=True, slots=True)
class SetSpec:
    """``set<elem>``."""

    elem: "TypeSpec"
    ttype = TType.SET


@dataclass(frozen=True, slots=True)
class MapSpec:
    """``map<key, value>``."""

    key: "TypeSpec"
    value: "TypeSpec"
    ttype = TType.MAP


@dataclass(frozen=True, slots=True)
class FieldSchema:
    """One struct field: id, name, type spec, and whether the IDL says ``required``."""

    id: int
    name: str
    spec: "TypeSpec"
    required: bool = False


@dataclass(eq=False, slots=True)
class StructSchema:
    """A struct, exception, or method args/result struct.

    ``fields`` maps field id → :class:`FieldSchema`; it is filled after creation so
    that recursive structs can refer to themselves. Compared by identity.
    """

    name: str
    fields: dict[int, FieldSchema] = field(default_factory=dict)
    ttype = TType.STRUCT

    def __repr__(self) -> str:  # avoid recursing through self-referencing structs
        return f"StructSchema({self.name!r}, {len(self.fields)} fields)"


TypeSpec = Union[int, ListSpec, SetSpec, MapSpec, StructSchema]


@dataclass(frozen=True, slots=True)
class MethodSchema:
    """A service method: ``args`` struct and ``result`` struct (field 0 = success,
    1..n = declared exceptions; empty for ``void``). ``oneway`` methods get no reply."""

    name: str
    oneway: bool
    args: StructSchema
    result: StructSchema
    #: thriftpy2's generated args and result classes, for steps that decode a call or a reply.
    args_class: type | None = None
    result_class: type | None = None


@dataclass(frozen=True, slots=True)
class ServiceSchema:
    """All methods of a service, inherited ones (fb303) included, by name."""

    name: str
    methods: dict[str, MethodSchema]
    structs: dict[str, StructSchema]


T = TypeVar("T")


class SchemaKeyed(Generic[T]):
    """What ``build(schema)`` derives from a schema, built once per schema and kept.

    :class:`ServiceSchema` is not hashable (its fields are dicts), so entries are found by the
    schema's ``id``; each entry holds its schema, so the id cannot be reused while it is kept.
    Schemas are few and live as long as the process (``load_schema`` caches them).
    """

    def __init__(self, build: Callable[[ServiceSchema], T]):
        self._build = build
        self._by_id: dict[int, tuple[ServiceSchema, T]] = {}

    def __call__(self, schema: ServiceSchema) -> T:
        entry = self._by_id.get(id(schema))
        if entry is None or entry[0] is not schema:
            entry = self._by_id[id(schema)] = (schema, self._build(schema))  # one dict store: atomic
        return entry[1]


_PRIMITIVES = {
    _PyTType.BOOL: TType.BOOL,
    _PyTType.BYTE: TType.I8,
    _PyTType.DOUBLE: TType.DOUBLE,
    _PyTType.I16: TType.I16,
    _PyTType.I32: TType.I32,
    _PyTType.I64: TType.I64,
    _PyTType.STRING: TType.STRING,
    _PyTType.BINARY: BINARY,
}


class _Builder:
    """Converts thriftpy2 ``thrift_spec`` tuples to type specs, one StructSchema per class."""

    def __init__(self) -> None:
        self.structs: dict[type, StructSchema] = {}

    def struct(self, cls: type, name: str | None = None) -> StructSchema:
        found = self.structs.get(cls)
        if found is not None:
            return found
        schema = StructSchema(name or cls.__name__)
        self.structs[cls] = schema
        for fid, entry in cls.thrift_spec.items():
            # entry: (ttype, name, required) or (ttype, name, type_args, required)
            if len(entry) == 3:
                ttype, fname, required = entry
                args = None
            else:
                ttype, fname, args, required = entry
            schema.fields[fid] = FieldSchema(fid, fname, self.spec(ttype, args), bool(required))
        return schema

    def spec(self, ttype: int, args: object) -> TypeSpec:
        if ttype in _PRIMITIVES:
            return _PRIMITIVES[ttype]  # enums arrive as I32 with the enum class in args
        if ttype == _PyTType.STRUCT:
            return self.struct(args)  # type: ignore[arg-type]
        if ttype in (_PyTType.LIST, _PyTType.SET):
            elem = self.spec(*_split(args))
            return ListSpec(elem) if ttype == _PyTType.LIST else SetSpec(elem)
        if ttype == _PyTType.MAP:
            key_args, value_args = args  # type: ignore[misc]
            return MapSpec(self.spec(*_split(key_args)), self.spec(*_split(value_args)))
        raise ValueError(f"unsupported IDL type code {ttype}")


def _split(args: object) -> tuple[int, object]:
    """thriftpy2 writes a container's element as ``ttype`` or ``(ttype, type_args)``."""
    if isinstance(args, tuple):
        return args[0], args[1]
    return args, None  # type: ignore[return-value]


_cache: dict[tuple[Path, str], ServiceSchema] = {}
_lock = threading.Lock()
_module_counter = 0


def load_schema(idl_path: Path | None = None, service: str = DEFAULT_SERVICE) -> ServiceSchema:
    """Parse ``idl_path`` (default: the bundled Hive 2.3 IDL) and return the service schema.

    Methods of base services (``extends fb303.FacebookService``) are included. The result
    is cached per (path, service), so calling it again is cheap.

    Raises ``FileNotFoundError`` if the IDL is missing, ``thriftpy2.parser.exc.ThriftParserError``
    if it does not parse, ``KeyError`` if it has no service named ``service``.
    """
    global _module_counter
    path = Path(idl_path or DEFAULT_IDL).resolve()
    key = (path, service)
    with _lock:
        if key in _cache:
            return _cache[key]
        if not path.is_file():
            raise FileNotFoundError(path)
        _module_counter += 1
        # A unique module name keeps thriftpy2 from handing back another IDL's module.
        module = thriftpy2.load(str(path), module_name=f"_hms_gateway_idl_{_module_counter}_thrift")
        svc = getattr(module, service, None)
        if svc is None or not hasattr(svc, "thrift_services"):
            raise KeyError(f"no service {service!r} in {path.name}")
        builder = _Builder()
        methods: dict[str, MethodSchema] = {}
        for klass in reversed(svc.__mro__):  # base services first, so overrides win
            for name in getattr(klass, "thrift_services", ()):
                if name not in vars(klass) and not hasattr(klass, f"{name}_args"):
                    continue
                args_cls = getattr(klass, f"{name}_args")
                result_cls = getattr(klass, f"{name}_result")
                methods[name] = MethodSchema(
                    name=name,
                    oneway=bool(getattr(result_cls, "oneway", False)),
                    args=builder.struct(args_cls, f"{name}_args"),
                    result=builder.struct(result_cls, f"{name}_result"),
                    args_class=args_cls,
                    result_class=result_cls,
                )
        structs = {
            s.name: s for cls, s in builder.structs.items() if not s.name.endswith(("_args", "_result"))
        }
        schema = ServiceSchema(name=service, methods=methods, structs=structs)
        _cache[key] = schema
        return schema
