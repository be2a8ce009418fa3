"""bench/: ``run.py`` is the command line only (it dispatches to each benchmark's ``main``), and
the benchmarks' modules import each other without a circle (bench/harness.py and
bench/clients.py are what they share)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.support.source import parse as parse_source

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_imports() -> dict[str, set[str]]:
    """Module name → the ``bench`` modules it imports (anywhere in the file)."""
    graph: dict[str, set[str]] = {}
    for path in BENCH.glob("*.py"):
        imported = set()
        for node in ast.walk(parse_source(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bench."):
                imported.add(node.module.removeprefix("bench."))
            elif isinstance(node, ast.Import):
                imported |= {a.name.removeprefix("bench.") for a in node.names if a.name.startswith("bench.")}
        graph[path.stem] = imported
    return graph


def test_bench_modules_import_each_other_without_a_circle():
    graph = bench_imports()
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import circle: {' -> '.join(path + (module,))}"
        if module in done:
            return
        for other in graph.get(module, ()):
            visit(other, path + (module,))
        done.add(module)

    for module in graph:
        visit(module, ())
    assert "run" not in set().union(*graph.values())  # nothing imports the command line
    assert {"harness", "clients"} <= graph["calls"] and "harness" in graph["policy"]


@pytest.mark.parametrize("argv, module, forwarded", [
    ([], "bench.calls", []),
    (["--small", "--rounds", "2"], "bench.calls", ["--small", "--rounds", "2"]),
    (["--policy", "--rounds", "2"], "bench.policy", ["--rounds", "2"]),
    (["--datasource"], "bench.datasource", []),
    (["--tunnel", "--no-spark"], "bench.tunnel", ["--no-spark"]),
    (["--feed", "--markdown", "out.md"], "bench.feed", ["--markdown", "out.md"]),
    (["--memory", "--workers", "2"], "bench.memory", ["--workers", "2"]),
])
def test_run_dispatches_to_the_chosen_benchmark_with_the_rest_of_the_arguments(monkeypatch, argv, module,
                                                                               forwarded):
    run = importlib.import_module("bench.run")
    called = []

    class Benchmark:
        @staticmethod
        def main(args):
            called.append(args)
            return 7

    monkeypatch.setattr(run.importlib, "import_module", lambda name: called.append(name) or Benchmark)
    assert run.main(argv) == 7
    assert called == [module, forwarded]


def test_run_refuses_two_benchmarks_at_once(capsys):
    run = importlib.import_module("bench.run")
    with pytest.raises(SystemExit) as info:
        run.main(["--policy", "--feed"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
