"""``hms-gateway-tunnel``: a local binary-Thrift
listener that forwards each call to the gateway over HTTPS, so that unmodified Hive clients
(Spark's ``HiveClientImpl``, Hive's tools, ``hmsclient``) reach the catalog from outside the
cluster with ``thrift://127.0.0.1:<port>``.

One client connection carries one call at a time, as Apache Thrift's ``TSocket`` clients do.
Each strict-binary message (unframed, its end found by
:class:`hms_gateway_client._thrift.binary.BinaryMessageScanner`, or ``TFramedTransport``'s i32
length plus message with ``framed``) is POSTed unchanged as ``application/x-thrift`` to the gateway URL
with the user's ``Authorization`` (:mod:`hms_gateway_client.auth`), over a small pool of kept-alive
HTTPS connections. The gateway's binary reply is written back; a ``oneway`` call gets none.

At start-up the tunnel asks the gateway once whether it takes its credentials
(:meth:`Tunnel.check_gateway`) and exits with the reason when it does not (or when its
certificate is not trusted: ``--ca``). Later, when the gateway refuses (401, 403), fails (5xx)
or cannot be reached, the client gets a
``TApplicationException`` (Thrift's EXCEPTION message, with the call's name and seqid) whose
message names the status and the gateway's reason, and the tunnel logs a line. A gateway
restart costs nothing but the calls in flight: the next call opens a new connection.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import struct
import sys
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
import aiohttp.abc
import uvloop

from hms_gateway_client.auth import METHODS, Auth, KerberosAuth, auth_from_options, ssl_context
from hms_gateway_client._thrift.binary import ONEWAY, BinaryMessageScanner, read_message_header
from hms_gateway_client._thrift.codec import BINARY
from hms_gateway_client._thrift.errors import ProtocolError
from hms_gateway_client._thrift.translate import INTERNAL_ERROR, UNKNOWN
from hms_gateway_client._thrift.hive_methods import is_read_only

__all__ = ["TunnelSettings", "Tunnel", "TunnelRefused", "check_listen_address", "spark_setting",
           "run_tunnel", "untrusted_certificate", "add_arguments", "cmd_tunnel"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/x-thrift"
READ_CHUNK = 256 * 1024
_FRAME = struct.Struct("!i")


@dataclass(frozen=True)
class TunnelSettings:
    """Where the tunnel listens and what it forwards to.

    ``gateway_url``: the service's full HTTPS URL (``https://host:port/gateway/<topology>/<path>``).
    ``ca``: PEM bundle trusted for the gateway (None: the system store).
    ``max_message_bytes``: a call or reply larger than this ends the client connection (call)
    or becomes a ``TApplicationException`` (reply). ``timeout_seconds``: per forwarded call.
    """

    gateway_url: str
    auth: Auth | None
    ca: str | None = None
    host: str = "127.0.0.1"
    port: int = 9083
    framed: bool = False
    allow_remote: bool = False
    pool_size: int = 4
    max_message_bytes: int = 256 * 1024 * 1024
    timeout_seconds: float = 300.0


def check_listen_address(host: str, allow_remote: bool) -> None:
    """Raise ``ValueError`` when ``host`` is not a loopback address (or ``localhost``) and
    ``allow_remote`` is false: anyone who reaches the port would act as the tunnel's user."""
    if allow_remote or host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"refusing to listen on {host}: not a loopback address, and every client of the tunnel "
            "acts as its user (give --allow-remote to do it anyway)"
        )


def spark_setting(host: str, port: int) -> str:
    """The Spark configuration line that points a session's Hive client at the tunnel."""
    shown = f"[{host}]" if ":" in host else host
    return f"spark.hadoop.hive.metastore.uris=thrift://{shown}:{port}"


class _ClientGone(Exception):
    """The Thrift client closed its connection (between or inside messages)."""


class _StreamCut(Exception):
    """The gateway's reply broke off after part of it had been written to the client."""


class Tunnel:
    """The listener and its HTTPS session. ``await start()``, then ``port`` is the bound port;
    ``await close()`` stops listening and closes the pool. Raises ``ValueError`` from the
    constructor for a refused listen address or unreadable TLS files."""

    def __init__(self, settings: TunnelSettings):
        check_listen_address(settings.host, settings.allow_remote)
        parts = urlsplit(settings.gateway_url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"gateway URL must be https://host[:port]/gateway/<topology>/<path>, got {settings.gateway_url}")
        self.settings = settings
        self.gateway_host = parts.hostname
        self._ssl = ssl_context(settings.ca, settings.auth)
        self._session: aiohttp.ClientSession | None = None
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task] = set()
        self.port = settings.port

    async def start(self) -> None:
        """Bind the listener (``OSError`` if the port is taken) and open the HTTPS session."""
        s = self.settings
        connector = aiohttp.TCPConnector(ssl=self._ssl, limit=s.pool_size, keepalive_timeout=30)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=s.timeout_seconds),
            cookie_jar=self._cookie_jar(s.auth),
            skip_auto_headers=("User-Agent",),
            headers={"User-Agent": "hms-gateway-tunnel"},
        )
        self._server = await asyncio.start_server(self._serve, s.host, s.port)
        self.port = self._server.sockets[0].getsockname()[1]

    @staticmethod
    def _cookie_jar(auth: Auth | None) -> aiohttp.abc.AbstractCookieJar:
        # Kerberos: keep the gateway's signed session cookie (Knox's hadoop.auth), which spares
        # it a SPNEGO acceptance and a replay-cache write per call. The token still goes with
        # every call, so an expired cookie costs nothing. Other methods need no session.
        if isinstance(auth, KerberosAuth):
            return aiohttp.CookieJar(unsafe=True)  # unsafe: a gateway addressed by IP too
        return aiohttp.DummyCookieJar()

    async def close(self) -> None:
        """Stop listening, end open client connections, close the HTTPS pool."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self._session is not None:
            await self._session.close()

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    # -- one client connection ------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        buffered = b""
        try:
            while True:
                if self.settings.framed:
                    message = await self._read_frame(reader)
                else:
                    message, buffered = await self._read_unframed(reader, buffered)
                await self._forward(message, writer)
        except _ClientGone:
            pass
        except _StreamCut as exc:  # the client cannot resynchronise: end its connection
            log.warning("tunnel: closing connection from %s: %s", peer, exc)
        except ProtocolError as exc:
            log.warning("tunnel: closing connection from %s: %s", peer, exc.reason)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def _read_frame(self, reader: asyncio.StreamReader) -> bytes:
        try:
            (size,) = _FRAME.unpack(await reader.readexactly(4))
        except asyncio.IncompleteReadError:
            raise _ClientGone() from None
        if size <= 0 or size > self.settings.max_message_bytes:
            raise ProtocolError(f"bad frame size {size}")
        try:
            return await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise _ClientGone() from None

    async def _read_unframed(self, reader: asyncio.StreamReader, buffered: bytes) -> tuple[bytes, bytes]:
        """One message and the bytes read past its end (the start of the next one)."""
        scanner = BinaryMessageScanner(self.settings.max_message_bytes)
        chunks: list[bytes] = []
        chunk = buffered
        while True:
            if chunk:
                chunks.append(chunk)
                end = scanner.feed(chunk)
                if end is not None:
                    data = b"".join(chunks)
                    return data[:end], data[end:]
            chunk = await reader.read(READ_CHUNK)
            if not chunk:
                raise _ClientGone()

    async def _forward(self, message: bytes, writer: asyncio.StreamWriter) -> None:
        """POST ``message`` and write the gateway's reply to the client as it arrives (nothing
        for a oneway call), or a ``TApplicationException`` saying why there is none. Raises
        :class:`_StreamCut` when the reply breaks off after part of it was written."""
        header, _ = read_message_header(message)
        oneway = header.type == ONEWAY
        attempts = 2 if is_read_only(header.name) else 1  # a write is never sent twice
        failure: tuple[str, int] | None = None
        for _ in range(attempts):
            try:
                failure = await self._post(message, oneway, writer)
                break
            except aiohttp.ClientConnectorCertificateError as exc:
                failure = (untrusted_certificate(exc), UNKNOWN)
                break
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                # A kept-alive connection the gateway closed (a restart) fails on first use.
                failure = (f"gateway unreachable: {type(exc).__name__}: {exc}", INTERNAL_ERROR)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                failure = (f"gateway unreachable: {type(exc).__name__}: {exc}", INTERNAL_ERROR)
                break
            except ValueError as exc:  # no credentials to send (e.g. no Kerberos ticket)
                failure = (f"tunnel has no credentials: {exc}", UNKNOWN)
                break
        if failure is None:
            return
        reason, code = failure
        log.warning("tunnel: %s (seqid %d): %s", header.name[:100], header.seqid, reason)
        if not oneway:
            self._write(writer, BINARY.application_exception(header.name, header.seqid, reason, code))
            await writer.drain()

    async def _post(self, message: bytes, oneway: bool,
                    writer: asyncio.StreamWriter) -> tuple[str, int] | None:
        """One HTTPS round trip; None when the reply was written, else (reason, exception type)."""
        assert self._session is not None
        headers = {"Content-Type": CONTENT_TYPE}
        auth = self.settings.auth
        if auth is not None:
            headers.update(auth.headers(self.gateway_host))
        limit = self.settings.max_message_bytes
        async with self._session.post(self.settings.gateway_url, data=message, headers=headers) as resp:
            if resp.status != 200:
                code = UNKNOWN if resp.status in (401, 403) else INTERNAL_ERROR
                return await _refusal(resp), code
            size = resp.content_length
            if oneway:
                await resp.read()
                return None
            if size is not None and size > limit:
                return f"gateway reply of {size} bytes is over the tunnel's limit of {limit}", INTERNAL_ERROR
            if size is None or self.settings.framed:  # a frame needs its length first
                body = await resp.read()
                if not body or len(body) > limit:
                    return f"gateway sent a reply of {len(body)} bytes", INTERNAL_ERROR
                self._write(writer, body)
                await writer.drain()
                return None
            # Large replies (get_partitions) go to the client while they still arrive.
            sent = 0
            try:
                async for chunk in resp.content.iter_any():
                    writer.write(chunk)
                    sent += len(chunk)
                    await writer.drain()
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                if sent == 0:
                    raise
                raise _StreamCut(f"reply cut after {sent} of {size} bytes: {type(exc).__name__}") from None
            if sent != size:
                raise _StreamCut(f"reply cut after {sent} of {size} bytes")
            return None

    async def check_gateway(self) -> None:
        """Ask the gateway once, before serving, whether it takes the tunnel's credentials: an
        empty POST, which the gateway authenticates and authorizes before it reads the body (a
        400 then means yes; nothing reaches HMS). Raises :class:`TunnelRefused` for 401, 403 or
        404, an untrusted certificate or missing credentials; an unreachable gateway is only
        logged (it may start later)."""
        assert self._session is not None
        headers = {"Content-Type": CONTENT_TYPE}
        try:
            if self.settings.auth is not None:
                headers.update(self.settings.auth.headers(self.gateway_host))
            async with self._session.post(self.settings.gateway_url, data=b"", headers=headers) as resp:
                if resp.status in (401, 403, 404):
                    raise TunnelRefused(await _refusal(resp))
        except aiohttp.ClientConnectorCertificateError as exc:
            raise TunnelRefused(untrusted_certificate(exc)) from None
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            log.warning("tunnel: gateway unreachable at start-up (calls will retry): %s: %s",
                        type(exc).__name__, exc)
        except ValueError as exc:  # no credentials to send (e.g. no Kerberos ticket)
            raise TunnelRefused(f"tunnel has no credentials: {exc}") from None

    def _write(self, writer: asyncio.StreamWriter, reply: bytes) -> None:
        if self.settings.framed:
            writer.write(_FRAME.pack(len(reply)))
        writer.write(reply)


class TunnelRefused(Exception):
    """The gateway will not serve the tunnel (checked at start-up); ``str()`` says why."""


async def _refusal(resp: aiohttp.ClientResponse) -> str:
    """One line for a non-200 answer: the status and the first line of the gateway's reason."""
    text = (await resp.content.read(2048)).decode("utf-8", "replace").strip()
    reason = (text.splitlines() or [resp.reason or ""])[0][:500]
    kind = {401: "refused the credentials", 403: "refused the call",
            404: "has no such service"}.get(resp.status, "failed")
    return f"gateway {kind} (HTTP {resp.status}): {reason}"


def untrusted_certificate(exc: aiohttp.ClientConnectorCertificateError) -> str:
    """The reason given for a gateway certificate the tunnel's CA bundle does not verify."""
    detail = getattr(exc.certificate_error, "verify_message", None) or exc.certificate_error
    return (f"certificate not trusted: pass --ca with the CA bundle that signed the gateway's "
            f"certificate ({detail})")


async def run_tunnel(settings: TunnelSettings, *, announce=print, check: bool = True) -> None:
    """Run a tunnel until cancelled; ``announce`` gets the Spark setting once listening.

    With ``check``, :meth:`Tunnel.check_gateway` runs first: raises :class:`TunnelRefused`
    when the gateway will not serve the tunnel's credentials.
    """
    tunnel = Tunnel(settings)
    await tunnel.start()
    if check:
        try:
            await tunnel.check_gateway()
        except TunnelRefused:
            await tunnel.close()
            raise
    announce(f"tunnel listening on {settings.host}:{tunnel.port} -> {settings.gateway_url}")
    announce(spark_setting(settings.host, tunnel.port))
    try:
        await tunnel.serve_forever()
    finally:
        await tunnel.close()


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``tunnel`` subcommand's options (secrets only by env, netrc or file)."""
    p.add_argument("--gateway", required=True, metavar="URL",
                   help="the service URL, https://host:8443/gateway/<topology>/<path>")
    p.add_argument("--listen", type=_listen, default=("127.0.0.1", 9083), metavar="HOST:PORT",
                   help="local address (default 127.0.0.1:9083; port 0 picks a free one)")
    p.add_argument("--framed", action="store_true", help="TFramedTransport instead of unframed")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --listen (every client acts as the tunnel's user)")
    p.add_argument("--ca", help="PEM bundle to verify the gateway with (default: system store)")
    p.add_argument("--auth", choices=METHODS, required=True,
                   help="how to authenticate to the gateway; each method's options follow")
    p.add_argument("--user", help="basic: user name")
    p.add_argument("--password-env", metavar="VAR", help="basic: environment variable holding the password")
    p.add_argument("--password-file", help="basic: file holding the password")
    p.add_argument("--netrc", nargs="?", const=True, metavar="PATH",
                   help="basic: login and password from a netrc file (default ~/.netrc)")
    p.add_argument("--token-env", metavar="VAR", help="bearer: environment variable holding the token")
    p.add_argument("--token-file", help="bearer: file holding the token")
    p.add_argument("--cert", help="cert: client certificate (PEM)")
    p.add_argument("--key", help="cert: client key (PEM)")
    p.add_argument("--service", default="HTTP", help="kerberos: service of the gateway's principal")
    p.add_argument("--pool-size", type=int, default=4, help="kept-alive HTTPS connections (default 4)")


def cmd_tunnel(args: argparse.Namespace) -> int:
    """Run until interrupted. Exit 2 with a reason for bad options, a refused address, an
    untrusted gateway certificate or credentials the gateway refuses (checked once at start)."""
    host, port = args.listen
    try:
        auth = auth_from_options(
            args.auth, user=args.user, password_env=args.password_env, password_file=args.password_file,
            netrc=args.netrc, token_env=args.token_env, token_file=args.token_file,
            cert=args.cert, key=args.key, service=args.service, host=urlsplit(args.gateway).hostname,
        )
        settings = TunnelSettings(args.gateway, auth, ca=args.ca, host=host, port=port,
                                  framed=args.framed, allow_remote=args.allow_remote,
                                  pool_size=max(1, args.pool_size))
        uvloop.run(run_tunnel(settings, announce=_announce))
    except (ValueError, OSError, TunnelRefused) as exc:
        print(f"tunnel: {exc}", file=sys.stderr)
        return 2
    return 0


def _announce(line: str) -> None:
    print(line, flush=True)
