"""Column names in table properties (Spark's schema and statistics, Hive's COLUMN_STATS_ACCURATE)
removed for a user who may not see them."""

from __future__ import annotations

import json

from gateway.policy.columns import PART_LENGTH, filter_parameters

FIELDS = [{"name": n, "type": "string", "nullable": True, "metadata": {}} for n in ("id", "ssn", "name")]
SCHEMA = json.dumps({"type": "struct", "fields": FIELDS}, separators=(",", ":"))


def keep(name: str) -> bool:
    return name.lower() != "ssn"


def test_spark_schema_in_one_property_and_column_statistics():
    params = {"spark.sql.sources.schema": SCHEMA, "spark.sql.statistics.colStats.ssn.max": "9",
              "spark.sql.statistics.colStats.id.max": "3", "spark.sql.statistics.colStats.a.b.version": "2",
              "COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true","COLUMN_STATS":{"id":"true","ssn":"true"}}',
              "owner": "x"}
    out = filter_parameters(params, keep)
    assert [f["name"] for f in json.loads(out["spark.sql.sources.schema"])["fields"]] == ["id", "name"]
    assert "spark.sql.statistics.colStats.ssn.max" not in out
    assert out["spark.sql.statistics.colStats.id.max"] == "3"
    assert out["spark.sql.statistics.colStats.a.b.version"] == "2"  # a column named 'a.b'
    assert json.loads(out["COLUMN_STATS_ACCURATE"]) == {"BASIC_STATS": "true", "COLUMN_STATS": {"id": "true"}}
    assert out["owner"] == "x" and "ssn" not in json.dumps(out)
    assert params["spark.sql.sources.schema"] == SCHEMA  # the caller's dict is left alone


def test_spark_schema_in_parts_is_split_again():
    wide = json.dumps({"type": "struct", "fields": FIELDS * 40 + [
        {"name": "ssn", "type": "string", "nullable": True, "metadata": {}}]}, separators=(",", ":"))
    parts = [wide[i:i + PART_LENGTH] for i in range(0, len(wide), PART_LENGTH)]
    params = {"spark.sql.sources.schema.numParts": str(len(parts)),
              **{f"spark.sql.sources.schema.part.{i}": p for i, p in enumerate(parts)}}
    out = filter_parameters(params, keep)
    count = int(out["spark.sql.sources.schema.numParts"])
    text = "".join(out[f"spark.sql.sources.schema.part.{i}"] for i in range(count))
    assert {f["name"] for f in json.loads(text)["fields"]} == {"id", "name"}
    assert all(len(out[f"spark.sql.sources.schema.part.{i}"]) <= PART_LENGTH for i in range(count))
    assert len(out) == count + 1  # no stale part left behind


def test_unparsable_values_are_dropped_and_plain_maps_kept():
    out = filter_parameters({"spark.sql.sources.schema": "{not json", "COLUMN_STATS_ACCURATE": "[", "k": "v"}, keep)
    assert out == {"k": "v"}
    plain = {"k": "v"}
    assert filter_parameters(plain, keep) is plain
    assert filter_parameters(None, keep) is None
