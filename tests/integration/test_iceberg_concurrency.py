"""Concurrent appenders on one Iceberg table (issue 22): threads committing through the gateway's
REST catalog and threads committing with PyIceberg's ``HiveCatalog`` directly to the same HMS, all
at once. Both sides take HMS's table lock and check their base under it, so no commit is lost:
the table has exactly one snapshot per successful commit and every appended row; a loser gets
``CommitFailedException`` (409 from the gateway), reloads and retries.

PyIceberg's own commit retries are switched off (table property ``commit.retry.num-retries=0``)
so that the test sees every conflict. Every thread loads the table before any of them commits
its first append (a barrier), so that round has one winner and a loser on each side for sure.
"""

from __future__ import annotations

import json
import threading
from collections import Counter

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.support.gateway import RunningGateway
from tests.support.hms import RunningHMS
from tests.support.iceberg.clients import rest_catalog

pytestmark = [pytest.mark.integration, pytest.mark.long, pytest.mark.usefixtures("pyiceberg_env")]

PATH = "iceberg"
USER, PASSWORD = "etl", "etl-password"
THREADS_PER_SIDE = 3  # REST threads, and as many HiveCatalog threads
APPENDS = 3  # commits each thread makes
MAX_ATTEMPTS = 60  # per append; a bound against a livelock, far above what the race needs
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False),
                NestedField(2, "writer", StringType(), required=False))


@pytest.fixture(scope="module")
def gw(module_hms, module_gateway_factory) -> RunningGateway:
    service = {"path": PATH, "kind": "iceberg-rest", "upstream": {"urls": [module_hms.uri]},
               "options": {"lock_check_min_wait_seconds": 0.02, "lock_check_max_wait_seconds": 0.2}}
    return module_gateway_factory(services=[service], users={USER: PASSWORD})


def _rest(gw: RunningGateway) -> RestCatalog:
    return rest_catalog(gw, user=USER, password=PASSWORD, path=PATH)


def _hive(hms: RunningHMS) -> HiveCatalog:
    # PyIceberg's HiveCatalog keeps one Thrift connection: one catalog per thread
    return HiveCatalog("hms", uri=hms.uri, **{"lock-check-retries": "40", "lock-check-max-wait-time": "0.5"})


def test_rest_and_hive_catalog_appenders_lose_no_commit(gw, module_hms):
    identifier = "race.t"
    setup = _rest(gw)
    setup.create_namespace("race")
    setup.create_table(identifier, schema=SCHEMA, properties={"commit.retry.num-retries": "0"})
    writers: list[tuple[str, Catalog]] = [
        *[(f"rest{i}", _rest(gw)) for i in range(THREADS_PER_SIDE)],
        *[(f"hive{i}", _hive(module_hms)) for i in range(THREADS_PER_SIDE)],
    ]
    first_round = threading.Barrier(len(writers))
    commits: Counter[str] = Counter()
    conflicts: Counter[str] = Counter()
    failures: list[BaseException] = []
    count = threading.Lock()

    def write(name: str, catalog: Catalog, number: int) -> None:
        try:
            for i in range(APPENDS):
                table = catalog.load_table(identifier)
                if i == 0:
                    first_round.wait(60)
                rows = pa.table({"id": pa.array([number * 100 + i], pa.int64()),
                                 "writer": pa.array([name], pa.string())})
                for _ in range(MAX_ATTEMPTS):
                    try:
                        table.append(rows)
                        break
                    except CommitFailedException:
                        with count:
                            conflicts[name.rstrip("0123456789")] += 1
                        table = catalog.load_table(identifier)  # the loser reloads and retries
                else:
                    raise AssertionError(f"{name}: no commit in {MAX_ATTEMPTS} attempts")
                with count:
                    commits[name] += 1
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(name, catalog, n)) for n, (name, catalog) in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert failures == []
    assert sum(commits.values()) == len(writers) * APPENDS

    table = setup.load_table(identifier)
    assert len(table.snapshots()) == sum(commits.values())  # no lost commit
    ids = sorted(table.scan().to_arrow()["id"].to_pylist())
    assert ids == sorted(n * 100 + i for n in range(len(writers)) for i in range(APPENDS))
    # HiveCatalog, reading HMS directly, sees the same head
    assert _hive(module_hms).load_table(identifier).metadata_location == table.metadata_location
    # the first round had one winner: each side had a loser, and they retried (the commits above)
    assert conflicts["rest"] >= 1 and conflicts["hive"] >= 1
    assert sum(conflicts.values()) >= len(writers) - 1
    # the REST losers were answered 409 CommitFailedException by the gateway
    audit = [json.loads(line) for line in gw.log().splitlines() if line.startswith("{") and '"effective_user"' in line]
    refused = [r for r in audit if r.get("method") == "updateTable" and r.get("status") == 409]
    assert len(refused) == conflicts["rest"]


def test_eight_rest_writers_on_one_table_all_land_and_none_starves(module_hms, module_gateway_factory):
    """8 writers × 10 appends through one gateway with two workers (issue 33): the gateway's
    own queue per table (across its workers) and HMS's lock take them in turn, so every append
    lands, each writer lands all of its own, and no commit is lost. Conflicts (409) are
    retried after a reload, as Iceberg clients do; there is no timing threshold here
    (bench/iceberg.py --writers 8 measures the rate)."""
    writers, appends = 8, 10
    service = {"path": PATH, "kind": "iceberg-rest", "upstream": {"urls": [module_hms.uri]}}
    gw = module_gateway_factory(services=[service], users={USER: PASSWORD}, name="eight", workers=2,
                                timeout=120)  # two workers start slowly on a busy machine
    identifier = "race8.t"
    setup = _rest(gw)
    setup.create_namespace("race8")
    setup.create_table(identifier, schema=SCHEMA)
    landed: Counter[int] = Counter()
    failures: list[BaseException] = []
    start = threading.Barrier(writers)

    def write(n: int) -> None:
        try:
            catalog = _rest(gw)
            start.wait(60)
            for i in range(appends):
                rows = pa.table({"id": pa.array([n * 100 + i], pa.int64()), "writer": pa.array([f"w{n}"], pa.string())})
                for _ in range(MAX_ATTEMPTS):
                    try:
                        catalog.load_table(identifier).append(rows)
                        break
                    except CommitFailedException:
                        continue  # the base moved: reload and retry
                else:
                    raise AssertionError(f"writer {n}: no commit in {MAX_ATTEMPTS} attempts")
                landed[n] += 1
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert failures == []
    assert [landed[n] for n in range(writers)] == [appends] * writers  # nobody starved
    table = setup.load_table(identifier)
    assert len(table.snapshots()) == writers * appends  # none lost, none applied twice
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == sorted(
        n * 100 + i for n in range(writers) for i in range(appends))
