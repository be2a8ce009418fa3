"""The image's HEALTHCHECK: GET /healthz on the management listener the gateway file configures.

Reads ``listeners.management`` (host, port; defaults 0.0.0.0 and 9464, as gateway/config.py)
from ``$HMS_GATEWAY_CONFIG`` or ``/etc/hms-gateway/gateway.yaml``, the file the image's CMD
serves. A wildcard host is probed on loopback. Exit status 0 when /healthz answers 200, else 1
with the reason on stderr (Docker keeps it in ``docker inspect``'s health log).
"""

import os
import sys
import urllib.request

import yaml

CONFIG = os.environ.get("HMS_GATEWAY_CONFIG", "/etc/hms-gateway/gateway.yaml")


def management_url(config_path: str) -> str:
    with open(config_path, encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    listener = (config.get("listeners") or {}).get("management") or {}
    host = str(listener.get("host", "0.0.0.0"))
    port = int(listener.get("port", 9464))
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/healthz"


def main() -> int:
    try:
        url = management_url(CONFIG)
        with urllib.request.urlopen(url, timeout=4) as reply:
            return 0 if reply.status == 200 else 1
    except Exception as exc:  # any failure is "unhealthy", reported on one line
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
