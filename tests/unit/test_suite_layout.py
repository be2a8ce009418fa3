"""The suite's own layout: pytest imports test modules by basename (no ``__init__.py`` in the
test folders, rootdir-relative "prepend" import mode), so two test files with the same name in
different folders break collection of the whole suite."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_module_basenames_are_unique():
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if "node_modules" not in p.parts)
    assert [n for n, count in names.items() if count > 1] == []
