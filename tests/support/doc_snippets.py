"""The fenced code blocks of the project's Markdown documentation, with their classification.

A block is classified by a marker line just before its opening fence (CONTRIBUTING.md,
"Documentation snippets")::

    <!-- snippet: KIND [FLAG ...] [key="value" ...] -->

KIND is one of :data:`KINDS`. ``fragment`` (a FLAG) marks YAML that is part of a file, merged
into a minimal valid one before validation; ``not-run`` needs ``reason="..."``.
:func:`collect` reads every documentation file; :func:`shell_commands` splits a shell block into
commands and the output the doc prints under each (``# [1,...`` or ``# → ...`` lines).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: What a block is, and so how the doc-snippet test checks it.
KINDS: dict[str, str] = {
    "run": "a shell or Python example, run against a real gateway and HMS",
    "topology": "a topology file (config/topologies/<name>.yaml), checked by check-config",
    "provider": "entries of a topology's providers.authentication list, checked by check-config",
    "gateway": "the gateway file (config/gateway.yaml), checked by check-config",
    "policy": "a catalog policy file (YAML or Ranger JSON), loaded by the policy engine",
    "helm-values": "Helm values merged over the chart's values.yaml: the chart's schema and check-config",
    "transcript": "`$ hms-gateway ...` lines with the output printed under them (and `[status]`), run "
                  "against the configuration blocks of the same section",
    "not-run": "what cannot run here (diagrams, other machines, clusters); needs reason=\"...\"",
}
FLAGS = frozenset({"fragment"})

MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(?P<spec>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<lang>[^`]*)$")


class MarkerError(ValueError):
    """A marker line that does not parse; ``str()`` names file and line."""


@dataclass(frozen=True)
class Snippet:
    """One fenced block: ``file`` (relative to the repository), ``line`` (1-based, the opening
    fence), ``lang`` (the fence's info string), ``body`` (dedented to the fence's indent), and its
    marker's ``kind``, ``flags`` and ``attrs`` (``kind`` None: unclassified)."""

    file: str
    line: int
    lang: str
    body: str
    kind: str | None = None
    flags: frozenset[str] = frozenset()
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def fragment(self) -> bool:
        return "fragment" in self.flags


def documentation_files(root: Path = ROOT) -> list[Path]:
    """README.md, CONTRIBUTING.md and every docs/*.md, in that order."""
    files = [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))]
    return [f for f in files if f.is_file()]


def _parse_marker(spec: str, where: str) -> tuple[str, frozenset[str], dict[str, str]]:
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise MarkerError(f"{where}: snippet marker: {exc}") from None
    if not words or words[0] not in KINDS:
        raise MarkerError(f"{where}: snippet marker: kind must be one of {', '.join(KINDS)}, not {spec!r}")
    kind, flags, attrs = words[0], set(), {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if eq:
            attrs[key] = value
        elif word in FLAGS:
            flags.add(word)
        else:
            raise MarkerError(f"{where}: snippet marker: unknown flag {word!r} (flags: {', '.join(sorted(FLAGS))})")
    if kind == "not-run" and not attrs.get("reason"):
        raise MarkerError(f"{where}: snippet marker: not-run needs reason=\"...\"")
    return kind, frozenset(flags), attrs


def parse(text: str, file: str) -> list[Snippet]:
    """The fenced blocks of one Markdown text. Raises MarkerError for a malformed marker, or
    for a marker not followed by a fence."""
    lines = text.split("\n")
    snippets: list[Snippet] = []
    pending: tuple[int, str] | None = None  # a marker waiting for its fence
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i])
        if marker:
            if pending:
                raise MarkerError(f"{file}:{pending[0]}: snippet marker not followed by a fenced block")
            pending = (i + 1, marker["spec"])
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if not fence:
            if pending and lines[i].strip():
                raise MarkerError(f"{file}:{pending[0]}: snippet marker not followed by a fenced block")
            i += 1
            continue
        indent, mark = len(fence["indent"]), fence["fence"]
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(mark[0] * len(mark))
                                      and not lines[j].strip().strip(mark[0])):
            j += 1
        body = "\n".join(line[indent:] if line[:indent].strip() == "" else line for line in lines[i + 1:j])
        kind, flags, attrs = (None, frozenset(), {})
        if pending:
            kind, flags, attrs = _parse_marker(pending[1], f"{file}:{pending[0]}")
            pending = None
        snippets.append(Snippet(file, i + 1, fence["lang"].strip(), body + "\n", kind, flags, attrs))
        i = j + 1
    if pending:
        raise MarkerError(f"{file}:{pending[0]}: snippet marker not followed by a fenced block")
    return snippets


def collect(root: Path = ROOT) -> list[Snippet]:
    """Every fenced block of :func:`documentation_files`."""
    out: list[Snippet] = []
    for path in documentation_files(root):
        out.extend(parse(path.read_text(encoding="utf-8"), str(path.relative_to(root))))
    return out


@dataclass(frozen=True)
class ShellCommand:
    """One command of a shell block (continuation lines joined) and the output lines the doc
    prints under it (``# [...`` or ``# → ...``; empty: none shown)."""

    line: int
    command: str
    expected: list[str]


_OUTPUT = re.compile(r"^#\s*(?:→\s*)?(?P<out>\[.*)$|^#\s*→\s*(?P<arrow>.*)$")


def shell_commands(snippet: Snippet) -> list[ShellCommand]:
    """The commands of a shell ``snippet``; other comment lines are dropped."""
    commands: list[ShellCommand] = []
    current: list[str] = []
    start = 0
    for offset, raw in enumerate(snippet.body.split("\n"), start=snippet.line + 1):
        line = raw.rstrip()
        if current:
            current.append(line.rstrip("\\").rstrip())
            if not line.endswith("\\"):
                commands.append(ShellCommand(start, " ".join(part.strip() for part in current), []))
                current = []
            continue
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            out = _OUTPUT.match(line.strip())
            if out and commands:
                commands[-1].expected.append(out["out"] or out["arrow"])
            continue
        start = offset
        if line.endswith("\\"):
            current = [line.rstrip("\\").rstrip()]
        else:
            commands.append(ShellCommand(start, line.strip(), []))
    if current:
        commands.append(ShellCommand(start, " ".join(current), []))
    return commands


#: A Markdown heading line (outside fenced blocks).
_HEADING = re.compile(r"^#{1,6} ")


def section_blocks(snippet: Snippet, snippets: list[Snippet], kinds: frozenset[str]) -> list[Snippet]:
    """The blocks of ``kinds`` before ``snippet`` in its section of the same file (since the
    last Markdown heading above it; lines inside fenced blocks are not headings)."""
    lines = (ROOT / snippet.file).read_text(encoding="utf-8").split("\n")
    same = [s for s in snippets if s.file == snippet.file]
    inside = {n for s in same for n in range(s.line, s.line + s.body.count("\n") + 2)}
    start = max((n for n in range(1, snippet.line) if n not in inside and _HEADING.match(lines[n - 1])), default=0)
    return [s for s in same if start < s.line < snippet.line and s.kind in kinds]


@dataclass(frozen=True)
class TranscriptCommand:
    """One ``$ command`` of a transcript (continuation lines joined), the lines printed under
    it, and the exit status shown as a trailing ``[N]`` (None: not shown)."""

    command: str
    expected: list[str]
    status: int | None


_STATUS = re.compile(r"^(?P<out>.*?)\s+\[(?P<status>\d+)\]$")


def transcript_commands(snippet: Snippet) -> list[TranscriptCommand]:
    """The commands of a ``transcript`` block."""
    commands: list[list] = []
    continued = False
    for raw in snippet.body.rstrip("\n").split("\n"):
        line = raw.rstrip()
        if continued:
            commands[-1][0] += " " + line.rstrip("\\").strip()
        elif line.startswith("$ "):
            commands.append([line[2:].rstrip("\\").strip(), [], None])
        elif commands and line:
            status = _STATUS.match(line)
            commands[-1][1].append(status["out"] if status else line)
            if status:
                commands[-1][2] = int(status["status"])
        continued = line.endswith("\\")
    return [TranscriptCommand(c, out, status) for c, out, status in commands]
