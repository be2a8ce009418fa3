"""Run the real ``hms-gateway tunnel`` as a subprocess in front of a test gateway.

The tunnel listens on a free loopback port it picks itself (``--listen 127.0.0.1:0``) and prints
the Spark setting naming it; :func:`start_tunnel` reads the port from that line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.gateway import stop_process

_SETTING = re.compile(r"spark\.hadoop\.hive\.metastore\.uris=thrift://127\.0\.0\.1:(\d+)")


@dataclass
class RunningTunnel:
    port: int
    process: subprocess.Popen
    lines: list[str] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def output(self) -> str:
        """Everything the tunnel printed or logged so far."""
        return "".join(self.lines)

    def stop(self) -> None:
        stop_process(self.process)


def start_tunnel(gateway_url: str, auth_args: list[str], *, ca: Path | None, env: dict[str, str] | None = None,
                 extra: list[str] | None = None, timeout: float = 60.0) -> RunningTunnel:
    """Start ``hms-gateway tunnel --gateway gateway_url <auth_args>`` and wait for its Spark line.

    ``env`` is added to this process's environment (secrets, ``KRB5CCNAME``). Raises
    RuntimeError with the tunnel's output if it exits or prints nothing in ``timeout`` s.
    """
    cmd = [sys.executable, "-m", "gateway.cli", "tunnel", "--gateway", gateway_url,
           "--listen", "127.0.0.1:0", *auth_args, *(extra or [])]
    if ca is not None:
        cmd += ["--ca", str(ca)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    tunnel = RunningTunnel(0, proc)
    found = threading.Event()

    def pump() -> None:  # keep reading so that the tunnel never blocks on a full pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            tunnel.lines.append(line)
            match = _SETTING.search(line)
            if match and not found.is_set():
                tunnel.port = int(match.group(1))
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not found.wait(0.1):
        if time.monotonic() > deadline:
            break
    if not tunnel.port:
        tunnel.stop()
        raise RuntimeError(f"tunnel did not start: {tunnel.output()}")
    return tunnel
