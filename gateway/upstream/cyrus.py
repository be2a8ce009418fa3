"""A client connection of Cyrus SASL (``libsasl2``, Debian ``libsasl2-2`` with its mechanisms in
``libsasl2-modules``), reached through :mod:`ctypes`: negotiation steps and the security layer
(``sasl_encode``/``sasl_decode``). Every byte of authentication and protection is computed by
Cyrus SASL's own mechanism plug-ins; this module only carries buffers across.

Used for DIGEST-MD5 (:mod:`gateway.upstream.digest`), whose integrity and privacy layers no
maintained Python package implements (``pure-sasl`` has none; the PyPI bindings ``sasl`` and
``sasl3`` no longer build on Python 3.11).

Each connection passes its secrets to the plug-in through per-connection callbacks
(``SASL_CB_AUTHNAME``, ``SASL_CB_PASS``) whose buffers live as long as the connection; no
secret is logged. Cyrus's calls are local computations (no network I/O).

Errors: :class:`CyrusUnavailable` when ``libsasl2`` or its mechanism cannot be loaded;
:class:`CyrusError` (with Cyrus's result code and ``sasl_errdetail`` text) for a failed call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import threading
from typing import Iterable

SASL_OK, SASL_CONTINUE, SASL_BADPARAM = 0, 1, -7
#: A mechanism found no security layer within the connection's ``min_ssf``..``max_ssf``.
SASL_TOOWEAK = -15
_SASL_CB_LIST_END = 0
_SASL_CB_AUTHNAME, _SASL_CB_PASS = 0x4002, 0x4004
_SASL_SSF = 1
_SASL_SEC_PROPS = 101
#: The largest receive buffer DIGEST-MD5 may announce (RFC 2831 ``maxbuf``: 2^24 - 1).
MAX_BUFFER = 0xFFFFFF


class CyrusUnavailable(RuntimeError):
    """``libsasl2`` (Debian ``libsasl2-2``) or one of its mechanisms (``libsasl2-modules``) is
    not installed."""


class CyrusError(Exception):
    """A Cyrus SASL call failed: ``code`` is its result (``SASL_BADMAC`` -9, ``SASL_FAIL`` -1…),
    ``str()`` its ``sasl_errdetail`` text (never a secret)."""

    def __init__(self, code: int, detail: str):
        super().__init__(detail)
        self.code = code


class _Callback(ctypes.Structure):
    _fields_ = [("id", ctypes.c_ulong), ("proc", ctypes.c_void_p), ("context", ctypes.c_void_p)]


class _SecurityProperties(ctypes.Structure):
    _fields_ = [("min_ssf", ctypes.c_uint), ("max_ssf", ctypes.c_uint),
                ("maxbufsize", ctypes.c_uint), ("security_flags", ctypes.c_uint),
                ("property_names", ctypes.c_void_p), ("property_values", ctypes.c_void_p)]


# int (*)(void *context, int id, const char **result, unsigned *len)
_GetSimple = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                              ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_uint))
# int (*)(sasl_conn_t *conn, void *context, int id, sasl_secret_t **psecret)
_GetSecret = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                              ctypes.POINTER(ctypes.c_void_p))

_lock = threading.Lock()
_library: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """``libsasl2``, initialised for clients once per process. Raises :class:`CyrusUnavailable`."""
    global _library
    with _lock:
        if _library is None:
            name = ctypes.util.find_library("sasl2") or "libsasl2.so.2"
            try:
                lib = ctypes.CDLL(name)
            except OSError as exc:
                raise CyrusUnavailable(f"Cyrus SASL ({name}) cannot be loaded: {exc}; install "
                                       "Debian's libsasl2-2 and libsasl2-modules") from None
            _declare(lib)
            code = lib.sasl_client_init(None)
            if code != SASL_OK:
                raise CyrusUnavailable(f"Cyrus SASL's sasl_client_init failed ({code})")
            _library = lib
        return _library


def _declare(lib: ctypes.CDLL) -> None:
    out = ctypes.POINTER(ctypes.c_void_p)
    length = ctypes.POINTER(ctypes.c_uint)
    lib.sasl_client_init.argtypes = [ctypes.c_void_p]
    lib.sasl_client_new.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.c_char_p, ctypes.c_void_p, ctypes.c_uint, out]
    lib.sasl_client_start.argtypes = [ctypes.c_void_p, ctypes.c_char_p, out, out, length, out]
    lib.sasl_client_step.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint, out, out, length]
    lib.sasl_setprop.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.sasl_getprop.argtypes = [ctypes.c_void_p, ctypes.c_int, out]
    lib.sasl_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint, out, length]
    lib.sasl_decode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint, out, length]
    lib.sasl_errdetail.argtypes = [ctypes.c_void_p]
    lib.sasl_errdetail.restype = ctypes.c_char_p
    lib.sasl_errstring.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
    lib.sasl_errstring.restype = ctypes.c_char_p
    lib.sasl_dispose.argtypes = [out]
    lib.sasl_dispose.restype = None
    lib.sasl_global_listmech.argtypes = []
    lib.sasl_global_listmech.restype = ctypes.POINTER(ctypes.c_char_p)


def require(mechanism: str) -> None:
    """Return if Cyrus SASL is installed with ``mechanism``'s client plug-in. Raises
    :class:`CyrusUnavailable` naming the Debian packages to install."""
    names = library().sasl_global_listmech()
    found = set()
    for i in itertools.count():
        if not names or names[i] is None:
            break
        found.add(names[i].decode("ascii", "replace"))
    if mechanism not in found:
        raise CyrusUnavailable(f"Cyrus SASL has no {mechanism} mechanism (it has "
                               f"{', '.join(sorted(found)) or 'none'}): install Debian's libsasl2-modules")


def _simple_callback(value: ctypes.c_char_p, size: int):
    def simple(_context, _id, result, length):
        result[0] = value
        if length:
            length[0] = size
        return SASL_OK
    return simple


def _secret_callback(address: int):
    def secret(_conn, _context, _id, psecret):
        psecret[0] = address
        return SASL_OK
    return secret


class ClientConnection:
    """One Cyrus SASL client connection to ``service``/``host`` (DIGEST-MD5's digest-uri) as
    ``authname`` with ``password`` (bytes, never logged), asking for a security layer of
    strength ``min_ssf``..``max_ssf`` (0: none, 1: integrity, more: a cipher's key bits) and
    announcing a receive buffer of ``max_buffer`` bytes. Not thread-safe: one user at a time.
    Raises :class:`CyrusUnavailable`, :class:`CyrusError`."""

    def __init__(self, service: str, host: str, *, authname: bytes, password: bytes,
                 min_ssf: int, max_ssf: int, max_buffer: int = MAX_BUFFER):
        self._lib = library()
        if b"\0" in authname:
            raise CyrusError(SASL_BADPARAM, "a SASL user name cannot hold a NUL byte")
        self._authname = ctypes.create_string_buffer(authname)  # NUL-terminated: Cyrus reads a C string
        self._authname_pointer = ctypes.cast(self._authname, ctypes.c_char_p)
        # sasl_secret_t: unsigned long len, then the bytes; Cyrus reads it during the exchange.
        self._secret = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_ulong) + len(password) + 1)
        ctypes.c_ulong.from_buffer(self._secret).value = len(password)
        ctypes.memmove(ctypes.addressof(self._secret) + ctypes.sizeof(ctypes.c_ulong), password, len(password))
        # The callbacks hold the buffers, not ``self``: no cycle, so the connection is disposed
        # of as soon as its transport is dropped.
        self._get_simple = _GetSimple(_simple_callback(self._authname_pointer, len(authname)))
        self._get_secret = _GetSecret(_secret_callback(ctypes.addressof(self._secret)))
        self._callbacks = (_Callback * 3)(
            _Callback(_SASL_CB_AUTHNAME, ctypes.cast(self._get_simple, ctypes.c_void_p), None),
            _Callback(_SASL_CB_PASS, ctypes.cast(self._get_secret, ctypes.c_void_p), None),
            _Callback(_SASL_CB_LIST_END, None, None))
        self._conn = ctypes.c_void_p()
        self._check(self._lib.sasl_client_new(service.encode(), host.encode(), None, None,
                                              self._callbacks, 0, ctypes.byref(self._conn)))
        props = _SecurityProperties(min_ssf, max_ssf, max_buffer, 0, None, None)
        self._check(self._lib.sasl_setprop(self._conn, _SASL_SEC_PROPS, ctypes.byref(props)))
        self.complete = False

    def _check(self, code: int) -> int:
        if code not in (SASL_OK, SASL_CONTINUE):
            if self._conn:
                detail = self._lib.sasl_errdetail(self._conn)
            else:
                detail = self._lib.sasl_errstring(code, None, None)
            raise CyrusError(code, (detail or b"").decode("utf-8", "replace"))
        return code

    def start(self, mechanism: str) -> None:
        """Start ``mechanism`` for a server-first exchange, as Thrift's SASL runs DIGEST-MD5:
        no initial response. (Asked for one, Cyrus's DIGEST-MD5 would answer from its
        process-wide cache with a client-first "fast reauthentication" of an earlier session;
        without one, the server's first challenge starts a full authentication.)"""
        chosen = ctypes.c_void_p()
        code = self._check(self._lib.sasl_client_start(self._conn, mechanism.encode(), None, None, None,
                                                       ctypes.byref(chosen)))
        self.complete = code == SASL_OK

    def step(self, challenge: bytes) -> bytes:
        """The response to the server's ``challenge`` (``b""`` when there is none)."""
        out, size = ctypes.c_void_p(), ctypes.c_uint()
        code = self._check(self._lib.sasl_client_step(self._conn, challenge, len(challenge), None,
                                                      ctypes.byref(out), ctypes.byref(size)))
        self.complete = code == SASL_OK
        if self.complete:  # the secret is not needed again: no copy outlives the handshake
            ctypes.memset(self._secret, 0, ctypes.sizeof(self._secret))
        return ctypes.string_at(out, size.value) if out.value else b""

    def _unsigned(self, prop: int) -> int:
        value = ctypes.c_void_p()
        self._check(self._lib.sasl_getprop(self._conn, prop, ctypes.byref(value)))
        return ctypes.cast(value, ctypes.POINTER(ctypes.c_uint))[0]

    @property
    def ssf(self) -> int:
        """The negotiated layer's strength: 0 none, 1 integrity, > 1 privacy (cipher bits)."""
        return self._unsigned(_SASL_SSF)

    def encode(self, data: bytes) -> bytes:
        """``data`` through the security layer: one or more packets, each a 4-byte big-endian
        length and its protected bytes (Cyrus splits at the server's receive buffer)."""
        out, size = ctypes.c_void_p(), ctypes.c_uint()
        self._check(self._lib.sasl_encode(self._conn, data, len(data), ctypes.byref(out), ctypes.byref(size)))
        return ctypes.string_at(out, size.value)

    def decode(self, packets: bytes) -> bytes:
        """The plain bytes of ``packets`` (4-byte length + protected bytes each; a partial
        packet is kept for the next call). Raises :class:`CyrusError` for a packet that fails its
        check (a bad MAC or sequence number) or exceeds the announced receive buffer."""
        out, size = ctypes.c_void_p(), ctypes.c_uint()
        self._check(self._lib.sasl_decode(self._conn, packets, len(packets), ctypes.byref(out), ctypes.byref(size)))
        return ctypes.string_at(out, size.value) if out.value else b""

    def close(self) -> None:
        """Dispose of the connection (its keys and buffers); idempotent."""
        if self._conn:
            self._lib.sasl_dispose(ctypes.byref(self._conn))
            self._conn = ctypes.c_void_p()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


def split_packets(data: bytes) -> Iterable[bytes]:
    """The protected bytes of each packet in :meth:`ClientConnection.encode`'s output."""
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        yield data[pos + 4:pos + 4 + size]
        pos += 4 + size
