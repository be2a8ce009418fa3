"""Python client of the gateway: ``connect(url, auth=…, ca=…)`` returns the typed
``ThriftHiveMetastore`` client (thriftpy2, the bundled IDL) over HTTPS with keep-alive.

>>> from hms_gateway_client import connect, BasicAuth
>>> with connect("https://gw:8443/gateway/default/hms", auth=BasicAuth("alice", pw), ca="ca.pem") as hms:
...     hms.get_all_databases()            # list[str]
...     hms.get_table("sales", "orders")   # Table

:func:`events` follows an ``event-stream`` service (HMS's notification log). Authentication
(:mod:`hms_gateway_client.auth`) is shared with ``hms-gateway-tunnel``. This package is the
client distribution (``clients/python``), which the gateway's image does not carry.
"""

from hms_gateway_client.auth import (
    BasicAuth,
    BearerAuth,
    ClientCertificateAuth,
    KerberosAuth,
    auth_from_options,
    ssl_context,
)
from hms_gateway_client.connection import (
    AccessDenied,
    AuthenticationFailed,
    GatewayClient,
    GatewayError,
    GatewayUnavailable,
    GatewayUnreachable,
    ResyncRequired,
    connect,
    events,
    hive_metastore_idl,
)

__all__ = [
    "AccessDenied",
    "AuthenticationFailed",
    "BasicAuth",
    "BearerAuth",
    "ClientCertificateAuth",
    "GatewayClient",
    "GatewayError",
    "GatewayUnavailable",
    "GatewayUnreachable",
    "KerberosAuth",
    "ResyncRequired",
    "auth_from_options",
    "connect",
    "events",
    "hive_metastore_idl",
    "ssl_context",
]
