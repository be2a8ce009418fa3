"""Draw docs/performance.md's main comparisons as PNGs, from the tables in that page.

    python bench/plots.py [--doc docs/performance.md] [--out docs]

Writes ``perf-latency-ratios.png`` (gateway / direct per call, per run, with the targets),
``perf-workers.png`` (requests per second by worker count and upstream) and ``perf-soak-rss.png``
(the gateway's RSS over the 30-minute soak). The figures are the page's own: the tables that
``bench/run.py --markdown``, ``bench/workers.py`` and ``bench/soak.py --markdown`` print, pasted
there with each run. Raises ``TableNotFound`` naming the table when the page no longer holds one.
Needs matplotlib (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The calls whose ratio the latency figure shows, as the bench names them, and their targets.
RATIO_ROWS = {
    "get_partitions(5000) gateway/direct": "get_partitions\n(5,000 partitions)",
    "get_table gateway/direct": "get_table",
    "get_all_databases gateway/direct": "get_all_databases",
}


class TableNotFound(LookupError):
    """The page lacks a table a figure is drawn from."""


@dataclass(frozen=True)
class Table:
    """A Markdown table: the line of text before it (its caption), its header and its rows."""

    caption: str
    header: list[str]
    rows: list[list[str]]

    def column(self, name: str) -> int:
        return self.header.index(name)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def tables(markdown: str) -> list[Table]:
    """Every pipe table of ``markdown``, in order, with the last non-blank line before it."""
    out: list[Table] = []
    lines = markdown.split("\n")
    caption, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|[\s:|-]+\|?", lines[i + 1].strip()):
            header, rows = _cells(line), []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out.append(Table(caption, header, rows))
            continue
        if line.strip():
            caption = line.strip()
        i += 1
    return out


def _number(text: str) -> float:
    """The first number in a cell: ``1,283`` → 1283.0, ``**+0.5 %**`` → 0.5."""
    match = re.search(r"[-+]?\d[\d,]*(?:\.\d+)?", text)
    if not match:
        raise ValueError(f"no number in {text!r}")
    return float(match.group().replace(",", ""))


def _find(all_tables: list[Table], header_start: list[str], what: str) -> list[Table]:
    found = [t for t in all_tables if t.header[: len(header_start)] == header_start]
    if not found:
        raise TableNotFound(f"docs/performance.md has no {what} table (header starting {header_start})")
    return found


def latency_ratios(all_tables: list[Table]) -> tuple[list[str], dict[str, list[float]], dict[str, float]]:
    """(run names, call → ratio per run, call → target) from the "every target met" table."""
    table = _find(all_tables, ["target", "run 1", "run 2", "run 3", "limit"], "latency-ratio")[0]
    runs = table.header[1:-1]
    ratios, limits = {}, {}
    for row in table.rows:
        if row[0] in RATIO_ROWS:
            ratios[RATIO_ROWS[row[0]]] = [_number(c) for c in row[1:-1]]
            limits[RATIO_ROWS[row[0]]] = _number(row[-1])
    if len(ratios) != len(RATIO_ROWS):
        raise TableNotFound(f"latency-ratio table lacks rows {sorted(set(RATIO_ROWS) - set(ratios))}")
    return runs, ratios, limits


def workers(all_tables: list[Table]) -> list[tuple[str, dict[tuple[str, int], float]]]:
    """[(caption, (upstream, workers) → requests/s)] for each workers run."""
    out = []
    for table in _find(all_tables, ["upstream", "workers", "requests/s"], "workers"):
        up, n, rps = table.column("upstream"), table.column("workers"), table.column("requests/s")
        out.append((table.caption.split(",")[0].rstrip(":"),
                    {(row[up], int(_number(row[n]))): _number(row[rps]) for row in table.rows}))
    return out


def soak(all_tables: list[Table], minutes: float = 30.0) -> dict[str, object]:
    """The soak's RSS (MiB): ``before``, ``baseline`` (minute), ``end`` (minute), ``peak`` and the
    medians of its 5-minute blocks, from the "RSS of the gateway" table."""
    table = _find(all_tables, ["RSS of the gateway", "MiB"], "soak RSS")[0]
    rows = {row[0]: row[1] for row in table.rows}

    def minute(label: str) -> float:
        return _number(re.search(r"minute (\d+)", label).group(1))

    baseline = next(k for k in rows if k.startswith("baseline"))
    end = next(k for k in rows if k.startswith("end"))
    blocks = [float(v) for v in re.findall(r"\d+(?:\.\d+)?", rows["median by 5-minute block"])]
    return {
        "before": _number(rows["before load"]),
        "baseline": (minute(baseline), _number(rows[baseline])),
        "end": (minute(end), _number(rows[end])),
        "peak": _number(rows["peak after warm-up"]),
        "blocks": [(5 * i + 2.5, mib) for i, mib in enumerate(blocks)],
        "minutes": minutes,
    }


def draw(doc: Path, out: Path) -> list[Path]:
    """Write the three PNGs into ``out``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    all_tables = tables(doc.read_text(encoding="utf-8"))
    written = []

    runs, ratios, limits = latency_ratios(all_tables)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(len(ratios))]
        ax.bar(xs, [v[i] for v in ratios.values()], width, label=run)
    for j, call in enumerate(ratios):
        ax.hlines(limits[call], j - 0.45, j + 0.45, colors="black", linestyles="dashed")
        ax.annotate(f"target ≤ {limits[call]:g}", (j, limits[call]), textcoords="offset points", xytext=(0, 4),
                    ha="center", fontsize=8)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(ratios)), list(ratios))
    ax.set_ylabel("gateway / direct call (median latency)")
    ax.set_title("Latency through the gateway, relative to a direct binary call (1 = no overhead)")
    ax.legend(title="make bench", fontsize=8, loc="upper left")
    ax.set_ylim(0, max(max(limits.values()), max(max(v) for v in ratios.values())) * 1.15)
    written.append(_save(fig, out / "perf-latency-ratios.png"))

    runs_w = workers(all_tables)
    fig, axes = plt.subplots(1, len(runs_w), figsize=(4.2 * len(runs_w), 4.2), dpi=110, sharey=True, squeeze=False)
    for ax, (caption, figures) in zip(axes[0], runs_w):
        upstreams = sorted({u for u, _ in figures}, key=lambda u: u != "scripted")
        counts = sorted({n for _, n in figures})
        width = 0.8 / len(counts)
        for i, n in enumerate(counts):
            xs = [j + (i - (len(counts) - 1) / 2) * width for j in range(len(upstreams))]
            bars = ax.bar(xs, [figures[(u, n)] for u in upstreams], width, label=f"workers: {n}")
            ax.bar_label(bars, fmt="{:,.0f}", fontsize=8)
        ax.set_xticks(range(len(upstreams)), [f"{u} upstream" for u in upstreams])
        ax.set_title(caption, fontsize=9)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("requests/s (wrk, 32 connections, get_all_databases)")
    fig.suptitle("Throughput by worker count (2-core VM, shared)")
    written.append(_save(fig, out / "perf-workers.png"))

    rss = soak(all_tables)
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    points = [(0.0, rss["before"]), rss["baseline"], *rss["blocks"], rss["end"]]
    points.sort()
    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label="gateway RSS (medians)")
    base = rss["baseline"][1]
    ax.axhline(base * 1.10, color="red", linestyle="dashed", label=f"failure limit: baseline + 10 % ({base * 1.1:.1f} MiB)")
    ax.axhline(rss["peak"], color="grey", linestyle="dotted", label=f"peak after warm-up ({rss['peak']:.1f} MiB)")
    ax.axvspan(0, rss["minutes"] * 0.2, color="grey", alpha=0.12, label="warm-up (not judged)")
    ax.set_xlim(0, rss["minutes"])
    ax.set_ylim(0, base * 1.25)
    ax.set_xlabel("minutes of mixed load (8 clients)")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title("Soak: the gateway's memory over 30 minutes (make soak)")
    ax.legend(fontsize=8, loc="lower right")
    written.append(_save(fig, out / "perf-soak-rss.png"))
    return written


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    # No timestamp or software version in the file: redrawing the same figures gives the same bytes.
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md", help="the page to read")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where to write the PNGs")
    args = parser.parse_args(argv)
    for path in draw(args.doc, args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
