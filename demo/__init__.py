"""The demo `make run` starts, from the repository (it is no part of the installed ``gateway``
package or the image): an embedded Hive Metastore 2.3.10 (from the PySpark jars), the PySpark
job that seeds it (:mod:`demo.seed_job`), the local S3 and KDC servers of its variants, and the
launcher (``python -m demo``, :mod:`demo.launcher`).

The gateway it serves is the installed ``gateway`` package; its tunnel and client are the
client distribution's (``clients/python``). Both are installed by ``make run``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CHECKOUT", "child_env", "module_command"]

#: The repository the demo runs from: its child processes import ``demo`` from here.
CHECKOUT = Path(__file__).resolve().parent.parent


def module_command(module: str, *args: str) -> list[str]:
    """``python -m <module> args…`` with this interpreter (run it with :func:`child_env`)."""
    return [sys.executable, "-m", module, *args]


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) with :data:`CHECKOUT` first on
    ``PYTHONPATH``: the demo's modules are not installed, wherever the child's working directory is."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT), base.get("PYTHONPATH")]))
    return base
