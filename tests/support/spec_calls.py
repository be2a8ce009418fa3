"""The nine MS-HMSHTTP read methods (section 3.1.5), called through a client and compared with
a direct strict-binary call to the same HMS."""

from __future__ import annotations

DB, TABLE = "hmshttptestdatabase", "test_table"


def assert_spec_methods_match(client, direct) -> int:
    """Call all nine spec methods with ``client`` and assert each result equals ``direct``'s.

    ``client`` and ``direct`` are generated ``ThriftHiveMetastore.Client`` objects; the data is
    the pipeline's sample catalog. Returns the number of calls made through ``client``.
    """
    assert {"default", DB} <= set(client.get_all_databases())
    assert client.get_all_databases() == direct.get_all_databases()
    assert client.get_databases("hms*") == direct.get_databases("hms*") == [DB]
    assert client.get_database(DB) == direct.get_database(DB)
    assert TABLE in client.get_all_tables(DB)
    assert client.get_all_tables(DB) == direct.get_all_tables(DB)
    assert client.get_tables(DB, "test*") == direct.get_tables(DB, "test*")
    table = client.get_table(DB, TABLE)
    assert table == direct.get_table(DB, TABLE)
    assert [c.name for c in table.partitionKeys] == ["hair_color"]
    assert client.get_tables_by_type(DB, "*", "MANAGED_TABLE") == direct.get_tables_by_type(
        DB, "*", "MANAGED_TABLE")
    names = client.get_partition_names(DB, TABLE, -1)
    assert names == direct.get_partition_names(DB, TABLE, -1) == ["hair_color=black", "hair_color=brown"]
    parts = client.get_partitions(DB, TABLE, -1)
    assert parts == direct.get_partitions(DB, TABLE, -1)
    assert sorted(p.values for p in parts) == [["black"], ["brown"]]
    return 11  # calls made through client above
