"""The demo's Iceberg table, written THROUGH the gateway's ``iceberg-rest`` service as a client
would: PyIceberg's ``RestCatalog`` (auth type basic) creates namespace ``lakehouse`` and table
``lakehouse.trips``, then appends two Arrow batches (two snapshots).

Idempotent: an existing namespace or table is kept, and only the batches the table does not
have yet (counted by its snapshots) are appended, so a second ``make run`` on the same
metastore changes nothing. Runs in a child process (:func:`write_demo_table_in_subprocess`):
``requests`` prefers ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` to the catalog's ``ssl.cabundle``,
and the child is where they can be unset without touching the gateway's own environment.
:func:`read_back_snippet` is what the demo prints and docs/iceberg.md shows (a unit test keeps
them equal; tests/integration/test_doc_snippets.py runs it). Usage::

    HMS_GATEWAY_DEMO_PASSWORD=etl-password python -m demo.iceberg \\
        --uri https://localhost:8443/gateway/default/iceberg --ca certs/ca.crt --user etl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from demo import child_env, module_command

__all__ = ["BATCHES", "NAMESPACE", "TABLE", "read_back_snippet", "rest_catalog_program", "write_demo_table", "write_demo_table_in_subprocess"]

NAMESPACE, TABLE = "lakehouse", "trips"
PASSWORD_ENV = "HMS_GATEWAY_DEMO_PASSWORD"
#: The two appends, in order: (trip_id, city, fare) rows. Fares are exact in binary floating point.
BATCHES = (
    [(1, "Lisbon", 12.5), (2, "Oslo", 30.0), (3, "Lisbon", 7.25)],
    [(4, "Porto", 18.75), (5, "Oslo", 9.5)],
)
_CA_ENV = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def rest_catalog_program(uri: str, ca: str, login: str, vended: bool) -> str:
    """The opening of a PyIceberg program the demo prints: a ``RestCatalog`` on the service at
    ``uri`` trusting the CA file ``ca``, logged in by ``login`` (its settings' lines, each
    ending in a newline), that loads the demo table as ``table``. ``vended``: it asks for vended
    credentials (``X-Iceberg-Access-Delegation``), its only storage setting."""
    delegation = ('    "header.X-Iceberg-Access-Delegation": "vended-credentials",  # S3 access from the gateway\n'
                  if vended else "")
    return f"""\
import os

from pyiceberg.catalog.rest import RestCatalog

for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
    os.environ.pop(name, None)  # requests would prefer them to ssl.cabundle

catalog = RestCatalog("demo", **{{
    "uri": "{uri}",
{login}    "ssl": {{"cabundle": "{ca}"}},
{delegation}}})
table = catalog.load_table("{NAMESPACE}.{TABLE}")
"""


def read_back_snippet(uri: str, ca: str = "certs/ca.crt", *, vended: bool = False) -> str:
    """The PyIceberg program that reads the demo table back through the gateway at ``uri`` (the
    service's URL, ``https://host:port/gateway/{topology}/iceberg``), trusting the CA file ``ca``;
    its ``# →`` lines are what it prints once the demo wrote the table. ``vended``: the table is
    on S3 and the program asks for vended credentials (``X-Iceberg-Access-Delegation``), its
    only storage setting."""
    rows = [row for batch in BATCHES for row in batch]
    basic = '    "auth": {"type": "basic", "basic": {"username": "etl", "password": "etl-password"}},\n'
    return rest_catalog_program(uri, ca, basic, vended) + f"""\
print([snapshot.summary.operation.value for snapshot in table.snapshots()])
# → {['append'] * len(BATCHES)!r}
rows = table.scan().to_arrow().sort_by("trip_id")
print(rows.num_rows, rows.column_names)
# → {len(rows)} ['trip_id', 'city', 'fare']
print(rows.column("city").to_pylist())
# → {[city for _, city, _ in rows]!r}
"""


def write_demo_table(uri: str, ca: Path, user: str, password: str, location: str | None = None) -> dict:
    """Create ``lakehouse.trips`` through the ``iceberg-rest`` service at ``uri`` as ``user``
    (HTTP Basic) and append the batches it lacks; a new namespace is located at ``location``
    (``s3://bucket/lakehouse``; None: HMS's default, below its warehouse). Returns ``{"table", "created", "appended",
    "snapshots", "metadata_location"}``. Raises PyIceberg's exceptions (``ForbiddenError``,
    ``CommitFailedException``, ...) and ``requests``' connection errors."""
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    catalog = RestCatalog("demo", **{"uri": uri, "ssl": {"cabundle": str(ca)},
                                     "auth": {"type": "basic", "basic": {"username": user, "password": password}}})
    properties = {"comment": "the demo's Iceberg tables (demo/iceberg.py)"}
    if location:
        properties["location"] = location
    try:
        catalog.create_namespace(NAMESPACE, properties)
    except NamespaceAlreadyExistsError:
        pass
    identifier, created = f"{NAMESPACE}.{TABLE}", False
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        schema = Schema(NestedField(1, "trip_id", LongType(), required=False),
                        NestedField(2, "city", StringType(), required=False),
                        NestedField(3, "fare", DoubleType(), required=False))
        table, created = catalog.create_table(identifier, schema=schema), True
    arrow = pa.schema([("trip_id", pa.int64()), ("city", pa.string()), ("fare", pa.float64())])
    missing = BATCHES[len(table.snapshots()):]
    for batch in missing:
        table.append(pa.Table.from_pylist([dict(zip(arrow.names, row)) for row in batch], schema=arrow))
    return {"table": identifier, "created": created, "appended": len(missing),
            "snapshots": len(table.snapshots()), "metadata_location": table.metadata_location}


def write_demo_table_in_subprocess(uri: str, ca: Path, user: str, password: str, *, location: str | None = None,
                                   log_path: Path | None = None, timeout: float = 300) -> dict:
    """:func:`write_demo_table` in a child process (same interpreter) without the CA-bundle
    and ``AWS_*`` variables; the password goes by environment, never on the command line. ``timeout`` in
    seconds. Returns its result; raises RuntimeError with the child's error output when it fails."""
    cmd = module_command("demo.iceberg", "--uri", uri, "--ca", str(ca), "--user", user,
                         *(["--location", location] if location else []))
    # No AWS settings either: on S3 the table's files are reached with what the gateway vends only.
    env = child_env({k: v for k, v in os.environ.items() if k not in _CA_ENV and not k.startswith("AWS_")})
    env[PASSWORD_ENV] = password
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"the demo's Iceberg table was not written in {timeout:.0f} s") from exc
    if log_path is not None:
        with open(log_path, "a") as log:
            log.write(proc.stderr)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-20:])
        raise RuntimeError(f"writing the demo's Iceberg table failed (exit code {proc.returncode}):\n{tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.iceberg", description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True, help="the iceberg-rest service's URL")
    parser.add_argument("--ca", required=True, type=Path, help="the CA file that signed the gateway's certificate")
    parser.add_argument("--user", required=True, help=f"HTTP Basic user; the password is read from ${PASSWORD_ENV}")
    parser.add_argument("--location", help="where a new namespace is located (default: HMS's warehouse)")
    args = parser.parse_args(argv)
    password = os.environ.get(PASSWORD_ENV)
    if not password:
        parser.error(f"set {PASSWORD_ENV} to the user's password")
    print(json.dumps(write_demo_table(args.uri, args.ca, args.user, password, args.location)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
