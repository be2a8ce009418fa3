"""Apache Thrift generated Python code for the project's Hive Metastore IDL, and a direct binary client.

The integration tests compare the gateway with this client: Apache Thrift's own code generator
(Debian ``thrift-compiler``, ``thrift --gen py``) and runtime (PyPI ``thrift``: TSocket,
TBufferedTransport or TFramedTransport, TBinaryProtocolAccelerated), nothing of the gateway's.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_IDL = REPO_ROOT / "gateway" / "thrift" / "idl" / "hive_metastore.thrift"
GEN_ROOT = REPO_ROOT / "build" / "gen-py"

__all__ = ["DEFAULT_IDL", "fb303_service", "generated_python", "hive_metastore_client", "hive_metastore_modules"]


def _thrift_compiler() -> str:
    thrift = shutil.which("thrift")
    if thrift is None:
        raise RuntimeError("the Thrift compiler is missing: run scripts/install-system-deps.sh (thrift-compiler)")
    return thrift


def _idl_hash(idl: Path, compiler_version: bytes) -> str:
    # Every .thrift beside the IDL counts (fb303.thrift is included), and so does the compiler.
    h = hashlib.sha256(compiler_version)
    for path in sorted(idl.parent.glob("*.thrift")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def generated_python(idl: Path = DEFAULT_IDL) -> Path:
    """Run ``thrift --gen py -r`` on ``idl`` once and return the directory to put on ``sys.path``.

    The output lives in ``build/gen-py/<sha256 of the IDL files and compiler version>``; it is
    generated into a temporary sibling and renamed into place, so concurrent callers (pytest-xdist
    workers) never see a half-written tree. Raises RuntimeError if the compiler is missing,
    subprocess.CalledProcessError if it rejects the IDL.
    """
    idl = Path(idl).resolve()
    thrift = _thrift_compiler()
    version = subprocess.run([thrift, "--version"], check=True, capture_output=True).stdout
    target = GEN_ROOT / _idl_hash(idl, version)
    if (target / "hive_metastore" / "ThriftHiveMetastore.py").exists():
        return target
    GEN_ROOT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=GEN_ROOT))
    try:
        subprocess.run(
            [thrift, "--gen", "py", "-r", "-I", str(idl.parent), "-out", str(tmp), str(idl)],
            check=True, capture_output=True, text=True,
        )
        try:
            os.rename(tmp, target)
        except OSError:  # another process won the race; its tree is identical
            if not (target / "hive_metastore").is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


#: Top-level packages ``thrift --gen py -r`` writes for the project IDL.
_GENERATED_PACKAGES = ("hive_metastore", "fb303")
_loaded: dict[str, tuple] = {}


def _generated(module: str) -> bool:
    return module.split(".", 1)[0] in _GENERATED_PACKAGES


def hive_metastore_modules(idl: Path = DEFAULT_IDL):
    """Return ``(ThriftHiveMetastore, ttypes)``, the generated service and types modules.

    PyIceberg ships top-level ``hive_metastore`` and ``fb303`` packages of its own (generated
    from another IDL), which the gateway imports through ``pyiceberg.catalog.hive``. The
    project's are imported aside and kept out of ``sys.modules``, so neither side ever gets
    the other's classes, whatever imported first.
    """
    path = str(generated_python(idl))
    if path not in _loaded:
        theirs = {name: sys.modules.pop(name) for name in list(sys.modules) if _generated(name)}
        sys.path.insert(0, path)
        try:
            _loaded[path] = (
                importlib.import_module("hive_metastore.ThriftHiveMetastore"),
                importlib.import_module("hive_metastore.ttypes"),
                importlib.import_module("fb303.FacebookService"),
            )
        finally:
            sys.path.remove(path)
            for name in [name for name in sys.modules if _generated(name)]:
                del sys.modules[name]
            sys.modules.update(theirs)
    service, ttypes, _ = _loaded[path]
    return service, ttypes


def fb303_service(idl: Path = DEFAULT_IDL):
    """The generated ``fb303.FacebookService`` module of the project IDL (imported aside, as
    :func:`hive_metastore_modules` explains)."""
    hive_metastore_modules(idl)
    return _loaded[str(generated_python(idl))][2]


def hive_metastore_client(host: str, port: int, *, framed: bool = False, timeout: float = 60.0):
    """Open a direct strict-binary connection to an HMS and return ``(client, transport)``.

    ``timeout`` is in seconds (socket timeout). The caller closes ``transport``. Raises
    ``thrift.transport.TTransport.TTransportException`` when the HMS cannot be reached.
    """
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    service, _ = hive_metastore_modules()
    sock = TSocket.TSocket(host, port)
    sock.setTimeout(timeout * 1000)  # TSocket takes milliseconds
    transport = TTransport.TFramedTransport(sock) if framed else TTransport.TBufferedTransport(sock)
    protocol = TBinaryProtocol.TBinaryProtocolAccelerated(transport)  # strict read and write
    transport.open()
    return service.Client(protocol), transport
