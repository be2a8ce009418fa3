"""The ``hms-gateway`` console script: ``serve``, ``certs``, ``check-config``, ``policy check``.
The tunnel is not the server's: it is the client distribution's ``hms-gateway-tunnel``
(``clients/python``), and ``hms-gateway tunnel`` says so.

Exit status: 0 done, 1 ``policy check`` denied, 2 a configuration or usage error (one line on
stderr naming the file, the key and the reason), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata
from pathlib import Path

from gateway.config import (
    ConfigError,
    GatewayConfig,
    ServiceConfig,
    TopologyConfig,
    load_gateway_config,
    load_topologies,
)

#: Where the gateway file is looked for without ``--config``, in this order (the first that is
#: set or exists): the environment variable, the packaged location, the source tree's.
CONFIG_ENV = "HMS_GATEWAY_CONFIG"
SYSTEM_CONFIG = Path("/etc/hms-gateway/gateway.yaml")
SOURCE_TREE_CONFIG = Path("config/gateway.yaml")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
CONFIG_HELP = (f"the gateway file (default: ${CONFIG_ENV}, else {SYSTEM_CONFIG}, else "
               f"{SOURCE_TREE_CONFIG} if it exists)")


def default_config_path() -> Path:
    """The gateway file to use without ``--config``: ``$HMS_GATEWAY_CONFIG`` when set, else
    ``/etc/hms-gateway/gateway.yaml`` when it exists, else ``config/gateway.yaml`` when it
    exists. Raises :class:`ConfigError` when none applies."""
    given = os.environ.get(CONFIG_ENV)
    if given:
        return Path(given)
    for path in (SYSTEM_CONFIG, SOURCE_TREE_CONFIG):
        if path.is_file():
            return path
    raise ConfigError("--config", "", f"no gateway file given: pass --config, set {CONFIG_ENV}, or "
                                      f"create {SYSTEM_CONFIG}")


def _config_path(args: argparse.Namespace) -> Path:
    return args.config if args.config is not None else default_config_path()


def _version() -> str:
    try:
        return metadata.version("hms-gateway")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _load(path: Path) -> tuple[GatewayConfig, dict[str, TopologyConfig]]:
    config = load_gateway_config(path)
    return config, load_topologies(config.topologies_dir)


def _check(path: Path) -> tuple[GatewayConfig, dict[str, TopologyConfig]]:
    """Everything ``serve`` validates before binding: files, topologies, TLS material."""
    from gateway.tls import server_ssl_context
    from gateway.topology import build_topology

    config, topologies = _load(path)
    server_ssl_context(config.tls, config.source)
    for topology in topologies.values():
        build_topology(topology, config)  # what only the whole configuration can tell
    return config, topologies


def cmd_check_config(args: argparse.Namespace) -> int:
    from gateway.replicas import replica_warnings

    config, topologies = _check(_config_path(args))
    for name, topology in topologies.items():
        for service in topology.services:
            target = ", ".join(service.upstream.urls) if service.upstream else service.kind
            print(f"ok: /gateway/{name}/{service.path} -> {target}")
    for warning in replica_warnings(topologies, args.replicas):
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT; exit 2 with one line when a listener cannot bind."""
    from gateway.observability.log_format import configure_logging
    from gateway.server import Gateway, ListenError, run, write_ports_file

    path = _config_path(args)
    config, topologies = _check(path)
    configure_logging(config.logging.format, args.log_level or config.logging.level)
    from gateway.workers import supervise, worker_count

    try:
        if worker_count(config) > 1:
            return supervise(path, config, args.log_level, args.ports_file)
        report = None
        if args.ports_file is not None:
            def report(gateway: Gateway) -> None:
                write_ports_file(args.ports_file, gateway.gateway_port, gateway.management_port)
        run(Gateway(config, topologies), report)
    except ListenError as exc:
        print(f"serve: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_certs(args: argparse.Namespace) -> int:
    from gateway.certs import write_client_certificate, write_dev_certificates

    paths = write_dev_certificates(args.out, args.hostname)
    print(f"wrote {paths.certificate} and {paths.private_key} (CA: {paths.ca_certificate})")
    for name in args.client:
        cert, key = write_client_certificate(args.out, name)
        print(f"wrote client certificate {cert} and {key} (CN={name})")
    return 0


#: What ``hms-gateway tunnel`` says: the tunnel is a client, installed where clients run, and the
#: server's package does not carry it (its image has no client).
TUNNEL_MOVED = ("the tunnel is not part of the server: it is the client distribution's console script "
                "hms-gateway-tunnel, with the same options (pip install 'hms-gateway-client[tunnel]'; "
                "clients/python in the repository)")


def cmd_tunnel(args: argparse.Namespace) -> int:
    """Exit 2 with one line saying where the tunnel lives (:data:`TUNNEL_MOVED`)."""
    print(f"tunnel: {TUNNEL_MOVED}", file=sys.stderr)
    return 2


def _policy_services(topology: TopologyConfig, service: str | None) -> list[ServiceConfig]:
    """The services of ``topology`` with a ``policy_file`` (only ``service``'s when given)."""
    attached = [s for s in topology.services if s.policy_file is not None]
    if service is not None:
        attached = [s for s in attached if s.path == service.strip("/")]
    return attached


def cmd_policy_check(args: argparse.Namespace) -> int:
    """Prints the decision and the deciding policy id (-1: none); exit 0 allowed, 1 denied.

    The user and groups go through the topology's identity assertion (principal mapping, then
    group mapping: :class:`gateway.providers.identity.IdentityAsserter`), as the running
    gateway does, before the policy decides.
    """
    from gateway.policy import Resource, load_policy_file
    from gateway.providers.authentication.base import Principal
    from gateway.providers.identity import IdentityAsserter

    config, topologies = _load(_config_path(args))
    if args.topology is None:  # the one topology a policy applies to, if there is only one
        candidates = [name for name, t in topologies.items() if _policy_services(t, args.service)]
        if len(candidates) != 1:
            reason = ("no topology has a service with a policy_file: no catalog policy applies"
                      if not candidates else f"several topologies have a policy_file: name one of "
                                             f"{', '.join(candidates)}")
            raise ConfigError(config.topologies_dir, "--topology", reason)
        args.topology = candidates[0]
    topology = topologies.get(args.topology)
    if topology is None:
        raise ConfigError(config.topologies_dir, "--topology",
                          f"no topology {args.topology!r} (there are: {', '.join(topologies)})")
    attached = _policy_services(topology, args.service)
    if len(attached) != 1:
        if attached:
            key, reason = "--service", ("several services have a policy_file: name one of "
                                        + ", ".join(s.path for s in attached))
        elif args.service is not None:
            with_policy = [s.path for s in topology.services if s.policy_file is not None]
            key, reason = "--service", (f"no service {args.service.strip('/')!r} with a policy_file"
                                        + (f" (there are: {', '.join(with_policy)})" if with_policy else ""))
        else:
            key, reason = "services", ("no service of this topology has a policy_file: no catalog "
                                       "policy applies to it (docs/security.md, \"Catalog policies\")")
        raise ConfigError(topology.source or topology.name, key, reason)
    engine = load_policy_file(attached[0].policy_file)
    groups = frozenset(g for g in (args.groups or "").split(",") if g)
    identity = IdentityAsserter(topology.providers.identity_assertion).mapped(
        Principal(args.user, "policy-check", groups))
    try:
        decision = engine.evaluate(identity.user, identity.groups,
                                   Resource(args.database, args.table, args.column), args.access)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    verdict = "allowed" if decision.allowed else "denied"
    name = f" ({decision.policy_name})" if decision.policy_name else ""
    print(f"{verdict} policy={decision.policy_id}{name}")
    for line in _restriction_lines(engine, identity.user, identity.groups, args.database, args.table, args.column):
        print(line)
    if args.schema is not None:
        stated = _read_restrictions_line(engine, identity, args)
        if stated is None:
            return 2
        print(stated[0])
        return 0 if decision.allowed and stated[1] else 1
    return 0 if decision.allowed else 1


def _read_restrictions_line(engine, identity, args: argparse.Namespace) -> tuple[str, bool] | None:
    """``(line, loads)``: ``read-restrictions: <JSON>`` as an Iceberg load by a trusted engine
    for the user would carry it over the current schema of the table metadata file
    ``args.schema`` (``none`` when nothing restricts), or ``read-restrictions: refused: <why>``
    (``loads`` False: such a load is 403). None, with one line on stderr, when the file does
    not read or ``--table`` is missing."""
    import json

    from gateway.policy.hive_sql import Unstatable
    from gateway.policy.read_restrictions import caller_restrictions
    from gateway.policy.view import CatalogView

    if args.table is None:
        print("error: --schema needs --table", file=sys.stderr)
        return None
    try:
        from pyiceberg.table.metadata import TableMetadataUtil

        schema = TableMetadataUtil.parse_raw(args.schema.read_bytes()).schema()
    except Exception as exc:  # OSError, pydantic's ValidationError, JSON errors
        print(f"error: --schema {args.schema}: not an Iceberg table metadata file ({str(exc).splitlines()[0][:200]})",
              file=sys.stderr)
        return None
    view = CatalogView(engine, identity.user, identity.groups)
    try:
        restrictions = caller_restrictions(view, args.database, args.table, schema)
    except Unstatable as exc:
        return f"read-restrictions: refused: {exc}", False
    return "read-restrictions: " + ("none" if restrictions is None else json.dumps(restrictions)), True


def _restriction_lines(engine, user: str, groups: frozenset[str], database: str, table: str | None,
                       column: str | None) -> list[str]:
    """``row-filter policy=N (name): <Hive SQL>`` for a table and ``mask policy=N (name): <type>
    -> <Hive expression>`` for a column, when a Ranger row-filter or data-mask policy decides
    for the user (an empty filter or ``MASK_NONE`` exempts: shown too)."""
    from gateway.policy.restrictions import mask_expression

    lines = []
    if table is None:
        return lines
    row_filter = engine.row_filter(user, groups, database, table)
    if row_filter.policy_id != -1:
        lines.append(f"row-filter policy={row_filter.policy_id} ({row_filter.policy_name}): "
                     f"{row_filter.filter_expr or 'none (exempt)'}")
    if column is not None:
        mask = engine.data_mask(user, groups, database, table, column)
        if mask.policy_id != -1:
            expression = mask_expression(mask, column) or "(no expression the gateway can state)"
            lines.append(f"mask policy={mask.policy_id} ({mask.policy_name}): {mask.mask_type} -> {expression}")
    return lines


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)  # options every subcommand also accepts
    common.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default=argparse.SUPPRESS,
                        help="DEBUG, INFO, WARNING or ERROR (default: the gateway file's logging.level)")
    parser = argparse.ArgumentParser(
        prog="hms-gateway", parents=[common],
        description="Authenticating HTTPS gateway for the Hive Metastore.",
        epilog=f"Without --config, the gateway file is ${CONFIG_ENV}, else {SYSTEM_CONFIG}, else "
               f"{SOURCE_TREE_CONFIG} if it exists. Exit status: 0 done, 1 policy check denied, "
               "2 configuration or usage error.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, func, *, config: bool = True, parent=sub) -> argparse.ArgumentParser:
        p = parent.add_parser(name, help=help, description=help, parents=[common])
        if config:
            p.add_argument("--config", type=Path, default=None, metavar="FILE", help=CONFIG_HELP)
        p.set_defaults(func=func)
        return p

    p = command("serve", "serve the gateway until SIGTERM or SIGINT (SIGHUP re-reads the topologies)", cmd_serve)
    p.add_argument("--ports-file", type=Path, default=None, metavar="FILE",
                   help='once both listeners listen, write their ports as JSON ({"gateway": N, '
                        '"management": M}) to FILE: what port 0 in the gateway file became')
    p = command("check-config", "validate the gateway file, its topologies and TLS files, print the services, "
                "and exit (status 2 with the file, key and reason on an error)", cmd_check_config)
    p.add_argument("--replicas", type=int, default=1, metavar="N",
                   help="warn about per-replica state when N gateways run (the chart's replicaCount or "
                        "autoscaling.maxReplicas; default 1)")

    p = command("certs", "write a development CA and server certificate", cmd_certs, config=False)
    p.add_argument("--out", type=Path, default=Path("certs"), metavar="DIR",
                   help="directory to write ca.crt, server.crt and their keys to (default: certs)")
    p.add_argument("--hostname", action="append", default=[], help="extra SAN (repeatable)")
    p.add_argument("--client", action="append", default=[], metavar="NAME",
                   help="also issue a client certificate CN=NAME for mTLS (repeatable)")

    p = command("tunnel", "not the server's: the tunnel is the client distribution's hms-gateway-tunnel "
                "(pip install 'hms-gateway-client[tunnel]')", cmd_tunnel, config=False)
    p.set_defaults(any_options=True)  # whatever they are, the answer is where the tunnel lives

    p = sub.add_parser("policy", help="catalog policies (Apache Ranger's Hive model)", parents=[common])
    policy_sub = p.add_subparsers(dest="policy_command", required=True, metavar="COMMAND")
    p = command("check", "which policy allows or denies an access, and why, and which row filter and "
                "mask apply (after the topology's identity assertion)", cmd_policy_check, parent=policy_sub)
    p.add_argument("--topology", help="topology name (default: the only one with a policy_file)")
    p.add_argument("--service", metavar="PATH",
                   help="service path (needed when several services have a policy_file)")
    p.add_argument("--user", required=True, help="the authenticated user (principal) name")
    p.add_argument("--groups", default="", help="comma-separated groups the authentication gives")
    p.add_argument("--database", required=True, help="database name")
    p.add_argument("--table", help="table name (default: the database itself)")
    p.add_argument("--column", help="column name (default: the table itself)")
    p.add_argument("--access", default="_any",
                   help="select update create drop alter index lock read write all, or _any (default)")
    p.add_argument("--schema", type=Path, default=None, metavar="FILE",
                   help="an Iceberg table metadata file of --table: also print the read-restrictions a "
                        "trusted engine's load for the user carries over its current schema")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "any_options", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.log_level = getattr(args, "log_level", None)
    return run_command(args.func, args)


def run_command(func, args: argparse.Namespace) -> int:
    """``func(args)``'s exit status, with text logging at ``args.log_level`` until a gateway file
    says otherwise: 2 and one line on stderr for a :class:`ConfigError`, 130 when interrupted.
    (``python -m demo`` runs through here too.)"""
    from gateway.observability.log_format import configure_logging

    configure_logging("text", args.log_level or "INFO")
    try:
        return func(args)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
