"""Run ``hms-gateway check-config`` on configuration laid out in a directory, in-process.

Used by the doc-snippet test (every YAML block of the docs) and the Helm chart test (the files
the chart would mount under ``/etc/hms-gateway``). In-process because a subprocess per block
would cost a Python start-up each; the CLI's ``main`` is called exactly as the console script
calls it, and the root logger it reconfigures is restored afterwards.
"""

from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path

import yaml


def check_config(gateway_file: Path, *options: str) -> tuple[int, str]:
    """``hms-gateway check-config --config gateway_file [options]``: (exit status, stdout + stderr)."""
    from gateway.cli import main

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = main(["check-config", "--config", str(gateway_file), *options])
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    return status, out.getvalue()


def merge_values(base, override):
    """Helm's merge of values files: mappings merge key by key, anything else (lists included)
    is replaced by the override."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge_values(base.get(key), value) if key in base else value
        return merged
    return override


def write_chart_config(values: dict, etc: Path, *, certificate: Path, private_key: Path, users_file: Path) -> Path:
    """Lay out ``etc`` as the chart's ConfigMap and Secrets would under ``/etc/hms-gateway``
    (gateway.yaml, topologies/<name>.yaml, the TLS pair, users.htpasswd); returns gateway.yaml."""
    import shutil

    gw = values["config"]["gateway"]
    topologies = etc / gw["topologies_dir"]
    topologies.mkdir(parents=True, exist_ok=True)
    (etc / "gateway.yaml").write_text(yaml.safe_dump(gw))
    for name, topology in values["config"]["topologies"].items():
        (topologies / f"{name}.yaml").write_text(yaml.safe_dump(topology))
    for source, target in ((certificate, gw["tls"]["certificate"]), (private_key, gw["tls"]["private_key"])):
        (etc / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, etc / target)
    shutil.copy(users_file, etc / "users.htpasswd")
    return etc / "gateway.yaml"
