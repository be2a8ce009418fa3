"""The C translator against the pure-Python one on the same hostile inputs (issue 9): for every
seeded input, the same bytes or the same ProtocolError, and never another exception.

Inputs: mutated and truncated TJSON calls of the nine MS-HMSHTTP read methods
(``tests/support/hostile.py``) and mutated strict-binary replies written by Apache Thrift's
generated code (tables with skewed-value maps, partitions, column statistics with binary and
double fields, declared exceptions, TApplicationException). ``bench/fuzz.py`` runs the same
check for longer.
"""

from __future__ import annotations

from thrift.Thrift import TApplicationException

from tests.support.apache_codec import strict_binary, write_message
from tests.support.hostile import differential, hostile_bodies, mutated_replies
from tests.unit.test_thrift_conformance import sample_stats, sample_table

SEED = 20240909


def sample_replies(apache_hms) -> list[bytes]:
    """Strict-binary replies of every shape the nine read methods (and a few more) return."""
    t, s = apache_hms.ttypes, apache_hms.service
    table = sample_table(t, skewed_maps={("a", "b"): "/loc/ab", ("c",): "/loc/c"})
    parts = [t.Partition([f"v{i}"], "db", "tbl", i, 0, table.sd, {"k": str(i), "\u00e9": "\u2028"})
             for i in range(3)]
    results = [
        ("get_all_databases", s.get_all_databases_result(success=["default", "caf\u00e9", ""])),
        ("get_database", s.get_database_result(success=t.Database("db", "d\"q", "file:/w", {"k": "v"}))),
        ("get_database", s.get_database_result(o1=t.NoSuchObjectException("no such database"))),
        ("get_table", s.get_table_result(success=table)),
        ("get_table", s.get_table_result(o2=t.NoSuchObjectException("no \"such\" table"))),
        ("get_partitions", s.get_partitions_result(success=parts)),
        ("get_partition_names", s.get_partition_names_result(success=["a=1", "a=2"])),
        ("get_tables_by_type", s.get_tables_by_type_result(o1=t.MetaException("bad"))),
        ("get_table_column_statistics", s.get_table_column_statistics_result(success=sample_stats(t))),
    ]
    replies = [write_message(strict_binary, name, 2, 9, result) for name, result in results]
    replies.append(write_message(strict_binary, "get_table", 3, 4, TApplicationException(
        TApplicationException.INTERNAL_ERROR, "internal")))
    return replies


def test_c_and_python_translators_agree_on_hostile_input(apache_hms, schema):
    calls = [(label, body) for label, body in hostile_bodies(SEED, 4000) if body[:1] in (b"[", b"\x82")]
    replies = list(mutated_replies(sample_replies(apache_hms), SEED, 2500))
    inputs, problems = differential(schema, calls, replies, seed=SEED)
    assert inputs > 4000
    assert problems == [], f"{len(problems)} disagreements, first ones:\n" + "\n".join(problems[:10])


def test_the_differential_sees_a_disagreement(apache_hms, schema, monkeypatch):
    # The check itself can fail: a C translator that answers differently is caught.
    from gateway.thrift import _speedups

    real = _speedups.tjson_call_to_binary

    def skewed(body, args):
        got = real(body, args)
        return None if got is None else (got[0], got[1], got[2] + 1, got[3])

    monkeypatch.setattr(_speedups, "tjson_call_to_binary", skewed)
    calls = [(label, body) for label, body in hostile_bodies(SEED, 50) if label.endswith(":valid")
             and body[:1] == b"["]
    _, problems = differential(schema, calls, [], seed=SEED)
    assert len(problems) == len(calls) > 0
