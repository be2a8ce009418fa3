"""The bundled IDL and the schema built from it."""

from __future__ import annotations

import shutil
import subprocess

from gateway.thrift.schema import BINARY, DEFAULT_IDL, ListSpec, MapSpec, StructSchema, TType, load_schema


def test_idl_compiles_with_apache_thrift_compiler(tmp_path):
    compiler = shutil.which("thrift")
    assert compiler, "thrift-compiler is required (apt-get install -y thrift-compiler)"
    subprocess.run([compiler, "-r", "--gen", "py", "-out", str(tmp_path), str(DEFAULT_IDL)], check=True)
    assert (tmp_path / "hive_metastore" / "ThriftHiveMetastore.py").is_file()
    assert (tmp_path / "fb303" / "FacebookService.py").is_file()


def test_methods_include_hive_and_fb303(schema):
    # Hive 2.3: 153 service methods; fb303's FacebookService: 13.
    assert len(schema.methods) == 166
    for name in ("get_database", "get_partitions", "get_table", "set_ugi", "getName", "aliveSince"):
        assert name in schema.methods
    assert schema.methods["shutdown"].oneway and schema.methods["reinitialize"].oneway
    assert not schema.methods["get_table"].oneway


def test_get_partitions_shapes(schema):
    method = schema.methods["get_partitions"]
    assert [(f.id, f.name, f.spec) for f in method.args.fields.values()] == [
        (1, "db_name", TType.STRING),
        (2, "tbl_name", TType.STRING),
        (3, "max_parts", TType.I16),
    ]
    success = method.result.fields[0].spec
    assert isinstance(success, ListSpec) and success.elem.name == "Partition"
    assert {f.id for f in method.result.fields.values()} == {0, 1, 2}


def test_binary_positions(schema):
    decimal = schema.structs["Decimal"]
    assert decimal.fields[1].spec == BINARY and decimal.fields[3].spec == TType.I16
    # 2.3 declares bitVectors as string (3.0 changed it to binary).
    assert schema.structs["StringColumnStatsData"].fields[5].spec == TType.STRING
    skewed = schema.structs["SkewedInfo"].fields[3].spec
    assert isinstance(skewed, MapSpec) and skewed.key == ListSpec(TType.STRING)
    assert schema.structs["HiveObjectRef"].fields[1].spec == TType.I32  # enum → i32
    assert isinstance(schema.structs["Table"].fields[7].spec, StructSchema)


def test_load_schema_is_cached():
    assert load_schema() is load_schema(DEFAULT_IDL)
