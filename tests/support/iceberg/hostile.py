"""A seeded battery of hostile Iceberg REST requests (issue 31), the REST counterpart of the Thrift
battery (:mod:`tests.support.hostile`): the same seed gives the same requests.

:func:`hostile_requests` builds requests over every route of the spec this service has
(:data:`gateway.iceberg.routes.ROUTES`) and every table update action and requirement type
(PyIceberg's ``TableUpdate``/``TableRequirement`` unions), each from a plausible body mutated by a
few random edits (a value replaced by a hostile one, a key dropped or added, a container made a
scalar), plus the crash causes issue 31 lists, once each. Names and locations are drawn from a
:class:`World`: the caller's own namespace, one the caller may not see, a missing one, locations
inside and outside the caller's namespace (all inside the test's canary tree).

:func:`run` sends them over kept-alive connections; :func:`violations` judges the answers: a 5xx,
an error answer outside the spec's error model, HMS's Java text in a message, an answer slower
than the bound. :class:`Tree` snapshots a directory tree to find files created, changed or
removed outside the caller's namespace; :class:`Children` samples the gateway's child processes.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os
import random
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from gateway.iceberg.routes import ROUTES

__all__ = ["Answer", "Children", "Request", "Tree", "World", "hostile_requests", "run", "violations"]

UPDATE_ACTIONS = (
    "assign-uuid", "upgrade-format-version", "add-schema", "set-current-schema", "add-spec", "set-default-spec",
    "add-sort-order", "set-default-sort-order", "add-snapshot", "set-snapshot-ref", "remove-snapshots",
    "remove-snapshot-ref", "set-location", "set-properties", "remove-properties", "set-statistics",
    "remove-statistics", "set-partition-statistics", "remove-partition-statistics", "remove-partition-specs",
    "remove-schemas", "enable-row-lineage",
)
REQUIREMENT_TYPES = (
    "assert-create", "assert-table-uuid", "assert-ref-snapshot-id", "assert-last-assigned-field-id",
    "assert-current-schema-id", "assert-last-assigned-partition-id", "assert-default-spec-id",
    "assert-default-sort-order-id",
)
VIEW_ACTIONS = ("assign-uuid", "upgrade-format-version", "add-schema", "set-location", "set-properties",
                "remove-properties", "add-view-version", "set-current-view-version")
TYPES = ("int", "long", "string", "boolean", "double", "float", "date", "timestamp", "timestamptz", "binary",
         "uuid", "fixed[4]", "fixed[-1]", "fixed[0]", "decimal(9,2)", "decimal(99,99)", "decimal(-1,2)",
         "variant", "unknown", "geometry", "timestamp_ns", "list<int>", "strung", "", "fixed[99999999999]")
TRANSFORMS = ("identity", "bucket[16]", "bucket[-1]", "bucket[0]", "truncate[4]", "truncate[0]", "year", "month",
              "day", "hour", "void", "foo", "bucket[x]", "truncate[99999999999999999999]", "")
#: Properties PyIceberg or Java Iceberg read as settings, with values a client should not get away with.
PROPERTIES = (
    ("format-version", "3"), ("format-version", "99"), ("format-version", "-1"), ("format-version", "x"),
    ("write.object-storage.enabled", "maybe"), ("write.object-storage.partitioned-paths", "2"),
    ("write.parquet.row-group-limit", "lots"), ("commit.retry.num-retries", "-x"),
    ("py-io-impl", "subprocess.Popen"), ("io-impl", "org.apache.iceberg.hadoop.HadoopFileIO"),
    ("write.py-location-provider.impl", "shutil.rmtree"), ("s3.retry-strategy-impl", "os.system"),
    ("write.data.path", "{outside}"), ("write.metadata.path", "{outside}"), ("s3.endpoint", "http://127.0.0.1:9"),
    ("comment", "x" * 5000), ("location", "{outside}"), ("k" * 300, "v"), ("owner", "\u00e9\u00e8"),
)


@dataclass(frozen=True)
class World:
    """What the generated requests name: ``own`` the caller's namespace, its ``tables`` and
    ``views``; ``foreign`` a namespace the caller may not see, its ``foreign_tables``;
    ``missing`` a namespace that does not exist; ``inside`` a location in the caller's namespace
    and ``outside`` locations that are not (all inside the canary tree)."""

    own: str
    tables: tuple[str, ...]
    views: tuple[str, ...]
    foreign: str
    foreign_tables: tuple[str, ...]
    missing: str
    inside: str
    outside: tuple[str, ...]
    metadata_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    label: str
    method: str
    path: str  # below the service: /v1/...
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()


def _hostile_values(world: World) -> list:
    deep: object = 1
    for _ in range(200):
        deep = [deep]
    return [None, True, False, 0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**30, 1.5, "", " ", "x" * 5000,
            "a\u0000b", "\ud800", "\udc00x", "maybe", "..", "../../..", "/", "-1", "null", [], {}, [None],
            {"a": {"b": {}}}, deep, "file:///", "foo://bucket/x", "s3://warehouse/x", "hdfs://nn:8020/x",
            world.inside + "/../..", world.inside + "\u0000", "x" * 600 * 1024, *world.outside, *TYPES[:6],
            *TRANSFORMS[:6]]


class _Builder:
    def __init__(self, rng: random.Random, world: World):
        self.rng, self.world = rng, world

    def pick(self, items):
        return self.rng.choice(list(items))

    def namespace(self) -> str:
        w = self.world
        return self.rng.choices([w.own, w.foreign, w.missing, "a\u001fb", "bad-name", "x" * 200],
                                weights=[12, 3, 2, 1, 1, 1])[0]

    def table(self, ns: str, existing: int = 8) -> str:
        """A table name in ``ns``: one that exists (weight ``existing``: drops and renames
        mostly spare them, so that commits keep finding tables), a scratch name, a bad one."""
        w = self.world
        names = w.tables if ns == w.own else w.foreign_tables if ns == w.foreign else ("t",)
        return self.rng.choices([self.pick(names), f"s{self.rng.randrange(30)}", "missing", "BAD NAME"],
                                weights=[existing, 4, 1, 1])[0]

    def location(self) -> str:
        w = self.world
        return self.rng.choices([f"{w.inside}/l{self.rng.randrange(50)}", self.pick(w.outside), "", "rel/x",
                                 "foo://x/y", w.inside + "/a/../../b"], weights=[6, 4, 1, 1, 1, 1])[0]

    def properties(self, n: int | None = None) -> dict:
        out = {f"p{self.rng.randrange(100)}": str(self.rng.randrange(1000)) for _ in range(self.rng.randrange(3))}
        for _ in range(self.rng.randrange(2) if n is None else n):
            key, value = self.pick(PROPERTIES)
            out[key] = value.replace("{outside}", self.pick(self.world.outside))
        return out

    def type_(self, depth: int = 0):
        r = self.rng.random()
        if depth < 2 and r < 0.1:
            return {"type": "struct", "fields": [self.field(i + 100 * (depth + 1), depth + 1) for i in range(2)]}
        if depth < 2 and r < 0.15:
            return {"type": "list", "element-id": 900 + depth, "element": self.type_(depth + 1),
                    "element-required": False}
        if depth < 2 and r < 0.2:
            return {"type": "map", "key-id": 950 + depth, "key": "string", "value-id": 960 + depth,
                    "value": self.type_(depth + 1), "value-required": False}
        return self.pick(TYPES) if r < 0.35 else self.pick(TYPES[:5])

    def field(self, i: int, depth: int = 0) -> dict:
        name = self.rng.choice(["id", "name", "x", "X", "ts", "v" * self.rng.choice((1, 800))])
        out = {"id": i, "name": name, "type": self.type_(depth), "required": self.rng.random() < 0.2}
        if self.rng.random() < 0.1:
            out["doc"] = self.rng.choice(["d", "d" * 300])
        return out

    def schema(self, schema_id: int = 0) -> dict:
        fields = [self.field(i + 1) for i in range(self.rng.randrange(1, 5))]
        return {"type": "struct", "schema-id": schema_id, "fields": fields}

    def spec(self) -> dict:
        return {"spec-id": 0, "fields": [{"source-id": 1, "field-id": 1000 + i, "name": f"p{i}",
                                          "transform": self.pick(TRANSFORMS)} for i in range(self.rng.randrange(2))]}

    def sort_order(self) -> dict:
        return {"order-id": self.rng.choice([0, 1]), "fields": [
            {"source-id": 1, "transform": self.pick(TRANSFORMS), "direction": self.pick(["asc", "desc", "up"]),
             "null-order": self.pick(["nulls-first", "nulls-last", "x"])} for _ in range(self.rng.randrange(2))]}

    def snapshot(self) -> dict:
        return {"snapshot-id": self.rng.randrange(1, 10**6), "timestamp-ms": 1700000000000,
                "manifest-list": self.pick([f"{self.world.inside}/m.avro", *self.world.outside]),
                "summary": {"operation": self.pick(["append", "overwrite", "delete", "nope"])},
                "schema-id": 0, "sequence-number": self.rng.randrange(3)}

    def update(self, action: str) -> dict:
        rng = self.rng
        body: dict = {"action": action}
        if action == "assign-uuid":
            body["uuid"] = self.pick(["00000000-0000-0000-0000-000000000000", "nope"])
        elif action == "upgrade-format-version":
            body["format-version"] = self.pick([1, 2, 3, 99, -1])
        elif action == "add-schema":
            body["schema"] = self.schema(rng.randrange(3))
            if rng.random() < 0.5:
                body["last-column-id"] = rng.randrange(10)
        elif action in ("set-current-schema", "set-default-spec", "set-default-sort-order"):
            key = {"set-current-schema": "schema-id", "set-default-spec": "spec-id",
                   "set-default-sort-order": "sort-order-id"}[action]
            body[key] = self.pick([-1, 0, 1, 7])
        elif action == "add-spec":
            body["spec"] = self.spec()
        elif action == "add-sort-order":
            body["sort-order"] = self.sort_order()
        elif action == "add-snapshot":
            body["snapshot"] = self.snapshot()
        elif action == "set-snapshot-ref":
            body.update({"ref-name": self.pick(["main", "b", ""]), "type": self.pick(["branch", "tag", "x"]),
                         "snapshot-id": rng.randrange(1, 10**6)})
        elif action == "remove-snapshots":
            body["snapshot-ids"] = [rng.randrange(1, 10**6)]
        elif action == "remove-snapshot-ref":
            body["ref-name"] = self.pick(["main", "b"])
        elif action == "set-location":
            body["location"] = self.location()
        elif action == "set-properties":
            body["updates"] = self.properties(1)
        elif action == "remove-properties":
            body["removals"] = [self.pick(["p1", "owner", "format-version"])]
        elif action in ("set-statistics", "set-partition-statistics"):
            key = "statistics" if action == "set-statistics" else "partition-statistics"
            body[key] = {"snapshot-id": rng.randrange(1, 10**6), "statistics-path": self.location() + "/s.puffin",
                         "file-size-in-bytes": 10, "file-footer-size-in-bytes": 1, "blob-metadata": []}
            if action == "set-partition-statistics":
                body[key] = {"snapshot-id": body[key]["snapshot-id"], "statistics-path": body[key]["statistics-path"],
                             "file-size-in-bytes": 10}
        elif action in ("remove-statistics", "remove-partition-statistics"):
            body["snapshot-id"] = rng.randrange(1, 10**6)
        elif action == "remove-partition-specs":
            body["spec-ids"] = [self.pick([0, 1])]
        elif action == "remove-schemas":
            body["schema-ids"] = [self.pick([0, 1])]
        return body

    def requirement(self, kind: str) -> dict:
        body: dict = {"type": kind}
        key = {"assert-table-uuid": "uuid", "assert-ref-snapshot-id": "snapshot-id",
               "assert-last-assigned-field-id": "last-assigned-field-id",
               "assert-current-schema-id": "current-schema-id",
               "assert-last-assigned-partition-id": "last-assigned-partition-id",
               "assert-default-spec-id": "default-spec-id",
               "assert-default-sort-order-id": "default-sort-order-id"}.get(kind)
        if kind == "assert-ref-snapshot-id":
            body["ref"] = "main"
            body["snapshot-id"] = self.pick([None, 1])
        elif key == "uuid":
            body["uuid"] = "00000000-0000-0000-0000-000000000000"
        elif key:
            body[key] = self.pick([0, 1, 999])
        return body

    def commit(self, with_identifier: tuple[str, str] | None = None) -> dict:
        rng = self.rng
        body = {"requirements": [self.requirement(self.pick(REQUIREMENT_TYPES)) for _ in range(rng.randrange(2))],
                "updates": [self.update(self.pick(UPDATE_ACTIONS)) for _ in range(rng.randrange(1, 4))]}
        if with_identifier:
            body["identifier"] = {"namespace": [with_identifier[0]], "name": with_identifier[1]}
        return body

    def staged_create(self) -> dict:
        return {"requirements": [{"type": "assert-create"}],
                "updates": [{"action": "assign-uuid", "uuid": "11111111-1111-1111-1111-111111111111"},
                            {"action": "upgrade-format-version", "format-version": self.pick([1, 2, 3])},
                            self.update("add-schema"),
                            {"action": "set-current-schema", "schema-id": self.pick([-1, 0, 5])},
                            {"action": "add-spec", "spec": self.spec()},
                            {"action": "set-default-spec", "spec-id": -1},
                            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
                            {"action": "set-default-sort-order", "sort-order-id": -1},
                            {"action": "set-location", "location": self.location()},
                            {"action": "set-properties", "updates": self.properties()}][: self.rng.randrange(3, 11)]}

    def view_version(self) -> dict:
        return {"version-id": self.pick([1, 2, -1]), "timestamp-ms": 1700000000000, "schema-id": self.pick([0, -1, 5]),
                "summary": {"engine-name": "x"}, "default-namespace": [self.world.own],
                "representations": [{"type": self.pick(["sql", "x"]), "sql": "select 1",
                                     "dialect": self.pick(["spark", "trino", ""])}]}

    def view_update(self, action: str) -> dict:
        if action == "add-view-version":
            return {"action": action, "view-version": self.view_version()}
        if action == "set-current-view-version":
            return {"action": action, "view-version-id": self.pick([-1, 1, 9])}
        if action == "upgrade-format-version":
            return {"action": action, "format-version": self.pick([1, 2])}
        return self.update(action)


def _requests(b: _Builder) -> dict[str, callable]:
    """operationId → a function making one plausible (method, path, body or None)."""
    w = b.world

    def ns_path():
        return f"/v1/namespaces/{quote(b.namespace(), safe='')}"

    def table_path(suffix: str = "", kind: str = "tables", existing: int = 8):
        ns = b.namespace()
        name = b.table(ns, existing) if kind == "tables" else b.pick([*w.views, "v_missing"])
        return ns, name, f"/v1/namespaces/{quote(ns, safe='')}/{kind}/{quote(name, safe='')}{suffix}"

    def query():
        return b.pick(["", "?pageSize=2", "?pageToken=", "?pageToken=zzz", "?pageSize=-1", "?pageSize=99999999999",
                       "?snapshots=refs", "?snapshots=x", "?purgeRequested=true", "?purgeRequested=maybe",
                       f"?parent={w.own}", "?parent=%1F", "?warehouse=x"])

    def create_table():
        body = {"name": b.pick(["s" + str(b.rng.randrange(30)), "X", "bad name"]), "schema": b.schema(),
                "partition-spec": b.spec(), "write-order": b.sort_order(), "properties": b.properties(),
                "stage-create": b.rng.random() < 0.3}
        if b.rng.random() < 0.5:
            body["location"] = b.location()
        return "POST", f"{ns_path()}/tables", body

    def update_table():
        ns, name, path = table_path()
        body = b.staged_create() if b.rng.random() < 0.25 else b.commit((ns, name) if b.rng.random() < 0.3 else None)
        return "POST", path, body

    def transaction():
        changes = []
        for _ in range(b.rng.randrange(1, 4)):
            ns = b.namespace()
            changes.append(b.commit((ns, b.table(ns))))
        return "POST", "/v1/transactions/commit", {"table-changes": changes}

    def rename(kind):
        ns1, ns2 = b.namespace(), b.namespace()
        src = b.table(ns1, 1) if kind == "tables" else b.pick(w.views)
        return "POST", f"/v1/{kind}/rename", {"source": {"namespace": [ns1], "name": src},
                                              "destination": {"namespace": [ns2], "name": f"r{b.rng.randrange(20)}"}}

    def register(kind):
        location = b.pick([*w.metadata_files, *w.outside, f"{w.inside}/x.metadata.json"]) if w.metadata_files \
            else b.location()
        return "POST", f"{ns_path()}/{kind}", {"name": f"g{b.rng.randrange(20)}", "metadata-location": location}

    def metrics():
        _, _, path = table_path("/metrics")
        report = {"report-type": b.pick(["scan-report", "commit-report", "x"]), "table-name": "t",
                  "snapshot-id": 1, "metrics": {}, "filter": {"type": "true"}, "schema-id": 0,
                  "projected-field-ids": [1], "projected-field-names": ["id"], "sequence-number": 1,
                  "operation": "append"}
        return "POST", path, report

    def create_view():
        body = {"name": f"v{b.rng.randrange(20)}", "schema": b.schema(), "view-version": b.view_version(),
                "properties": b.properties()}
        if b.rng.random() < 0.5:
            body["location"] = b.location()
        return "POST", f"{ns_path()}/views", body

    def replace_view():
        _, _, path = table_path(kind="views")
        return "POST", path, {"requirements": [{"type": "assert-view-uuid", "uuid": "x"}] if b.rng.random() < 0.2 else [],
                              "updates": [b.view_update(b.pick(VIEW_ACTIONS)) for _ in range(b.rng.randrange(1, 3))]}

    def plan():
        _, _, path = table_path("/plan")
        body = {"filter": b.pick([{"type": "eq", "term": "id", "value": 1}, {"type": "not", "child": True},
                                  {"type": "in", "term": "x", "values": [1]}, True, "id > 1"]),
                "select": b.pick([None, ["id"], ["*"], []]), "case-sensitive": b.pick([True, False]),
                "snapshot-id": b.pick([None, 1, -1]), "stats-fields": b.pick([None, ["id"]])}
        if b.rng.random() < 0.3:
            body.update({"start-snapshot-id": b.pick([1, None]), "end-snapshot-id": 2})
        return "POST", path, {k: v for k, v in body.items() if v is not None}

    def plan_id():
        return quote(b.pick(["pending-x", "eJwDAAAAAAE", "x" * 300, "%2E%2E", "a/b"]), safe="")

    def sign(suffix: str = "/s3-sign"):
        _, _, path = table_path(suffix)
        return "POST", path, {"method": b.pick(["GET", "PUT", "DELETE", "X"]), "region": "us-east-1",
                              "uri": b.pick(["https://s3.amazonaws.com/warehouse/x", "http://169.254.169.254/",
                                             *w.outside]), "headers": {"Host": ["x"]}}

    return {
        "getConfig": lambda: ("GET", "/v1/config" + b.pick(["", "?warehouse=x", "?warehouse="]), None),
        "getToken": lambda: ("POST", "/v1/oauth/tokens",
                             b.pick([b"grant_type=client_credentials&client_id=alice&client_secret=x",
                                     b"grant_type=password", b"\xff\xfe", b"scope=" + b"x" * 5000])),
        "listNamespaces": lambda: ("GET", "/v1/namespaces" + query(), None),
        "createNamespace": lambda: ("POST", "/v1/namespaces",
                                    {"namespace": [b.namespace()], "properties": b.properties()}),
        "loadNamespaceMetadata": lambda: ("GET", ns_path(), None),
        "namespaceExists": lambda: ("HEAD", ns_path(), None),
        "dropNamespace": lambda: ("DELETE", ns_path(), None),
        "updateProperties": lambda: ("POST", f"{ns_path()}/properties",
                                     {"removals": [b.pick(["p1", "location", "comment"])], "updates": b.properties()}),
        "listTables": lambda: ("GET", f"{ns_path()}/tables" + query(), None),
        "createTable": create_table,
        "registerTable": lambda: register("register"),
        "loadTable": lambda: ("GET", table_path()[2] + query(), None),
        "tableExists": lambda: ("HEAD", table_path()[2], None),
        "updateTable": update_table,
        "dropTable": lambda: ("DELETE", table_path(existing=1)[2] + b.pick(["", "?purgeRequested=true"]), None),
        "renameTable": lambda: rename("tables"),
        "reportMetrics": metrics,
        "loadCredentials": lambda: ("GET", table_path("/credentials")[2], None),
        "signS3Request": sign,
        "signRequest": lambda: sign("/sign"),
        "commitTransaction": transaction,
        "listViews": lambda: ("GET", f"{ns_path()}/views" + query(), None),
        "createView": create_view,
        "loadView": lambda: ("GET", table_path(kind="views")[2], None),
        "replaceView": replace_view,
        "dropView": lambda: ("DELETE", table_path(kind="views")[2], None),
        "viewExists": lambda: ("HEAD", table_path(kind="views")[2], None),
        "renameView": lambda: rename("views"),
        "registerView": lambda: register("register-view"),
        "planTableScan": plan,
        "fetchPlanningResult": lambda: ("GET", table_path("/plan/" + plan_id())[2], None),
        "cancelPlanning": lambda: ("DELETE", table_path("/plan/" + plan_id())[2], None),
        "fetchScanTasks": lambda: ("POST", table_path("/tasks")[2], {"plan-task": plan_id()}),
    }


def _paths(value, prefix=()) -> Iterator[tuple]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, prefix + (i,))


def _mutate(rng: random.Random, body, hostile: list):
    """``body`` after one random edit somewhere in it."""
    paths = [p for p in _paths(body) if p]
    if not paths:
        return rng.choice(hostile)
    path = rng.choice(paths)
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    edit = rng.random()
    if edit < 0.6:
        parent[last] = rng.choice(hostile)
    elif edit < 0.75 and isinstance(parent, dict):
        del parent[last]
    elif edit < 0.85 and isinstance(parent, dict):
        parent[rng.choice(["x", "properties", "type", "action", "location", "schema"])] = rng.choice(hostile)
    elif edit < 0.93:
        parent[last] = [parent[last]]
    else:
        parent[last] = json.dumps(parent[last])
    return body


def _encode(rng: random.Random, body) -> tuple[bytes, tuple[tuple[str, str], ...]]:
    """The body's bytes (now and then truncated, gzipped or not JSON) and extra headers."""
    if isinstance(body, bytes):
        return body, (("Content-Type", "application/x-www-form-urlencoded"),)
    data = json.dumps(body, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    r = rng.random()
    if r < 0.02:
        return gzip.compress(data, mtime=0), (("Content-Encoding", "gzip"),)
    if r < 0.03:
        return data, (("Content-Encoding", "gzip"),)
    if r < 0.05:
        return data[: rng.randrange(len(data) + 1)], ()
    if r < 0.06:
        return b"[" * 100000, ()
    return data, ()


def _defects(world: World) -> list[tuple[str, str, str, object]]:
    """The crash and stall causes issue 31 lists, once each: (label, method, path, body)."""
    own, table = world.own, world.tables[0]
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}

    def create(**extra):
        return {"name": "defect", "schema": schema, **extra}

    commit_path = f"/v1/namespaces/{own}/tables/{table}"
    return [
        ("properties not an object", "POST", f"/v1/namespaces/{own}/tables", create(properties=["a"])),
        ("namespace properties not an object", "POST", "/v1/namespaces", {"namespace": [own], "properties": "x"}),
        ("updates not an object", "POST", f"/v1/namespaces/{own}/properties", {"updates": [1]}),
        ("commit updates not a list", "POST", commit_path, {"updates": {"a": 1}}),
        ("format-version 3", "POST", f"/v1/namespaces/{own}/tables", create(properties={"format-version": "3"})),
        ("format-version 99", "POST", f"/v1/namespaces/{own}/tables", create(properties={"format-version": "99"})),
        ("bad transform", "POST", f"/v1/namespaces/{own}/tables",
         create(**{"partition-spec": {"spec-id": 0, "fields": [{"source-id": 1, "field-id": 1000, "name": "p",
                                                                 "transform": "bucket[-1]"}]}})),
        ("fixed[-1]", "POST", f"/v1/namespaces/{own}/tables",
         create(schema={**schema, "fields": [{"id": 1, "name": "f", "type": "fixed[-1]", "required": False}]})),
        ("NUL in a location", "POST", f"/v1/namespaces/{own}/tables", create(location=world.inside + "/a\u0000b")),
        ("unknown scheme", "POST", f"/v1/namespaces/{own}/tables", create(location="foo://bucket/t")),
        ("object storage maybe", "POST", f"/v1/namespaces/{own}/tables",
         create(properties={"write.object-storage.enabled": "maybe"})),
        ("lone surrogate", "POST", "/v1/namespaces", {"namespace": [own], "properties": {"k": "\ud800"}}),
        ("5000-character location", "POST", f"/v1/namespaces/{own}/tables", create(location=world.inside + "/" + "l" * 5000)),
        ("staged create StopIteration", "POST", f"/v1/namespaces/{own}/tables/staged",
         {"requirements": [{"type": "assert-create"}], "updates": [{"action": "set-current-schema", "schema-id": -1}]}),
        ("x and X", "POST", f"/v1/namespaces/{own}/tables",
         create(schema={**schema, "fields": [{"id": 1, "name": "x", "type": "long", "required": False},
                                             {"id": 2, "name": "X", "type": "long", "required": False}]})),
        ("600 KiB property", "POST", f"/v1/namespaces/{own}/tables", create(properties={"big": "x" * 600 * 1024})),
        ("py-io-impl", "POST", f"/v1/namespaces/{own}/tables", create(properties={"py-io-impl": "subprocess.Popen"})),
        ("location provider", "POST", commit_path,
         {"updates": [{"action": "set-properties", "updates": {"write.py-location-provider.impl": "shutil.rmtree"}}]}),
        ("empty location", "POST", f"/v1/namespaces/{own}/tables", create(location="")),
    ] + [(f"location outside {i}", "POST", f"/v1/namespaces/{own}/tables", create(name=f"o{i}", location=place))
         for i, place in enumerate(world.outside)]


def hostile_requests(seed: int, count: int, world: World) -> Iterator[Request]:
    """``count`` requests from ``seed`` (the same ones every time): issue 31's defects first, then
    every operation in turn, each a plausible body with 0 to 3 random edits."""
    rng = random.Random(seed)
    builder = _Builder(rng, world)
    makers = _requests(builder)
    operations = [row.operation for row in ROUTES]
    assert set(operations) == set(makers), set(operations) ^ set(makers)
    hostile = _hostile_values(world)
    produced = 0
    for label, method, path, body in _defects(world):
        if produced == count:
            return
        data = json.dumps(body).encode("utf-8", "surrogatepass")
        yield Request(f"defect: {label}", method, path, data)
        produced += 1
    i = 0
    while produced < count:
        operation = operations[i % len(operations)]
        i += 1
        method, path, body = makers[operation]()
        if body is not None and not isinstance(body, bytes):
            for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
                body = _mutate(rng, body, hostile)
        data, headers = (None, ()) if body is None else _encode(rng, body)
        yield Request(operation, method, path, data, headers)
        produced += 1


@dataclass
class Answer:
    index: int
    request: Request
    status: int
    body: bytes
    elapsed: float
    request_id: str


async def run(url: str, ssl_context, requests: Iterable[Request], *, user: str, password: str,
              concurrency: int = 4, timeout: float = 60.0) -> list[Answer]:
    """Send every request to ``url`` (the service's base URL) over ``concurrency`` kept-alive
    connections as ``user`` (Basic); the answers in request order, with wall times (seconds).
    Request ids are ``ib-<index>``, to find a request's log lines."""
    import aiohttp

    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    queue: asyncio.Queue = asyncio.Queue()
    for i, request in enumerate(requests):
        queue.put_nowait((i, request))
    answers: list[Answer] = []
    connector = aiohttp.TCPConnector(limit=concurrency, ssl=ssl_context)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout),
                                     auto_decompress=False) as session:
        async def worker() -> None:
            while not queue.empty():
                i, request = queue.get_nowait()
                rid = f"ib-{i}"
                headers = {"Authorization": f"Basic {token}", "Content-Type": "application/json",
                           "X-Request-Id": rid, **dict(request.headers)}
                started = time.monotonic()
                try:
                    async with session.request(request.method, url + request.path, data=request.body,
                                               headers=headers, skip_auto_headers=("Accept-Encoding",)) as response:
                        body = await response.read()
                        status = response.status
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    status, body = 0, repr(exc).encode()
                answers.append(Answer(i, request, status, body, time.monotonic() - started, rid))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    answers.sort(key=lambda a: a.index)
    return answers


_JAVA = re.compile(r"java\.|javax\.|org\.apache\.|\bat [a-z]+\.[a-z]+\.|NullPointerException|MetaException")


def violations(answers: Iterable[Answer], *, max_seconds: float) -> list[str]:
    """What breaks the rules in the answers: no answer (connection closed), a 5xx (every request
    is the client's doing and the HMS is healthy), an error answer that is not the spec's error
    model (the token endpoint's: OAuth2's), HMS's Java text in a message, an answer slower than
    ``max_seconds``."""
    found = []
    for a in answers:
        where = f"{a.request_id} {a.request.label} {a.request.method} {a.request.path[:120]}"
        if a.elapsed > max_seconds:
            found.append(f"{where}: answered after {a.elapsed:.1f} s")
        if a.status == 0 or a.status >= 500:
            found.append(f"{where}: {a.status} {a.body[:300]!r} (request body {len(a.request.body or b'')} bytes)")
            continue
        if a.status < 400 or a.request.method == "HEAD":
            continue
        try:
            error = json.loads(a.body)["error"]
        except (ValueError, KeyError, TypeError):
            found.append(f"{where}: {a.status} outside the error model: {a.body[:200]!r}")
            continue
        if a.request.path.startswith("/v1/oauth/"):
            ok = isinstance(error, str)
            message = json.dumps(json.loads(a.body))
        else:
            ok = isinstance(error, dict) and set(error) == {"message", "type", "code"} and error["code"] == a.status \
                and isinstance(error["message"], str) and isinstance(error["type"], str)
            message = error.get("message", "") if isinstance(error, dict) else ""
        if not ok:
            found.append(f"{where}: {a.status} outside the error model: {a.body[:200]!r}")
        elif _JAVA.search(message):
            found.append(f"{where}: {a.status} quotes Java: {message[:200]!r}")
    return found


@dataclass
class Tree:
    """A snapshot of the files and directories below ``roots``: path → (kind, size, mtime)."""

    roots: tuple[Path, ...]
    entries: dict[str, tuple] = field(default_factory=dict)

    @classmethod
    def take(cls, *roots: Path) -> "Tree":
        entries = {}
        for root in roots:
            for dirpath, dirnames, filenames in os.walk(root):
                for name in dirnames + filenames:
                    path = os.path.join(dirpath, name)
                    try:
                        st = os.lstat(path)
                    except FileNotFoundError:
                        continue
                    kind = "d" if name in dirnames else "f"
                    entries[path] = (kind, 0 if kind == "d" else st.st_size, 0 if kind == "d" else st.st_mtime_ns)
        return cls(tuple(roots), entries)

    def changes_outside(self, after: "Tree", allowed: Iterable[Path]) -> list[str]:
        """Paths created, removed or changed between this snapshot and ``after`` that are not
        below one of ``allowed``."""
        inside = tuple(str(p).rstrip("/") + "/" for p in allowed)
        changed = []
        for path in sorted(self.entries.keys() | after.entries.keys()):
            before, now = self.entries.get(path), after.entries.get(path)
            if before == now or path.startswith(inside):
                continue
            what = "created" if before is None else "removed" if now is None else "changed"
            changed.append(f"{what}: {path}")
        return changed


class Children:
    """Samples the child processes of ``pid`` (``/proc/<pid>/task/*/children``) every
    ``interval`` seconds in a thread, from :meth:`start` to :meth:`stop`; ``seen`` their
    command lines."""

    def __init__(self, pid: int, interval: float = 0.05):
        self.pid, self.interval = pid, interval
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        for task in Path(f"/proc/{self.pid}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in children:
                try:
                    line = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    line = "?"
                self.seen.add(f"{child}: {line[:200]}")

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def start(self) -> "Children":
        self._thread.start()
        return self

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join()
        self._sample()
        return self.seen
