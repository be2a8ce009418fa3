"""docs/architecture.md names every module of ``gateway/`` and none that does not exist, and
no text in ``gateway/`` points to a file outside the repository (issue 41): the page a newcomer
reads first stays a true map of the house."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.source import parse as parse_source

REPO = Path(__file__).resolve().parents[2]
GATEWAY = REPO / "gateway"
DOC = REPO / "docs" / "architecture.md"

#: A path in backticks that names a source file: ``gateway/pipeline/step.py``, ``pipeline/body.py``,
#: ``_speedups.c``.
_SOURCE = re.compile(r"`([\w./-]+\.(?:py|c))`")


def _defines_something(init: Path) -> bool:
    """Whether a package's ``__init__.py`` holds more than a docstring and names handed on."""
    for node in parse_source(init.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", "") != "__all__" for t in targets):
                return True
    return False


def modules() -> set[str]:
    """Every module of ``gateway/`` by its path from the repository root: each ``.py`` and
    ``.c`` file, but a package's ``__init__.py`` that only hands names on."""
    found = set()
    for path in [*GATEWAY.rglob("*.py"), *GATEWAY.rglob("*.c")]:
        if path.name == "__init__.py" and not _defines_something(path):
            continue
        found.add(path.relative_to(REPO).as_posix())
    return found


#: Where the page's bare file names may live: the server package and the repository's own trees.
_TREES = ("gateway", "clients", "demo", "bench", "tests", "scripts")


def _exists(name: str) -> bool:
    """A source path as the page writes it: from the repository root, from ``gateway/``, or a
    bare file name that some file of the repository's source trees has."""
    if "/" not in name:
        return any(any((REPO / tree).rglob(name)) for tree in _TREES)
    return (REPO / name).is_file() or (GATEWAY / name).is_file()


def test_every_module_is_named_by_its_path():
    named = set(_SOURCE.findall(DOC.read_text(encoding="utf-8")))
    missing = sorted(modules() - named)
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)}"


def test_every_source_file_the_page_names_exists():
    named = set(_SOURCE.findall(DOC.read_text(encoding="utf-8")))
    gone = sorted(name for name in named if not _exists(name))
    assert not gone, f"docs/architecture.md names files that do not exist: {', '.join(gone)}"


def test_the_checks_can_fail():
    assert "gateway/pipeline/step.py" in modules()
    assert not any(m.endswith("/__init__.py") and "providers" in m for m in modules())
    assert not _exists("gateway/services/thrift_rpc.py") and not _exists("no_such_module.py")


#: A markdown file named in the code (not inside a URL).
_MARKDOWN = re.compile(r"(?<![\w/.:-])(/?[\w.-]+(?:/[\w.-]+)*\.md)\b")
_URL = re.compile(r"https?://\S+")


def test_no_text_in_the_package_points_outside_the_repository():
    outside = []
    for path in sorted(GATEWAY.rglob("*.py")):
        text = _URL.sub("", path.read_text(encoding="utf-8"))
        for name in _MARKDOWN.findall(text):
            if name.startswith("/") or not ((REPO / name).is_file() or (REPO / "docs" / name).is_file()):
                outside.append(f"{path.relative_to(REPO)}: {name}")
    assert not outside, "files named that the repository does not have: " + "; ".join(outside)
