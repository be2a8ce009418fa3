"""``hms-gateway-tunnel``, the client distribution's console script: the tunnel
(:mod:`hms_gateway_client.tunnel`, loaded by :func:`tunnel_module`). The server's command line
does not carry it (``hms-gateway tunnel`` only says where it lives).

Exit status: 0 done, 2 a usage error, a refused start or a missing extra (one line on stderr),
130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys
from types import ModuleType

__all__ = ["TUNNEL_EXTRA", "main", "tunnel_module"]

TUNNEL_EXTRA = "pip install 'hms-gateway-client[tunnel]'"
_TUNNEL_NEEDS = ("aiohttp", "uvloop")
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def tunnel_module() -> ModuleType:
    """:mod:`hms_gateway_client.tunnel`. Raises ``ImportError`` naming the extra to install when
    one of its libraries (aiohttp, uvloop: the ``tunnel`` extra) is missing."""
    try:
        from hms_gateway_client import tunnel
    except ModuleNotFoundError as exc:
        if exc.name not in _TUNNEL_NEEDS:
            raise
        raise ImportError(f"the tunnel needs {exc.name}, which is not installed: {TUNNEL_EXTRA}") from None
    return tunnel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hms-gateway-tunnel",
        description="local binary-Thrift listener forwarding to the gateway over HTTPS")
    parser.add_argument("--log-level", type=str.upper, choices=_LOG_LEVELS, default="INFO",
                        help="DEBUG, INFO, WARNING or ERROR (default: INFO)")
    try:
        tunnel = tunnel_module()
    except ImportError as exc:
        print(f"tunnel: {exc}", file=sys.stderr)
        return 2
    tunnel.add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return tunnel.cmd_tunnel(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
