"""A direct strict-binary client of an HMS built with thriftpy2 from ``hms_gateway_client``'s IDL."""

from __future__ import annotations

from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.transport import TBufferedTransportFactory

from hms_gateway_client import hive_metastore_idl

__all__ = ["direct_thriftpy_client"]


def direct_thriftpy_client(hms):
    """thriftpy2 over a plain socket to ``hms`` (a ``RunningHMS``), strict binary, 60 s timeout:
    the same types module as ``hms_gateway_client``'s, so its objects compare with ``==`` to what
    the Python client returns. The caller closes it."""
    return make_client(hive_metastore_idl().ThriftHiveMetastore, hms.host, hms.port,
                       proto_factory=TBinaryProtocolFactory(strict_read=True, strict_write=True),
                       trans_factory=TBufferedTransportFactory(), timeout=60_000)
