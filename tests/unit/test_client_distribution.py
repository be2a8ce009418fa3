"""Where the server, the client distribution and the demo meet (issue 41): the client
(clients/python) uses the Thrift wire core (gateway/thrift, packaged into its wheel as
``hms_gateway_client._thrift``) and nothing else of the server; that core needs thriftpy2 alone
and imports itself relatively; the server and the client never import the demo; and
``hms-gateway tunnel`` / ``hms-gateway-tunnel`` say what to install when a part is missing."""

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


def test_the_server_imports_neither_the_demo_nor_the_client_but_to_find_the_tunnel():
    found = {(str(path.relative_to(ROOT)), module) for path in sorted((ROOT / "gateway").rglob("*.py"))
             for level, module in _imports(path) if level == 0 and _top(module) in ("demo", "hms_gateway_client")}
    assert found == {("gateway/cli.py", "hms_gateway_client.cli")}


def test_the_client_wheel_carries_the_wire_core_from_its_one_place():
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())
    package_dir = project["tool"]["setuptools"]["package-dir"]
    assert (CLIENT / package_dir["hms_gateway_client._thrift"]).resolve() == ROOT / "gateway" / "thrift"
    assert "hms_gateway_client._thrift" in project["tool"]["setuptools"]["packages"]
    required = {dep.split(">")[0].split("[")[0].split("=")[0] for dep in project["project"]["dependencies"]}
    assert required == {"thriftpy2", "urllib3"}, "the client's base install pulls more than it needs"
    assert project["project"]["scripts"] == {"hms-gateway-tunnel": "hms_gateway_client.cli:main"}


class _NotInstalled:
    """A meta path finder for which the client distribution is not installed."""

    def find_spec(self, name, path=None, target=None):
        if _top(name) == "hms_gateway_client":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_the_server_cli_says_to_install_the_client_for_its_tunnel(monkeypatch, capsys):
    for name in [name for name in sys.modules if _top(name) == "hms_gateway_client"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NotInstalled(), *sys.meta_path])
    assert server_cli.main(["tunnel", "--gateway", "https://gw:8443/gateway/t/hms", "--auth", "basic"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tunnel: hms-gateway tunnel is part of the client distribution")
    assert "pip install 'hms-gateway-client[tunnel]'" in err and "hms-gateway-tunnel" in err


@pytest.mark.parametrize("library", ["aiohttp", "uvloop"])
def test_without_the_tunnel_extra_both_commands_name_it(library, monkeypatch, capsys):
    import hms_gateway_client
    from hms_gateway_client import cli as client_cli

    monkeypatch.delitem(sys.modules, "hms_gateway_client.tunnel", raising=False)
    monkeypatch.delattr(hms_gateway_client, "tunnel", raising=False)
    monkeypatch.setitem(sys.modules, library, None)  # as if the extra was not installed
    assert client_cli.main(["--gateway", "https://gw:8443/gateway/t/hms", "--auth", "basic"]) == 2
    assert server_cli.main(["tunnel", "--gateway", "https://gw:8443/gateway/t/hms", "--auth", "basic"]) == 2
    for line in capsys.readouterr().err.splitlines():
        assert line == f"tunnel: the tunnel needs {library}, which is not installed: " \
                       "pip install 'hms-gateway-client[tunnel]'"
