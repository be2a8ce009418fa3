"""How each Iceberg engine connects to the demo's catalog with OAuth2 client credentials
(``credential=etl:etl-password``, the topology's ``gateway-token`` provider): the settings the
demo's banner prints and docs/iceberg.md's "Quick start" shows (tests/unit/test_demo_engines.py
keeps them equal; tests/integration/test_iceberg_engines.py runs the PyIceberg and DuckDB ones).

Every engine names warehouse ``demo`` (the service's ``warehouses`` option), so the catalog
answers ``prefix`` ``demo`` from ``/v1/config?warehouse=demo``.
"""

from __future__ import annotations

__all__ = ["USER", "PASSWORD", "WAREHOUSE", "DUCKDB_PACKAGES", "duckdb_program", "engine_snippets",
           "pyiceberg_program", "spark_properties", "trino_catalog"]

from demo.iceberg import BATCHES, rest_catalog_program

USER, PASSWORD, WAREHOUSE = "etl", "etl-password", "demo"


def pyiceberg_program(uri: str, ca: str, vended: bool = False) -> str:
    """PyIceberg: a program that reads the rows of the demo's table (``# →`` its output), logged
    in with OAuth2 client credentials. ``vended``: the table is on S3 (``make run S3=1``) and the
    program asks for credentials the gateway vends."""
    rows = sorted(row for batch in BATCHES for row in batch)
    printed = "".join(f"# → {{'trip_id': {t}, 'city': {c!r}, 'fare': {f!r}}}\n" for t, c, f in rows)
    login = (f'    "warehouse": "{WAREHOUSE}",\n'
             f'    "credential": "{USER}:{PASSWORD}",  # OAuth2 client credentials: a user of the topology\n'
             f'    "oauth2-server-uri": "{uri}/v1/oauth/tokens",  # PyIceberg warns when it is left out\n')
    return rest_catalog_program(uri, ca, login, vended) + f"""\
for row in table.scan().to_arrow().sort_by("trip_id").to_pylist():
    print(row)
{printed}"""


#: The PyPI packages of DuckDB and its extensions the program needs (the test extra pins the same).
DUCKDB_PACKAGES = ("duckdb==1.4.4 duckdb-ext-iceberg==1.4.4.20260205 duckdb-ext-httpfs==1.4.4.20260205 "
                   "duckdb-ext-avro==1.4.4.20260205")


def duckdb_program(uri: str, ca: str, delegation: str = "none") -> str:
    """DuckDB 1.4 (extensions ``iceberg``, ``httpfs``, ``avro`` from :data:`DUCKDB_PACKAGES`): a
    Python program that attaches the catalog and reads the demo table (``# →`` its output).
    ``delegation``: DuckDB's ``ACCESS_DELEGATION_MODE``, ``none`` for the file warehouse (the
    data files are on the local disk), ``vended_credentials`` for ``make run S3=1`` (DuckDB
    reads S3 with the key the gateway vends; with ``none`` it tried AWS's own endpoint)."""
    return f"""\
import importlib.util

import duckdb

# the extensions of the duckdb-ext-* packages (with INSTALL'ed ones: duckdb.connect() and LOAD)
extensions = list(importlib.util.find_spec("duckdb_ext").submodule_search_locations)[0] + "/extensions"
con = duckdb.connect(config={{"extension_directory": extensions}})
for statement in [
    "LOAD httpfs", "LOAD avro", "LOAD iceberg",
    "SET enable_server_cert_verification = true",
    "SET ca_cert_file = '{ca}'",
    \"\"\"CREATE SECRET demo_gateway (TYPE ICEBERG, CLIENT_ID '{USER}', CLIENT_SECRET '{PASSWORD}',
       OAUTH2_SERVER_URI '{uri}/v1/oauth/tokens')\"\"\",
    \"\"\"ATTACH '{WAREHOUSE}' AS demo (TYPE ICEBERG, ENDPOINT '{uri}',
       SECRET demo_gateway, ACCESS_DELEGATION_MODE '{delegation}')\"\"\",
]:
    con.execute(statement)
print(con.execute("SELECT city, sum(fare) FROM demo.lakehouse.trips GROUP BY city ORDER BY city").fetchall())
# → [('Lisbon', 19.75), ('Oslo', 39.5), ('Porto', 18.75)]
"""


def spark_properties(uri: str, trust_store: str) -> str:
    """Spark 3.5 with Iceberg's runtime (``spark-defaults.conf``); Java trusts the gateway
    through ``trust_store`` (a PKCS12 file made from the CA with ``keytool``)."""
    java = f"-Djavax.net.ssl.trustStore={trust_store} -Djavax.net.ssl.trustStorePassword=changeit"
    return f"""\
spark.sql.extensions                   org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions
spark.sql.catalog.demo                 org.apache.iceberg.spark.SparkCatalog
spark.sql.catalog.demo.type            rest
spark.sql.catalog.demo.uri             {uri}
spark.sql.catalog.demo.warehouse       {WAREHOUSE}
spark.sql.catalog.demo.rest.auth.type  oauth2
spark.sql.catalog.demo.credential      {USER}:{PASSWORD}
spark.sql.catalog.demo.oauth2-server-uri {uri}/v1/oauth/tokens
spark.driver.extraJavaOptions          {java}
spark.executor.extraJavaOptions        {java}
"""


def trino_catalog(uri: str) -> str:
    """Trino: ``etc/catalog/demo.properties`` (the CA in the trust store of Trino's JVM)."""
    return f"""\
connector.name=iceberg
iceberg.catalog.type=rest
iceberg.rest-catalog.uri={uri}
iceberg.rest-catalog.warehouse={WAREHOUSE}
iceberg.rest-catalog.security=OAUTH2
iceberg.rest-catalog.oauth2.credential={USER}:{PASSWORD}
iceberg.rest-catalog.oauth2.server-uri={uri}/v1/oauth/tokens
fs.hadoop.enabled=true
"""


def engine_snippets(uri: str, ca: str, s3: bool = False) -> str:
    """The banner's section: each engine's settings for the catalog at ``uri`` trusting ``ca``;
    ``s3``: the demo's table is on S3 (``make run S3=1``)."""
    keytool = f"keytool -importcert -noprompt -alias hms-gateway -file {ca} -keystore gateway-ca.p12 -storepass changeit"
    return "\n".join([
        "PyIceberg (a program: run it from the repository with .venv/bin/python):", pyiceberg_program(uri, ca, s3),
        f"DuckDB 1.4 (a program, as above, after .venv/bin/pip install {DUCKDB_PACKAGES}):",
        duckdb_program(uri, ca, "vended_credentials" if s3 else "none"),
        f"Spark 3.5 + iceberg-spark-runtime 1.10 (spark-defaults.conf; trust store: {keytool}):",
        spark_properties(uri, "gateway-ca.p12"),
        "Trino (etc/catalog/demo.properties; the CA in its JVM's trust store):", trino_catalog(uri),
        "iceberg-js (npm, Node.js 22 or later): a program in docs/iceberg.md, \"Quick start\".", "",
    ])
