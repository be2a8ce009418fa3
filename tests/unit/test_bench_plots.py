"""bench/plots.py: the figures of docs/performance.md are read from its own tables and drawn."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import plots  # noqa: E402

DOC = ROOT / "docs" / "performance.md"
PNGS = ("perf-latency-ratios.png", "perf-workers.png", "perf-soak-rss.png")


@pytest.fixture(scope="module")
def doc_tables():
    return plots.tables(DOC.read_text())


def test_latency_ratios_come_from_the_every_target_met_table(doc_tables):
    runs, ratios, limits = plots.latency_ratios(doc_tables)
    assert runs == ["run 1", "run 2", "run 3"]
    assert ratios["get_table"] == [1.23, 1.27, 1.29]
    assert limits == {"get_partitions\n(5,000 partitions)": 1.3, "get_table": 1.5, "get_all_databases": 3.0}


def test_workers_and_soak_figures(doc_tables):
    runs = plots.workers(doc_tables)
    assert runs and all({("scripted", 1), ("scripted", 2)} <= set(figures) for _, figures in runs)
    assert runs[0][1][("scripted", 1)] == 1283.0
    rss = plots.soak(doc_tables)
    assert rss["baseline"] == (7.0, 87.0) and rss["end"] == (30.0, 87.4)
    assert [mib for _, mib in rss["blocks"]] == [86.2, 87.1, 87.1, 86.8, 87.2, 87.0]


def test_a_missing_table_is_named():
    with pytest.raises(plots.TableNotFound, match="latency-ratio"):
        plots.latency_ratios(plots.tables("| a | b |\n|---|---|\n| 1 | 2 |\n"))


def test_draw_writes_the_pngs_the_page_shows(tmp_path):
    written = plots.draw(DOC, tmp_path)
    assert [p.name for p in written] == list(PNGS)
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    page = DOC.read_text()
    for name in PNGS:
        assert f"]({name})" in page, f"docs/performance.md does not show {name}"
        assert (ROOT / "docs" / name).is_file(), f"docs/{name} is not checked in (python bench/plots.py)"
