"""Hive's partition names (Warehouse.makePartName, FileUtils.escapePathName), as the demo and the
test fixtures create partition directories before HMS would."""

from hms_gateway_client.partition_names import partition_name


def test_values_are_escaped_as_hive_escapes_path_names():
    assert partition_name(["p", "dt"], ["00001", "a/b:c=d%"]) == "p=00001/dt=a%2Fb%3Ac%3Dd%25"


def test_an_empty_value_is_the_default_partition():
    assert partition_name(["p"], [""]) == "p=__HIVE_DEFAULT_PARTITION__"
