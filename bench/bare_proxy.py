"""The bare proxy for ``bench/run.py``: the least a Python HTTPS-to-Thrift proxy can do per call.

The floor (``bench/floor.py``) answers without any upstream. This adds only what no proxy can
skip, with the gateway's own parts and none of its features: the same event loop (uvloop),
aiohttp server and TLS context; the TJSON call translated to binary by the gateway's C code;
one persistent TCP connection to HMS (``set_ugi`` sent once, as the gateway's pool and the
direct client do); the reply read with a plain ``StreamReader`` and translated by the gateway's
C ``ReplyTranslator``; a ``web.Response``. No authentication, identity assertion, routing,
audit, metrics, seqid check, timeout, pool or error handling: it serves one benchmark client
and fails on anything unexpected.

``bare proxy − floor − direct`` is what proxying itself costs in Python on this machine;
``gateway − bare proxy`` is what the gateway's features cost (issue 14, docs/performance.md).

    python bench/bare_proxy.py --certificate CERT --private-key KEY --hms-port P --user U

It prints ``listening <port>`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import uvloop
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.config import TLSConfig  # noqa: E402
from gateway.thrift import accel  # noqa: E402
from gateway.thrift.schema import TType, load_schema  # noqa: E402
from gateway.thrift.translate import encode_binary_call  # noqa: E402
from gateway.tls import server_ssl_context  # noqa: E402

_READ = 256 * 1024


async def serve(tls: TLSConfig, hms_port: int, user: str) -> None:
    schema = load_schema()
    if accel.reply_translator(schema, 1, None) is None:
        raise SystemExit("bare_proxy: the gateway's C translator is not built")
    reader, writer = await asyncio.open_connection("127.0.0.1", hms_port, limit=_READ)
    writer.write(encode_binary_call("set_ugi", 1, [(1, TType.STRING, user), (2, TType.LIST, [])]))
    await reader.read(_READ)  # its reply (small: one read)

    async def handler(request: web.BaseRequest) -> web.Response:
        _name, _type, seqid, call = accel.tjson_call_to_binary(await request.read(), schema)
        translator = accel.reply_translator(schema, 1 << 30, seqid)
        writer.write(call)
        while translator.feed(await reader.read(_READ)) is None:
            pass
        return web.Response(body=translator.take(), content_type="application/vnd.apache.thrift.json")

    runner = web.ServerRunner(web.Server(handler, access_log=None))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ssl_context(tls)).start()
    print(f"listening {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--certificate", required=True)
    parser.add_argument("--private-key", required=True)
    parser.add_argument("--hms-port", type=int, required=True)
    parser.add_argument("--user", required=True)
    opts = parser.parse_args()
    tls = TLSConfig(certificate=opts.certificate, private_key=opts.private_key)
    uvloop.run(serve(tls, opts.hms_port, opts.user))


if __name__ == "__main__":
    main()
