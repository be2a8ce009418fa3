"""How each Iceberg engine connects to the demo's catalog with OAuth2 client credentials
(``credential=etl:etl-password``, the topology's ``gateway-token`` provider): the settings the
demo's banner prints and docs/iceberg.md's "Quick start" shows (tests/unit/test_demo_engines.py
keeps them equal; tests/integration/test_iceberg_engines.py runs the PyIceberg and DuckDB ones).

Every engine names warehouse ``demo`` (the service's ``warehouses`` option), so the catalog
answers ``prefix`` ``demo`` from ``/v1/config?warehouse=demo``.
"""

from __future__ import annotations

__all__ = ["USER", "PASSWORD", "WAREHOUSE", "duckdb_sql", "engine_snippets", "pyiceberg_program",
           "spark_properties", "trino_catalog"]

USER, PASSWORD, WAREHOUSE = "etl", "etl-password", "demo"


def pyiceberg_program(uri: str, ca: str) -> str:
    """PyIceberg: a program that lists the demo's namespaces (``# →`` its output)."""
    return f"""\
import os

from pyiceberg.catalog.rest import RestCatalog

for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
    os.environ.pop(name, None)  # requests would prefer them to ssl.cabundle

catalog = RestCatalog("demo", **{{
    "uri": "{uri}",
    "warehouse": "{WAREHOUSE}",
    "credential": "{USER}:{PASSWORD}",  # OAuth2 client credentials: a user of the topology
    "ssl": {{"cabundle": "{ca}"}},
}})
print(catalog.list_tables("lakehouse"))
# → [('lakehouse', 'trips')]
"""


def duckdb_sql(uri: str, ca: str) -> str:
    """DuckDB (1.4, extensions ``iceberg``, ``httpfs``, ``avro``): attach and read the demo table."""
    return f"""\
SET enable_server_cert_verification = true;
SET ca_cert_file = '{ca}';
CREATE SECRET demo_gateway (
    TYPE ICEBERG,
    CLIENT_ID '{USER}',
    CLIENT_SECRET '{PASSWORD}',
    OAUTH2_SERVER_URI '{uri}/v1/oauth/tokens'
);
ATTACH '{WAREHOUSE}' AS demo (TYPE ICEBERG, ENDPOINT '{uri}', SECRET demo_gateway,
                        ACCESS_DELEGATION_MODE 'none');
SELECT city, sum(fare) AS fares FROM demo.lakehouse.trips GROUP BY city ORDER BY city;
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


def engine_snippets(uri: str, ca: str) -> str:
    """The banner's section: each engine's settings for the catalog at ``uri`` trusting ``ca``."""
    keytool = f"keytool -importcert -noprompt -alias hms-gateway -file {ca} -keystore gateway-ca.p12 -storepass changeit"
    return "\n".join([
        "PyIceberg (python):", pyiceberg_program(uri, ca),
        "DuckDB 1.4 (SQL; pip install duckdb duckdb-ext-iceberg duckdb-ext-httpfs duckdb-ext-avro):",
        duckdb_sql(uri, ca),
        f"Spark 3.5 + iceberg-spark-runtime (spark-defaults.conf; trust store: {keytool}):",
        spark_properties(uri, "gateway-ca.p12"),
        "Trino (etc/catalog/demo.properties; the CA in its JVM's trust store):", trino_catalog(uri),
    ])
