"""Hostile TJSON gets 400 quickly, with bounded memory, and never reaches HMS; what Apache's
writers produce is accepted (issue 3, conformance). Real gateway subprocess, real HMS.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.gateway import RunningGateway, post, service, upstream_calls
from tests.support.thrift_gen import hive_metastore_modules

pytestmark = pytest.mark.integration

USER, PASSWORD = "admin", "admin-password"
WRITE_METHODS = ["get_all_databases", "get_database", "create_database", "update_table_column_statistics"]


@pytest.fixture(scope="module")
def gateway(hms, module_gateway_factory) -> RunningGateway:
    return module_gateway_factory(services=[service([f"thrift://127.0.0.1:{hms.port}"], methods=WRITE_METHODS)],
                                  users={USER: PASSWORD})


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


DEEP = 10_000
HOSTILE = {
    "structs nested 10,000 deep": (b'[1,"get_database",1,1,{"1":' + b'{"rec":{"1":' * DEEP
                                   + b'{"str":"x"}' + b"}}" * DEEP + b"}]"),
    "JSON arrays nested 10,000 deep": b'[1,"get_database",1,1,{"1":{"lst":' + b"[" * DEEP + b"]" * DEEP + b"}}]",
    "lists nested 10,000 deep": (b'[1,"get_database",1,1,{"1":{"lst":' + b'["lst",1,' * DEEP
                                 + b'["str",0]' + b"]" * DEEP + b"}}]"),
    "huge list count": b'[1,"get_database",1,1,{"1":{"lst":["str",2147483647,"a"]}}]',
    "huge map count": b'[1,"get_database",1,1,{"1":{"map":["str","str",2147483647,{"a":"b"}]}}]',
    "1,000-digit i64": b'[1,"get_database",1,1,{"1":{"i64":' + b"9" * 1000 + b"}}]",
    "1,000-digit seqid": b'[1,"get_all_databases",1,' + b"1" * 1000 + b",{}]",
    "1,000-digit dbl": b'[1,"get_database",1,1,{"1":{"dbl":1.' + b"0" * 1000 + b"}}]",
    "1,000-digit dbl integer": b'[1,"get_database",1,1,{"1":{"dbl":' + b"9" * 1000 + b"}}]",
    "invalid UTF-8 in a string": b'[1,"get_database",1,1,{"1":{"str":"de\xff\xfeult"}}]',
    "overlong UTF-8 in a string": b'[1,"get_database",1,1,{"1":{"str":"\xc0\xaf"}}]',
    "unpaired surrogate escape": b'[1,"get_database",1,1,{"1":{"str":"\\ud800x"}}]',
    "list count above elements": b'[1,"get_database",1,1,{"1":{"lst":["str",3,"a"]}}]',
    "list count below elements": b'[1,"get_database",1,1,{"1":{"lst":["str",1,"a","b"]}}]',
    "map count disagrees": b'[1,"get_database",1,1,{"1":{"map":["str","str",2,{"a":"b"}]}}]',
    "negative count": b'[1,"get_database",1,1,{"1":{"lst":["str",-1]}}]',
}


@pytest.mark.parametrize("body", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_tjson_gets_400_and_never_reaches_hms(gateway, body):
    before = upstream_calls(gateway)
    status, _, text = post(gateway, body)
    assert status == 400, text[:300]
    assert text.startswith(b"malformed Thrift message: ") and len(text) < 400
    assert upstream_calls(gateway) == before


def test_hostile_bodies_keep_memory_bounded(gateway):
    # Every hostile body again, 5 times each: the gateway's peak RSS grows by far less than a
    # pre-allocation from any of those counts (2**31 elements) would take.
    before = peak_rss_kib(gateway.process.pid)
    for _ in range(5):
        for body in HOSTILE.values():
            assert post(gateway, body)[0] == 400
    assert peak_rss_kib(gateway.process.pid) - before < 64 * 1024
    # and it still serves
    status, _, body = post(gateway, b'[1,"get_all_databases",1,1,{}]')
    assert status == 200 and json.loads(body)[2] == 2


def test_what_apache_writers_produce_is_accepted(gateway, direct):
    _, ttypes = hive_metastore_modules()
    # The session's HMS is a throw-away one, so the database is left there (HMS 2.3 embedded
    # here drops the connection on drop_database).
    db = "gw_hostile_accept"
    # \u escapes with a surrogate pair, \/, and a raw non-ASCII character, as Java/C++ write them
    create = ('[1,"create_database",1,4,{"1":{"rec":{"1":{"str":"' + db + '"},'
              '"2":{"str":"caf\\u00e9 \\ud83d\\ude00 a\\/b \u00fc"},"3":{"str":"file:\\/tmp\\/' + db + '"},'
              '"4":{"map":["str","str",1,{"k\\/1":"v\\\\"}]}}}}]')
    status, _, body = post(gateway, create.encode())
    assert status == 200 and json.loads(body)[2] == 2, body
    got = direct.get_database(db)
    assert got.description == "caf\u00e9 \U0001f600 a/b \u00fc"
    assert got.parameters == {"k/1": "v\\"}

    # binary: base64 padded (Python/Node writers) and unpadded (Java/C++ writers)
    sd = ttypes.StorageDescriptor(
        cols=[ttypes.FieldSchema("d", "decimal(10,2)", None)], location=f"file:/tmp/{db}/t",
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        compressed=False, numBuckets=-1, bucketCols=[], sortCols=[], parameters={},
        serdeInfo=ttypes.SerDeInfo("s", "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}))
    direct.create_table(ttypes.Table("t", db, "admin", 0, 0, 0, sd, [], {}, None, None, "MANAGED_TABLE"))
    for low, high in (("AQI=", "Ae8"), ("AQI", "Ae8=")):  # 0x0102 = 2.58, 0x01ef = 4.95
        stats = ('[1,"update_table_column_statistics",1,5,{"1":{"rec":{'
                 '"1":{"rec":{"1":{"tf":1},"2":{"str":"' + db + '"},"3":{"str":"t"}}},'
                 '"2":{"lst":["rec",1,{"1":{"str":"d"},"2":{"str":"decimal(10,2)"},"3":{"rec":{"6":{"rec":{'
                 '"1":{"rec":{"1":{"str":"' + low + '"},"3":{"i16":2}}},'
                 '"2":{"rec":{"1":{"str":"' + high + '"},"3":{"i16":2}}},'
                 '"3":{"i64":0},"4":{"i64":2}}}}}}]}}}}]')
        status, _, body = post(gateway, stats.encode())
        assert status == 200 and json.loads(body)[4] == {"0": {"tf": 1}}, body
        read = direct.get_table_column_statistics(db, "t", "d").statsObj[0].statsData.decimalStats
        assert (read.lowValue.unscaled, read.highValue.unscaled) == (b"\x01\x02", b"\x01\xef")

    # doubles as Java/C++ write them: quoted NaN/Infinity (in fields HMS skips)
    probe = b'[1,"get_all_databases",1,6,{"90":{"dbl":"NaN"},"91":{"dbl":"Infinity"},"92":{"dbl":"-Infinity"}}]'
    status, _, body = post(gateway, probe)
    assert status == 200 and db in json.loads(body)[4]["0"]["lst"]
