"""The catalog explorer's browser side: its static assets (shipped in the wheel, never fetched
from a CDN) and the schema descriptor its TJSON codec (``static/tjson.js``) is driven by.

The page calls the topology's own ``hms-thrift`` service in TJSON with the user's credentials,
so it sees exactly what the user may see; :data:`METHODS` are the calls it makes. The service
kind that serves the page is :mod:`gateway.explorer.kind`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from gateway.thrift.schema import BINARY, ListSpec, MapSpec, ServiceSchema, SetSpec, StructSchema, TType

__all__ = ["METHODS", "Asset", "load_assets", "schema_descriptor"]

#: The Thrift methods the explorer calls; the service it calls must expose them (docs/explorer.md).
METHODS = (
    "get_all_databases",
    "get_database",
    "get_all_tables",
    "get_table_objects_by_name",
    "get_table",
    "get_partition_names",
    "get_partitions_by_names",
)

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
}

_TAGS = {
    TType.BOOL: "tf", TType.I8: "i8", TType.I16: "i16", TType.I32: "i32", TType.I64: "i64",
    TType.DOUBLE: "dbl", TType.STRING: "str", BINARY: "bin",
}


@dataclass(frozen=True)
class Asset:
    """One file served by the explorer: its bytes and ``Content-Type``."""

    body: bytes
    content_type: str


def load_assets() -> dict[str, Asset]:
    """Every file of ``gateway/explorer/static`` by its name (flat: no directories).

    Read once when a service is built, so a request is a dictionary lookup of an exact name and
    never touches the filesystem (no path traversal by construction).
    """
    assets = {}
    for entry in resources.files(__package__).joinpath("static").iterdir():
        suffix = entry.name[entry.name.rfind("."):]
        if entry.is_file() and suffix in _CONTENT_TYPES:
            assets[entry.name] = Asset(entry.read_bytes(), _CONTENT_TYPES[suffix])
    return assets


def schema_descriptor(schema: ServiceSchema, methods: tuple[str, ...] | None = None) -> dict:
    """The part of ``schema`` that ``methods`` (default: every method) reach, as JSON for the
    browser codec: ``{"structs": {name: [[id, name, type], ...]}, "methods": {name: {"args",
    "result", "oneway"}}}``. A type is a tag (``tf i8 i16 i32 i64 dbl str bin``) or
    ``["lst", t]``, ``["set", t]``, ``["map", k, v]``, ``["rec", struct name]``.

    Raises ``KeyError`` for a method the IDL does not have.
    """
    structs: dict[str, list] = {}
    names: dict[int, str] = {}  # id(StructSchema) → its descriptor name

    def struct_name(struct: StructSchema) -> str:
        found = names.get(id(struct))
        if found is not None:
            return found
        name = struct.name
        while name in structs:  # two IDL structs with one name (args of overloads): keep both
            name += "_"
        names[id(struct)] = name
        structs[name] = []  # placeholder first: structs may refer to themselves
        structs[name] = [[f.id, f.name, type_of(f.spec)] for f in struct.fields.values()]
        return name

    def type_of(spec) -> str | list:
        if isinstance(spec, int):
            return _TAGS[spec]
        if isinstance(spec, ListSpec):
            return ["lst", type_of(spec.elem)]
        if isinstance(spec, SetSpec):
            return ["set", type_of(spec.elem)]
        if isinstance(spec, MapSpec):
            return ["map", type_of(spec.key), type_of(spec.value)]
        return ["rec", struct_name(spec)]

    described = {}
    for name in methods if methods is not None else tuple(schema.methods):
        m = schema.methods[name]
        described[name] = {"args": struct_name(m.args), "result": struct_name(m.result), "oneway": m.oneway}
    return {"structs": structs, "methods": described}
