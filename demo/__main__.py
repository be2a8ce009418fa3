"""``python -m demo`` from the repository (what `make run` runs): embedded HMS + PySpark sample
data + the gateway (:func:`demo.launcher.run_demo`).

Exit status: 0 done, 2 a configuration or usage error (one line on stderr naming the file, the
key and the reason), 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway.cli import CONFIG_HELP, LOG_LEVELS, default_config_path, run_command


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m demo", description="embedded HMS + PySpark sample data + the gateway")
    p.add_argument("--config", type=Path, default=None, metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default=None,
                   help="DEBUG, INFO, WARNING or ERROR (default: the gateway file's logging.level)")
    p.add_argument("--workdir", type=Path, default=Path("var/demo"), metavar="DIR",
                   help="the demo's HMS, warehouse and logs (default: var/demo)")
    p.add_argument("--hms-port", type=int, default=9083, metavar="PORT",
                   help="port of the embedded Hive Metastore (default: 9083)")
    p.add_argument("--storage", choices=("file", "s3"), default="file",
                   help="where the demo's Iceberg table lives: file (the HMS warehouse, default) or s3 "
                        "(a local S3 server, moto: pip install -e '.[demo-s3]'; docs/iceberg.md)")
    p.add_argument("--kerberos", action="store_true",
                   help="a Kerberized metastore: a local KDC, SASL on HMS, the gateway as a proxy user "
                        "(pip install -e '.[demo-kerberos]'; docs/operations.md, \"Fronting a Kerberized metastore\")")
    return p


def _run(args: argparse.Namespace) -> int:
    from demo.launcher import run_demo

    return run_demo(args.config if args.config is not None else default_config_path(), workdir=args.workdir,
                    hms_port=args.hms_port, storage=args.storage, kerberos=args.kerberos)


def main(argv: list[str] | None = None) -> int:
    return run_command(_run, _parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
