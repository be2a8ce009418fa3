"""The test servers' ports (tests/support/ports.py) and the end-of-session check
(tests/support/orphans.py): no race with outgoing connections, no collision between xdist
workers or concurrent runs, and no "bind 0, close, hand out" helper anywhere else."""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import ports
from tests.support.orphans import SESSION_ENV, leftovers, reap
from tests.support.source import parse as parse_source

REPO = Path(__file__).resolve().parents[2]

# A stand-in for an xdist worker: reserve ports one by one and listen on each at once, as a
# fixture starting servers does; print what it got and every bind failure.
_WORKER = """
import json, socket, sys
from tests.support.ports import reserve_port
held, failures = [], []
for _ in range(int(sys.argv[1])):
    port = reserve_port()
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port)); s.listen()
        held.append(s)
    except OSError as exc:
        failures.append([port, str(exc)])
print(json.dumps({"ports": [s.getsockname()[1] for s in held], "failures": failures}))
"""


def _ephemeral() -> range:
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_the_band_lies_outside_the_ephemeral_range_and_the_demo_s_ports():
    ephemeral = _ephemeral()
    assert ports.BAND.stop <= ephemeral.start or ports.BAND.start > ephemeral.stop - 1
    assert not {8443, 9083, 9464} & set(ports.BAND)


def test_workers_get_disjoint_blocks_of_the_band():
    blocks = [ports.worker_block(f"gw{i}", 2) for i in range(2)]
    assert set(blocks[0]).isdisjoint(blocks[1])
    assert all(set(b) <= set(ports.BAND) for b in blocks)
    assert len(blocks[0]) == len(blocks[1]) == len(ports.BAND) // 2
    assert ports.worker_block(None, None) in (ports.BAND, ports.worker_block())


def test_two_workers_and_a_busy_client_loop_never_collide(tmp_path):
    """Two worker processes take 150 ports each and listen on them while this process opens and
    closes outgoing connections as fast as it can (each takes an ephemeral source port): every
    bind succeeds and no port is handed out twice."""
    target = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    connections = 0

    def accept() -> None:
        while not stop.is_set():
            try:
                target.accept()[0].close()
            except OSError:
                return

    def hammer() -> None:
        nonlocal connections
        while not stop.is_set():
            with socket.create_connection(target.getsockname()):
                connections += 1

    threads = [threading.Thread(target=accept, daemon=True), threading.Thread(target=hammer, daemon=True)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while connections < 200 and time.monotonic() < deadline:  # the loop is going before the workers start
        time.sleep(0.05)
    try:
        workers = [subprocess.Popen(
            [sys.executable, "-c", _WORKER, "150"], cwd=REPO, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTEST_XDIST_WORKER": f"gw{i}", "PYTEST_XDIST_WORKER_COUNT": "2"})
            for i in range(2)]
        results = [json.loads(w.communicate(timeout=120)[0]) for w in workers]
    finally:
        stop.set()
        target.close()
    assert connections >= 200  # the loop really ran, and went on beside the workers
    assert [r["failures"] for r in results] == [[], []]
    taken = [set(r["ports"]) for r in results]
    assert len(taken[0]) == len(taken[1]) == 150
    assert taken[0].isdisjoint(taken[1])
    assert not (taken[0] | taken[1]) & set(_ephemeral())


@pytest.fixture
def own_locks(tmp_path, monkeypatch) -> dict[str, str]:
    """Lock files of this test's own (another test run on the machine may run the same test at
    the same time, on the same ports); the environment for a process sharing them."""
    monkeypatch.setattr(ports, "_LOCK_DIR", tmp_path)
    return {**os.environ, "HMS_GATEWAY_TEST_PORT_LOCKS": str(tmp_path)}


def test_a_port_another_process_holds_or_listens_on_is_skipped(own_locks):
    block = range(ports.BAND.stop - 40, ports.BAND.stop)  # away from what the suite uses first
    first = ports.reserve_port(block=block)
    # another test run holds the next port's lock
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tests.support.ports import reserve_port; "
         f"print(reserve_port(block=range({first + 1}, {first + 2})), flush=True); sys.stdin.read()"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=own_locks)
    try:
        assert int(holder.stdout.readline()) == first + 1
        with socket.create_server(("127.0.0.1", first + 2)):  # and something listens on the one after
            assert ports.reserve_port(block=block) == first + 3
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_a_span_is_consecutive_and_never_handed_out_again(own_locks):
    block = range(ports.BAND.stop - 80, ports.BAND.stop - 40)
    base = ports.reserve_port(3, block=block)
    assert ports.reserve_port(block=block) == base + 3


def test_port_holder_names_the_listening_process():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        assert f"pid {os.getpid()} " in ports.port_holder(port)
    assert "nothing listens" in ports.port_holder(port)


def test_start_with_retry_takes_another_port_and_names_the_holder_at_last():
    tried = []

    def busy(port: int):
        tried.append(port)
        raise OSError(98, "Address already in use")

    with pytest.raises(ports.PortInUse, match="in use 3 times"):
        ports.start_with_retry(busy)
    assert len(set(tried)) == 3

    def refuse_twice(port: int) -> int:
        tried.append(port)
        if len(tried) < 5:
            raise RuntimeError("haproxy: cannot bind socket (Address already in use)")
        return port

    assert ports.start_with_retry(refuse_twice) == tried[-1]
    with pytest.raises(ValueError):  # any other failure is not retried
        ports.start_with_retry(lambda port: (_ for _ in ()).throw(ValueError("bad config")))


def _returns_a_closed_port(tree: ast.AST) -> list[int]:
    """Lines of ``with socket...() as s: s.bind((host, 0)) ... return s.getsockname()[1]``:
    a port handed out after its socket is closed."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.With):
            continue
        names = {item.optional_vars.id for item in node.items if isinstance(item.optional_vars, ast.Name)}
        binds_zero = returns_port = False
        for inner in ast.walk(node):
            if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "bind"
                    and isinstance(inner.func.value, ast.Name) and inner.func.value.id in names and inner.args
                    and isinstance(inner.args[0], ast.Tuple) and len(inner.args[0].elts) == 2
                    and isinstance(inner.args[0].elts[1], ast.Constant) and inner.args[0].elts[1].value == 0):
                binds_zero = True
            if isinstance(inner, ast.Return) and inner.value is not None and "getsockname" in ast.unparse(inner.value):
                returns_port = True
        if binds_zero and returns_port:
            found.append(node.lineno)
    return found


def test_no_port_picking_helper_outside_the_ports_module():
    offenders = []
    for path in sorted(REPO.glob("**/*.py")):
        relative = path.relative_to(REPO)
        if relative.parts[0] in {".venv", "var", "build", "node_modules"} or relative == Path("tests/support/ports.py"):
            continue
        text = path.read_text(errors="replace")
        tree = parse_source(text)
        offenders += [f"{relative}:{line}: returns a port whose socket it closed" for line in _returns_a_closed_port(tree)]
        for node in ast.walk(tree):
            name = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None)
            if isinstance(name, str) and "free_port" in name:
                offenders.append(f"{relative}:{node.lineno}: {name}")
    assert not offenders, "use tests/support/ports.py (reserve_port, start_with_retry) instead:\n" + "\n".join(offenders)


def test_the_check_itself_catches_the_pattern():
    bad = ast.parse("import socket\ndef pick():\n    with socket.socket() as s:\n"
                    "        s.bind(('127.0.0.1', 0))\n        return s.getsockname()[1]\n")
    assert _returns_a_closed_port(bad) == [3]


def test_a_server_left_running_is_found_and_killed_even_when_orphaned():
    session = "unit-test-" + os.urandom(4).hex()
    env = {**os.environ, SESSION_ENV: session}
    env.pop("PYTEST_XDIST_WORKER", None)
    # a shell that starts a sleeper in the background and exits: the sleeper is re-parented
    subprocess.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 &"], env=env, check=True)
    deadline = time.monotonic() + 30
    # until the shell's forked child has become the sleeper (before its exec it is "sh -c ...")
    while True:
        found = leftovers(session, None)
        if [f.command for f in found] == ["sleep 300"] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert [f.command for f in found] == ["sleep 300"]
    assert leftovers(session, "gw7") == []  # another worker's processes are not this one's
    assert [f.pid for f in reap(session, None, grace=0.5)] == [found[0].pid]
    deadline = time.monotonic() + 30
    while leftovers(session, None) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers(session, None) == []
