"""The floor for ``bench/run.py``: a bare aiohttp HTTPS handler that answers every request with a
fixed body, on the gateway's event loop (uvloop), server setup and TLS context.

Nothing a gateway could do per request costs less than this, so the gateway's time minus the
floor's is what the gateway itself adds (issue 14). Run by the benchmark as a subprocess:

    python bench/floor.py --port P --certificate CERT --private-key KEY --body FILE

It prints ``listening <port>`` once it accepts connections. The body file holds the reply the
gateway gives for the measured call, so both send the same bytes through TLS.
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
from gateway.tls import server_ssl_context  # noqa: E402


async def serve(port: int, tls: TLSConfig, body: bytes) -> None:
    async def handler(request: web.BaseRequest) -> web.Response:
        await request.read()  # the gateway reads the whole Thrift call before dispatching
        return web.Response(body=body, content_type="application/vnd.apache.thrift.json")

    # The same low-level server and options as gateway/server.py's gateway_server().
    runner = web.ServerRunner(web.Server(handler, access_log=None))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=server_ssl_context(tls)).start()
    print(f"listening {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--certificate", required=True)
    parser.add_argument("--private-key", required=True)
    parser.add_argument("--body", type=Path, required=True)
    opts = parser.parse_args()
    tls = TLSConfig(certificate=opts.certificate, private_key=opts.private_key)
    uvloop.run(serve(opts.port, tls, opts.body.read_bytes()))


if __name__ == "__main__":
    main()
