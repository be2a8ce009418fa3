"""DuckDB with the ``iceberg``, ``httpfs`` and ``avro`` extensions from PyPI (the
``duckdb-ext-*`` packages of the ``test`` extra, which lay the extension files out as DuckDB's
extension directory does: ``duckdb_ext/extensions/v<version>/<platform>/``)."""

from __future__ import annotations

import importlib.util

import duckdb

EXTENSIONS = ("httpfs", "avro", "iceberg")


def extension_directory() -> str:
    """The ``extension_directory`` the ``duckdb-ext-*`` packages fill. Raises RuntimeError
    when they are not installed (an install step: ``pip install -e '.[test]'``)."""
    spec = importlib.util.find_spec("duckdb_ext")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the duckdb-ext-iceberg, -httpfs and -avro packages are not installed")
    return f"{list(spec.submodule_search_locations)[0]}/extensions"


def duckdb_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the three extensions loaded from the packages (never
    downloaded) and the server certificate verified (``ca_cert_file`` set by the caller)."""
    con = duckdb.connect(config={"extension_directory": extension_directory(),
                                 "autoinstall_known_extensions": False, "autoload_known_extensions": False})
    for name in EXTENSIONS:
        con.execute(f"LOAD {name}")
    con.execute("SET enable_server_cert_verification = true")
    return con
