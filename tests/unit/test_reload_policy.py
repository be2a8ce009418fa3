"""Hot reload follows a topology's policy file: a grant revoked in the policy file alone (the
topology file untouched) is refused from the next poll on, and a broken policy file keeps the
previous version serving and is reported once."""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

from gateway.certs import write_dev_certificates
from gateway.config import load_gateway_config, load_topologies
from gateway.reload import TopologyReloader
from gateway.thrift.schema import load_schema
from gateway.topology import Router, build_topology

TOPOLOGY = """providers: {authentication: [{type: htpasswd, users_file: ../users}]}
services: [{kind: glue, path: glue, upstream: {urls: ["thrift://127.0.0.1:9"]}, policy_file: ../catalog.yaml}]
"""
GRANT = """policies:
  - {id: 1, name: ana reads sales, resources: {database: [sales], table: ["*"], column: ["*"]},
     allow: [{users: [ana], accesses: [select]}]}
"""
REVOKED = "policies: []\n"


def _workdir(tmp: Path) -> Path:
    write_dev_certificates(tmp / "certs")
    (tmp / "topologies").mkdir()
    (tmp / "users").write_text("")
    (tmp / "catalog.yaml").write_text(GRANT)
    (tmp / "topologies" / "lake.yaml").write_text(TOPOLOGY)
    gateway = tmp / "gateway.yaml"
    gateway.write_text("tls: {certificate: certs/server.crt, private_key: certs/server.key}\n")
    return gateway


def _rewrite(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))  # a coarse clock must still see a change


def _ana_may_read(router: Router) -> bool:
    _, service = router.resolve("lake", "glue")
    return service.handler.policy.visible("ana", (), "sales", "t")


async def test_a_grant_revoked_in_the_policy_file_alone_is_applied_at_the_next_poll(tmp_path, caplog):
    config = load_gateway_config(_workdir(tmp_path))
    build = functools.partial(build_topology, gateway=config, schema=load_schema())
    topologies = load_topologies(config.topologies_dir)
    router = Router({name: build(t) for name, t in topologies.items()})
    reloader = TopologyReloader(config.topologies_dir, router, topologies, build)
    try:
        assert _ana_may_read(router)
        assert not await reloader.reload()  # nothing changed yet

        _rewrite(tmp_path / "catalog.yaml", REVOKED)
        assert await reloader.reload()
        assert not _ana_may_read(router)

        caplog.set_level(logging.ERROR, logger="gateway.reload")
        _rewrite(tmp_path / "catalog.yaml", "policies: [{id: oops}]\n")
        assert not await reloader.reload()
        assert not await reloader.reload()
        assert len([r for r in caplog.records if "previous version kept" in r.getMessage()]) == 1
        assert not _ana_may_read(router)  # the previous version keeps serving
    finally:
        await router.close()


FILTERED = GRANT + """  - {id: 2, name: ana sees EU rows, resources: {database: [sales], table: [orders]},
     row_filter: [{users: [ana], filter: "region = 'EU'"}]}
"""
BAD_FILTER = GRANT + """  - {id: 2, name: ana sees her rows, resources: {database: [sales], table: [orders]},
     row_filter: [{users: [ana], filter: "dept = '${{USER.dept}}'"}]}
"""


async def test_a_bad_row_filter_at_reload_keeps_the_previous_filter(tmp_path, caplog):
    """Issue 39: a row-filter policy the gateway does not evaluate is refused at reload, naming
    the file, the policy and the key; the previous filter keeps applying."""
    workdir = _workdir(tmp_path)
    (tmp_path / "catalog.yaml").write_text(FILTERED)
    config = load_gateway_config(workdir)
    build = functools.partial(build_topology, gateway=config, schema=load_schema())
    topologies = load_topologies(config.topologies_dir)
    router = Router({name: build(t) for name, t in topologies.items()})
    reloader = TopologyReloader(config.topologies_dir, router, topologies, build)

    def ana_filter() -> str | None:
        _, service = router.resolve("lake", "glue")
        return service.handler.policy.row_filter("ana", (), "sales", "orders").filter_expr

    try:
        assert ana_filter() == "region = 'EU'"
        caplog.set_level(logging.ERROR, logger="gateway.reload")
        _rewrite(tmp_path / "catalog.yaml", BAD_FILTER)
        assert not await reloader.reload()
        logged = [r.getMessage() for r in caplog.records if "previous version kept" in r.getMessage()]
        assert len(logged) == 1
        assert "catalog.yaml" in logged[0] and "policies[1].row_filter[0].filter" in logged[0]
        assert "policy 2" in logged[0]
        assert ana_filter() == "region = 'EU'"  # the previous version keeps serving
    finally:
        await router.close()
