"""Readiness probes of the embedded Hive Metastore: one strict TBinaryProtocol
``get_all_databases`` CALL and a check that HMS answers it (REPLY or EXCEPTION header), plainly
here (:func:`probe_get_all_databases`) or over SASL (demo/hms_kerberos.py)."""

from __future__ import annotations

import socket
import struct

__all__ = ["check_reply_header", "get_all_databases_call", "probe_get_all_databases"]

_VERSION_1 = 0x80010000  # strict binary header: version mask | message type
_CALL, _REPLY, _EXCEPTION = 1, 2, 3


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the metastore")
        buf += chunk
    return buf


def get_all_databases_call() -> bytes:
    """A strict TBinaryProtocol ``get_all_databases`` CALL: message header (``0x80010001``, name,
    seqid 1) and an empty args struct (``T_STOP``)."""
    name = b"get_all_databases"
    return struct.pack("!Ii", _VERSION_1 | _CALL, len(name)) + name + struct.pack("!ib", 1, 0)


def check_reply_header(reply: bytes) -> None:
    """Raise ValueError unless ``reply`` starts with a strict-binary REPLY or EXCEPTION header
    answering ``get_all_databases``."""
    if len(reply) < 8:
        raise ValueError(f"short reply of {len(reply)} bytes")
    header, name_len = struct.unpack("!Ii", reply[:8])
    reply_name = reply[8:8 + name_len] if 0 <= name_len < 256 else b""
    if header & 0xFFFF0000 != _VERSION_1 or header & 0xFF not in (_REPLY, _EXCEPTION) or reply_name != b"get_all_databases":
        raise ValueError(f"unexpected reply header 0x{header:08x} {reply_name!r}")


def probe_get_all_databases(host: str, port: int, *, framed: bool = False, timeout: float = 5.0) -> None:
    """Send one strict-binary ``get_all_databases`` CALL and check that a REPLY header answers.

    Wire format: :func:`get_all_databases_call`, optionally after a 4-byte big-endian frame length
    (TFramedTransport). Raises OSError/ConnectionError on network trouble, ValueError on an
    unexpected reply header.
    """
    message = get_all_databases_call()
    if framed:
        message = struct.pack("!i", len(message)) + message
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(message)
        if framed:
            _recv_exact(sock, 4)
        head = _recv_exact(sock, 8)
        (name_len,) = struct.unpack("!i", head[4:])
        check_reply_header(head + (_recv_exact(sock, name_len) if 0 <= name_len < 256 else b""))
