"""The REST battery's own checks (tests/support/iceberg/hostile.py) are not vacuous: the tree
snapshot sees files created, changed and removed outside the allowed folders, the child sampler
sees a child process, and the verdict flags each kind of bad answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.iceberg.hostile import Answer, Children, Request, Tree, World, hostile_requests, violations


def test_the_tree_sees_changes_outside_the_allowed_folders_only(tmp_path):
    (tmp_path / "own").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "kept.txt").write_text("x")
    (tmp_path / "other" / "gone.txt").write_text("x")
    before = Tree.take(tmp_path)
    (tmp_path / "own" / "new.txt").write_text("fine")
    (tmp_path / "other" / "kept.txt").write_text("changed!")
    (tmp_path / "other" / "gone.txt").unlink()
    (tmp_path / "escape").mkdir()
    changes = before.changes_outside(Tree.take(tmp_path), [tmp_path / "own"])
    assert sorted(changes) == sorted([f"removed: {tmp_path}/other/gone.txt", f"changed: {tmp_path}/other/kept.txt",
                       f"created: {tmp_path}/escape"])


def test_the_sampler_sees_a_child_process():
    children = Children(os.getpid(), interval=0.01).start()
    subprocess.run([sys.executable, "-c", "import time; time.sleep(0.3)"], check=True)
    assert any("time.sleep" in line for line in children.stop())


def _answer(status: int, body: bytes, path: str = "/v1/namespaces", method: str = "POST", elapsed: float = 0.1):
    return Answer(0, Request("x", method, path), status, body, elapsed, "ib-0")


def test_the_verdict_flags_each_kind_of_bad_answer():
    good = json.dumps({"error": {"message": "no", "type": "BadRequestException", "code": 400}}).encode()
    java = json.dumps({"error": {"message": "java.lang.NullPointerException", "type": "X", "code": 400}}).encode()
    assert violations([_answer(400, good), _answer(204, b""), _answer(404, b"", method="HEAD")], max_seconds=5) == []
    bad = [_answer(500, good), _answer(502, b"oops"), _answer(0, b"reset"), _answer(400, b"<html>"),
           _answer(400, java), _answer(400, good, elapsed=6.0),
           _answer(409, json.dumps({"error": {"message": "m", "type": "T", "code": 400}}).encode())]
    assert len(violations(bad, max_seconds=5)) == len(bad)


def test_the_battery_is_seeded_and_covers_every_route():
    world = World("a", ("t",), ("v",), "b", ("u",), "c", "file:///w/a.db", ("file:///w/b.db",))
    first, again = list(hostile_requests(7, 300, world)), list(hostile_requests(7, 300, world))
    assert first == again and first != list(hostile_requests(8, 300, world))
    from gateway.iceberg.routes import ROUTES
    assert {row.operation for row in ROUTES} <= {r.label for r in first}
