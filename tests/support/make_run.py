"""``python -m demo`` run as the Makefile runs it (``make run S3=1``, ``make run KERBEROS=1``),
with the repository's own config/ copied under a temp root (reserved ports instead of 8443, 9464
and 9083: :mod:`tests.support.ports`), its output read line by line until a marker line, and
everything it started stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import reserve_port

__all__ = ["READ_BACK", "Demo", "console_script", "copy_config", "demo_env", "demo_until_iceberg", "start_demo", "stop_demo"]

REPO = Path(__file__).resolve().parents[2]
READ_BACK = "Read it back (from the repository, with .venv/bin/python):"


@dataclass
class Demo:
    root: Path  # the demo's working directory (the repository's place)
    process: subprocess.Popen
    gateway_port: int
    hms_port: int = 0
    lines: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    @property
    def workdir(self) -> Path:
        """``--workdir var/demo`` below the root."""
        return self.root / "var" / "demo"

    def stderr(self) -> str:
        return (self.root / "demo.stderr").read_text(errors="replace")

    def program(self) -> str:
        """The PyIceberg program the demo printed (indented by four spaces after READ_BACK)."""
        start = next(i for i, line in enumerate(self.lines) if line.endswith(READ_BACK)) + 2
        body = []
        for line in self.lines[start:]:
            if line and not line.startswith("    "):
                break
            body.append(line)
        return textwrap.dedent("\n".join(body)).strip("\n") + "\n"

    def banner_program(self, heading: str, next_heading: str) -> str:
        """The program under the banner line starting with ``heading`` (indented by four spaces
        more than it), up to the line starting with ``next_heading``."""
        start = next(i for i, line in enumerate(self.lines) if line.strip().startswith(heading)) + 1
        end = next(i for i, line in enumerate(self.lines) if i > start and line.strip().startswith(next_heading))
        return textwrap.dedent("\n".join(self.lines[start:end])).strip("\n") + "\n"


def copy_config(root: Path, gateway_port: int, management_port: int, hms_port: int) -> Path:
    """config/ under ``root`` as it is in the repository, but for the ports."""
    config = root / "config"
    (config / "topologies").mkdir(parents=True)
    text = (REPO / "config" / "gateway.yaml").read_text()
    text = text.replace("port: 8443", f"port: {gateway_port}").replace("port: 9464", f"port: {management_port}")
    (config / "gateway.yaml").write_text(text.replace("0.0.0.0", "127.0.0.1"))
    (config / "users.htpasswd").write_text((REPO / "config" / "users.htpasswd").read_text())
    for path in (REPO / "config" / "topologies").glob("*.yaml"):
        (config / "topologies" / path.name).write_text(
            path.read_text().replace("thrift://localhost:9083", f"thrift://localhost:{hms_port}"))
    return config / "gateway.yaml"


def start_demo(root: Path, options: Sequence[str], finished: Callable[[str], bool], *,
               program: Sequence[str], env: dict[str, str] | None = None) -> Demo:
    """Start ``program --config ... --workdir var/demo --hms-port ... *options`` in ``root``
    with copied config/; its stdout lines are collected, and ``done`` is set at the first line
    for which ``finished(line)`` is true (or at the end of the output)."""
    gateway_port = reserve_port(3)  # the demo is told its ports: gateway, management, HMS
    management_port, hms_port = gateway_port + 1, gateway_port + 2
    config = copy_config(root, gateway_port, management_port, hms_port)
    process = subprocess.Popen(
        [*program, "--config", str(config), "--workdir", "var/demo", "--hms-port", str(hms_port), *options],
        cwd=root, env=demo_env(env), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=open(root / "demo.stderr", "wb"), text=True, start_new_session=True)
    running = Demo(root, process, gateway_port, hms_port)

    def read() -> None:
        for line in process.stdout:
            running.lines.append(line.rstrip("\n"))
            if finished(line):
                running.done.set()
        running.done.set()

    threading.Thread(target=read, daemon=True).start()
    return running


def stop_demo(demo: Demo, hms_dir: Path) -> None:
    """SIGTERM (the demo stops its gateway, HMS and the servers it started), then whatever is left
    of its process group (the pipeline's Spark child) and the HMS JVM under ``hms_dir``, which
    runs in a group of its own."""
    if demo.process.poll() is None:
        demo.process.send_signal(signal.SIGTERM)
        try:
            demo.process.wait(90)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(demo.process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    demo.process.wait()
    pidfile = hms_dir / "hms.pid"
    if pidfile.exists():  # only when the demo could not stop its HMS itself
        try:
            os.killpg(int(pidfile.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def console_script() -> list[str]:
    """What the Makefile runs: the venv's ``python -m demo`` (run from a root outside the
    repository, the demo's package comes by ``PYTHONPATH``: :func:`demo_env`)."""
    return [str(Path(sys.executable).parent / "python"), "-m", "demo"]


def demo_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the repository first on ``PYTHONPATH``, as
    `make run`'s working directory puts it for ``python -m demo``."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), base.get("PYTHONPATH")]))
    return base


def _iceberg_printed(line: str) -> bool:
    return line.strip().startswith("# → ['Lisbon'") or "demo iceberg failed" in line


@contextlib.contextmanager
def demo_until_iceberg(root: Path, options: Sequence[str], hms_dir: Callable[[Demo], Path], *,
                       program: Sequence[str], env: dict[str, str] | None = None,
                       timeout: float = 240) -> Iterator[Demo]:
    """:func:`start_demo`, waiting up to ``timeout`` s until it printed its PyIceberg program
    (the PySpark pipeline after it is not waited for); stopped on leaving (:func:`stop_demo`,
    the HMS JVM under ``hms_dir(demo)``). AssertionError with the output when it did not print it."""
    running = start_demo(root, options, _iceberg_printed, program=program, env=env)
    try:
        finished = running.done.wait(timeout)
        assert finished and "demo iceberg failed" not in running.output, (
            f"the demo did not print its PyIceberg program:\n{running.output}\n{running.stderr()[-3000:]}")
        yield running
    finally:
        stop_demo(running, hms_dir(running))
