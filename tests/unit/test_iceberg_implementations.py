"""Properties a client may not set (:mod:`gateway.iceberg.implementations`): the rules, and
PyIceberg's installed source read for every import it makes by a property and for every key its
FileIO reads, so that an upgrade adding one the rules do not refuse fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pyiceberg
import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from gateway.iceberg import errors
from gateway.iceberg.hive_tables import ICEBERG_STORAGE_HANDLER, committed_table, new_table
from gateway.iceberg.implementations import configures_storage, names_code, refuse_reserved
from gateway.thrift.schema import load_schema
from gateway.upstream.metastore import idl_module
from tests.support.source import parse as parse_source

#: Keys read from a catalog client's own configuration (``RestCatalog``'s ``auth`` block), which
#: the gateway never builds from what a client sends: not table, view or namespace properties.
CLIENT_CONFIGURATION = {("catalog/rest/__init__.py", "type")}


@pytest.mark.parametrize("key", [
    "py-io-impl", "io-impl", "PY-IO-IMPL", " py-io-impl", "write.py-location-provider.impl",
    "write.location-provider.impl", "s3.retry-strategy-impl", "py-catalog-impl", "catalog-impl", "lock-impl",
    "lock.impl", "metrics-reporter-impl", "encryption.kms-impl", "client.factory", "s3.client-factory",
    "client.credentials-provider", "x.y_impl", "auth.impl", "some.class",
    "storage_handler", "STORAGE_HANDLER",  # an HMS parameter: the class Hive reads the table with
])
def test_keys_naming_code_are_refused(key):
    assert names_code(key)
    with pytest.raises(errors.BadRequest, match="names an implementation"):
        refuse_reserved({"a": "1", key: "subprocess.Popen"}, "table t")


@pytest.mark.parametrize("key", [
    "s3.endpoint", "S3.Proxy-URI", " s3.signer.uri", "s3.access-key-id", "client.region", "gcs.service.host",
    "adls.account-host", "hdfs.host", "hf.endpoint",
])
def test_keys_configuring_a_storage_client_are_refused(key):
    assert configures_storage(key) and not names_code(key)
    with pytest.raises(errors.BadRequest, match="configures a storage client"):
        refuse_reserved({"a": "1", key: "http://127.0.0.1:9"}, "table t")


@pytest.mark.parametrize("key", [
    "write.data.path", "write.format.default", "comment", "owner", "implementation-notes", "simpl",
    "write.object-storage.enabled", "format-version", "classification", "s3", "s3x.endpoint", "clients",
])
def test_other_keys_are_kept(key):
    assert not names_code(key) and not configures_storage(key)
    refuse_reserved({key: "x"}, "table t")


def test_every_key_pyiceberg_configures_its_file_io_by_is_refused():
    """``pyiceberg.io``'s property names: what ``RestCatalog`` would take from a table's
    properties into the FileIO of everyone who loads it."""
    import pyiceberg.io as file_io

    keys = {v for k, v in vars(file_io).items() if k.isupper() and isinstance(v, str) and "." in v
            and not v.startswith("pyiceberg.") and "/" not in v}
    assert {"s3.endpoint", "s3.proxy-uri", "s3.signer.uri", "adls.account-host"} <= keys, keys
    assert [k for k in sorted(keys) if not configures_storage(k) and not names_code(k)] == []


# --- PyIceberg's source -------------------------------------------------------------------------

ROOT = Path(pyiceberg.__file__).parent
_IMPORTERS = {"import_module", "__import__"}


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): parse_source(p.read_text(encoding="utf-8")) for p in ROOT.rglob("*.py")}


def _constants(modules: dict[str, ast.Module]) -> dict[str, object]:
    """Module- and class-level ``NAME = <literal>`` assignments, by name (strings and dicts)."""
    found: dict[str, object] = {}
    for tree in modules.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.isupper():
                        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                            found[target.id] = node.value.value
                        elif isinstance(node.value, ast.Dict):
                            found[target.id] = node.value
    return found


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        return f"{owner}.{func.attr}" if owner and owner[0].isupper() else func.attr
    return None


def _functions(tree: ast.Module):
    """``(qualified name, function node)``: ``Class.method`` for methods."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def _flowing_parameters(function, expr: ast.expr) -> set[int]:
    """Positions of ``function``'s parameters (``self``/``cls`` left out) that ``expr`` is
    computed from, following assignments inside the function."""
    params = [a.arg for a in function.args.args if a.arg not in ("self", "cls")]
    seen: set[str] = set()
    todo = [n.id for n in ast.walk(expr) if isinstance(n, ast.Name)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name or isinstance(t, ast.Tuple)
                    and any(isinstance(e, ast.Name) and e.id == name for e in t.elts) for t in node.targets):
                todo.extend(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name))
    return {params.index(name) for name in seen if name in params}


def _dynamic_importers(modules) -> dict[str, set[int]]:
    """Functions that import a module named by a value (not a literal), with the positions of
    the parameters that name it."""
    out: dict[str, set[int]] = {}
    for tree in modules.values():
        for name, function in _functions(tree):
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and (_called_name(node) or "").rsplit(".", 1)[-1] in _IMPORTERS:
                    if node.args and not isinstance(node.args[0], ast.Constant):
                        out.setdefault(name, set()).update(_flowing_parameters(function, node.args[0]))
    return out


def _key(node: ast.expr, constants) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    value = constants.get(name) if name else None
    return value if isinstance(value, str) else None


def _sources(expr: ast.expr, function, constants) -> set[str] | None:
    """The property keys ``expr`` (an import helper's first argument) is read from in
    ``function``: ``{}`` for the library's own tables (a loop over a constant dict), None when
    it cannot tell."""
    if isinstance(expr, ast.Constant):
        return set()
    if isinstance(expr, ast.BoolOp):
        parts = [_sources(v, function, constants) for v in expr.values]
        return None if any(p is None for p in parts) else set().union(*parts)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "get" and expr.args:
        key = _key(expr.args[0], constants)
        return None if key is None else {key}
    if isinstance(expr, ast.Subscript):
        key = _key(expr.slice, constants)
        return None if key is None else {key}
    if not isinstance(expr, ast.Name):
        return None
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == expr.id for t in targets):
                return _sources(node.value, function, constants)
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id == expr.id:
            # a loop over the library's own table (NAME.get(...), NAME a dict literal) chooses no key
            table = _sources(node.iter, function, constants) if not isinstance(node.iter, ast.Name) else None
            iterable = node.iter
            if isinstance(iterable, ast.Name):
                iterable = next((inner.value for inner in ast.walk(function) if isinstance(inner, ast.NamedExpr)
                                 and inner.target.id == iterable.id), iterable)
            if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) \
                    and isinstance(iterable.func.value, ast.Name) \
                    and isinstance(constants.get(iterable.func.value.id), ast.Dict):
                return set()
            return table
    if any(isinstance(a, ast.arg) and a.arg == expr.id for a in function.args.args):
        return None  # a parameter: followed through the callers by the caller's own call site
    return None


def test_every_property_pyiceberg_imports_code_by_is_refused():
    modules = _modules()
    constants = _constants(modules)
    importers = _dynamic_importers(modules)
    assert {"_import_file_io", "_import_location_provider", "_import_retry_strategy"} <= importers.keys(), importers
    keys: set[str] = set()
    assert all(importers.values()), importers  # each names its module by a parameter
    for path, tree in modules.items():
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(function):
                if not (isinstance(node, ast.Call) and _called_name(node) in importers):
                    continue
                for position in importers[_called_name(node)]:
                    assert position < len(node.args), f"{path}: {ast.unparse(node)}: pass it positionally"
                    found = _sources(node.args[position], function, constants)
                    assert found is not None, (f"{path}: cannot tell which property {ast.unparse(node)} imports "
                                               "code by: read it and extend the refusal rule")
                    for key in found:
                        if (path, key) not in CLIENT_CONFIGURATION:
                            assert names_code(key), f"{path}: {ast.unparse(node)} imports code named by {key!r}"
                            keys.add(key)
    assert {"py-io-impl", "write.py-location-provider.impl", "s3.retry-strategy-impl"} <= keys, keys


@pytest.mark.parametrize("handler, kept", [
    ("org.apache.hive.storage.jdbc.JdbcStorageHandler", False),  # set by a Thrift client
    (ICEBERG_STORAGE_HANDLER, True),  # set by a Java client with engine.hive.enabled
    (None, False),
])
def test_a_table_commit_keeps_no_storage_handler_but_iceberg_s(handler, kept):
    idl = idl_module(load_schema())
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    base = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "file:///w/db.db/t")
    table = new_table(idl, "db", "t", "etl", base, "file:///w/db.db/t/metadata/00000-a.metadata.json", True)
    table.parameters.update({"owner_note": "kept"} if handler is None else {"storage_handler": handler,
                                                                          "owner_note": "kept"})
    new = base.model_copy(update={"properties": {"k": "v"}})
    committed = committed_table(idl, table, base, "file:///w/db.db/t/metadata/00000-a.metadata.json", new,
                                "file:///w/db.db/t/metadata/00001-b.metadata.json", True)
    assert committed.parameters.get("storage_handler") == (handler if kept else None)
    assert committed.parameters["owner_note"] == "kept" and committed.parameters["k"] == "v"
