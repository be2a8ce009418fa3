"""The IDL loaded by thriftpy2 so that list-bucketed (skewed) tables decode.

thriftpy2 cannot hold ``SkewedInfo.skewedColValueLocationMaps`` (``map<list<string>,string>``:
a dict with list keys), so the IDL's own classes fail with ``TypeError: unhashable type`` on a
table that has one. The lenient copy declares that map ``map<string,string>``: on the strict
binary wire thriftpy2 then skips it (the key types differ), and in TJSON its keys stay the JSON
text of the lists. Users: :mod:`gateway.thrift.objects` (which puts skipped maps back
byte for byte in replies it re-encodes) and the Python client :mod:`hms_gateway_client`.
"""

from __future__ import annotations

import thriftpy2
from thriftpy2.thrift import TType

SKEWED, SKEW_MAP = "SkewedInfo", "skewedColValueLocationMaps"


def load_lenient(thrift_file: str, module_name: str):
    """``thriftpy2.load(thrift_file, module_name)`` with ``SkewedInfo``'s location map declared
    ``map<string,string>`` (unchanged when the IDL has no ``SkewedInfo``). ``module_name`` must
    end in ``_thrift`` for its objects to pickle."""
    module = thriftpy2.load(thrift_file, module_name=module_name)
    skewed = getattr(module, SKEWED, None)
    if skewed is not None:
        spec = skewed.thrift_spec
        for fid, entry in spec.items():
            if entry[1] == SKEW_MAP:
                spec[fid] = (TType.MAP, SKEW_MAP, (TType.STRING, TType.STRING), False)
    return module
