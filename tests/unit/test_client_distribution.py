"""Where the server, the client distribution and the demo meet (issue 41): the client
(clients/python) uses the Thrift wire core (gateway/thrift, packaged into its wheel as
``hms_gateway_client._thrift``) and nothing else of the server; that core needs thriftpy2 alone
and imports itself relatively; the server imports nothing of the client (issue 48: the tunnel
is the client's ``hms-gateway-tunnel``, and ``hms-gateway tunnel`` says so) and neither imports
the demo; ``hms-gateway-tunnel`` says what to install when a part is missing."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

from gateway import cli as server_cli
from tests.support.source import parse as parse_source

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(relative level, module) of every import in ``path``, wherever it stands."""
    found = []
    for node in ast.walk(parse_source(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


def _top(module: str) -> str:
    return module.split(".")[0]


def test_the_client_imports_nothing_of_the_server_but_the_packaged_wire_core():
    modules = sorted((CLIENT / "hms_gateway_client").rglob("*.py"))
    assert len(modules) >= 7
    wrong = {f"{path.relative_to(ROOT)}: {module}" for path in modules for level, module in _imports(path)
             if level == 0 and _top(module) in ("gateway", "demo")}
    assert not wrong, wrong


def test_the_wire_core_needs_thriftpy2_alone_and_imports_itself_relatively():
    modules = sorted((ROOT / "gateway" / "thrift").glob("*.py"))
    allowed = set(sys.stdlib_module_names) | {"thriftpy2"}
    wrong = {f"{path.name}: {module}" for path in modules for level, module in _imports(path)
             if level == 0 and _top(module) not in allowed}
    assert not wrong, wrong


def test_the_server_imports_neither_the_demo_nor_the_client():
    """Any import, module level or deferred (``_imports`` walks the whole tree)."""
    found = {(str(path.relative_to(ROOT)), module) for path in sorted((ROOT / "gateway").rglob("*.py"))
             for level, module in _imports(path) if level == 0 and _top(module) in ("demo", "hms_gateway_client")}
    assert found == set()


def test_the_import_check_sees_a_deferred_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from hms_gateway_client.cli import main\n")
    assert _imports(module) == [(0, "hms_gateway_client.cli")]


def test_the_client_wheel_carries_the_wire_core_from_its_one_place():
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())
    package_dir = project["tool"]["setuptools"]["package-dir"]
    assert (CLIENT / package_dir["hms_gateway_client._thrift"]).resolve() == ROOT / "gateway" / "thrift"
    assert "hms_gateway_client._thrift" in project["tool"]["setuptools"]["packages"]
    required = {dep.split(">")[0].split("[")[0].split("=")[0] for dep in project["project"]["dependencies"]}
    assert required == {"thriftpy2", "urllib3"}, "the client's base install pulls more than it needs"
    assert project["project"]["scripts"] == {"hms-gateway-tunnel": "hms_gateway_client.cli:main"}


def test_the_server_cli_says_where_the_tunnel_lives(monkeypatch, capsys):
    """With the client installed beside it (as here) or not, ``hms-gateway tunnel`` runs no
    tunnel and loads nothing of the client: it names the client's command and its install."""
    for name in [name for name in sys.modules if _top(name) == "hms_gateway_client"]:
        monkeypatch.delitem(sys.modules, name)
    assert server_cli.main(["tunnel", "--gateway", "https://gw:8443/gateway/t/hms", "--auth", "basic"]) == 2
    assert [name for name in sys.modules if _top(name) == "hms_gateway_client"] == []
    err = capsys.readouterr().err
    assert err.startswith("tunnel: the tunnel is not part of the server: it is the client distribution's "
                          "console script hms-gateway-tunnel")
    assert "pip install 'hms-gateway-client[tunnel]'" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("library", ["aiohttp", "uvloop"])
def test_without_the_tunnel_extra_the_tunnel_names_it(library, monkeypatch, capsys):
    import hms_gateway_client
    from hms_gateway_client import cli as client_cli

    monkeypatch.delitem(sys.modules, "hms_gateway_client.tunnel", raising=False)
    monkeypatch.delattr(hms_gateway_client, "tunnel", raising=False)
    monkeypatch.setitem(sys.modules, library, None)  # as if the extra was not installed
    assert client_cli.main(["--gateway", "https://gw:8443/gateway/t/hms", "--auth", "basic"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"tunnel: the tunnel needs {library}, which is not installed: "
                                                    "pip install 'hms-gateway-client[tunnel]'"]
