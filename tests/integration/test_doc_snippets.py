"""Every fenced block of README.md, CONTRIBUTING.md and docs/*.md works as printed (issue 25).

Each block carries a classification (``<!-- snippet: KIND ... -->``, CONTRIBUTING.md); a block
without one fails :func:`test_every_block_is_classified`. Then, by kind:

* ``topology``, ``provider``, ``gateway`` (whole files, or ``fragment``s merged into a minimal
  valid file): written into a sandbox laid out as the repository's ``config/`` and checked by
  ``hms-gateway check-config`` (in-process, :mod:`tests.support.config_check`). Files a block
  names (users file, policy file, CA, keys, ``file:`` secrets) are created in the sandbox, absolute
  paths re-rooted there; a block may hold several files under ``# <path>`` header lines.
* ``policy``: loaded by the policy engine (``gateway.policy.load_policy_file``).
* ``helm-values``: merged over the chart's values.yaml as Helm merges, validated by the chart's
  JSON schema, and the configuration the chart would mount checked by check-config.
* ``run``: shell (one command per line, continuations joined; a block's commands in one bash
  session), Python, and JavaScript (an ES module run by Node.js, with tests/node's
  ``node_modules`` and ``NODE_EXTRA_CA_CERTS`` the CA), run as printed against one real gateway
  serving the demo's own configuration (config/gateway.yaml and config/topologies, with free
  ports) in front of a real HMS of this module's own, seeded as ``make run`` seeds the demo's
  (the session's metastore holds what other modules wrote: the change feed's history shows it), from a directory laid
  out as the repository after ``make run`` (``certs/ca.crt``, ``var/demo/aws-credentials``). The
  environment holds nothing a block needs: a program gets what the ``export`` lines of the shell
  blocks before it in its section set. ``localhost:8443`` and ``9464`` in a block become the
  test's ports. Output the doc prints (under a shell command ``# [1,...`` or ``# → ...``; in
  Python ``# → ...`` lines and in JavaScript ``// → ...`` lines, the whole stdout) is compared
  exactly, once databases other tests created in the shared metastore are left out of listings.
  ``interrupt="S"``: a block that streams until Ctrl-C, interrupted after S seconds.
* ``not-run``: listed with its reason by :func:`test_not_run_blocks_are_listed`.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from demo.aws_keys import CREDENTIALS_ENV, CREDENTIALS_FILE
from demo.tokens import KEY_ENV
from tests.support.config_check import check_config, merge_values, write_chart_config
from tests.support.config_sandbox import Sandbox, shipped_topologies, write_materials
from tests.support.doc_snippets import (
    ROOT,
    MarkerError,
    Snippet,
    collect,
    parse,
    section_blocks,
    shell_commands,
    transcript_commands,
)

SNIPPETS = collect()
CONFIG_KINDS = {"topology", "provider", "gateway", "policy", "helm-values"}
CHART = ROOT / "helm" / "hms-gateway"
DEMO_USERS = {"admin": "admin-password", "etl": "etl-password"}
#: Programs a ``run`` block may hold: how each runs (file name; command) and how it prints its output.
PROGRAMS = {"python": ("snippet.py", [sys.executable], "# →"), "javascript": ("snippet.mjs", ["node"], "// →")}
#: Where a JavaScript block's imports (iceberg-js) resolve: tests/node's packages (npm ci).
NODE_MODULES = ROOT / "tests" / "node" / "node_modules"
#: What a reader's shell may hold that a block must not rely on: it sets what it needs itself.
UNSET = ("HMS_PASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
         KEY_ENV, CREDENTIALS_ENV)

def _id(snippet: Snippet) -> str:
    return snippet.where


def of_kind(*kinds: str) -> list[Snippet]:
    return [s for s in SNIPPETS if s.kind in kinds]


# --- classification ----------------------------------------------------------------------------


def test_every_block_is_classified():
    """A new block without a marker fails here: say what it is, or why it cannot run."""
    unclassified = [f"{s.where} ({s.lang or 'no language'})" for s in SNIPPETS if s.kind is None]
    assert not unclassified, ("fenced blocks without a `<!-- snippet: KIND -->` line before them "
                              "(kinds: CONTRIBUTING.md):\n" + "\n".join(unclassified))


def test_kinds_fit_the_blocks():
    wrong = []
    for s in SNIPPETS:
        if s.kind in CONFIG_KINDS and s.lang not in ("yaml", "json"):
            wrong.append(f"{s.where}: {s.kind} block in {s.lang or 'no language'}")
        if s.kind == "run" and s.lang not in ("sh", "bash", *PROGRAMS):
            wrong.append(f"{s.where}: run block in {s.lang or 'no language'}")
        if s.kind == "not-run" and s.lang == "yaml":
            wrong.append(f"{s.where}: YAML is always validated; mark it fragment instead")
    assert not wrong, "\n".join(wrong)


def test_not_run_blocks_are_listed():
    """The blocks this suite cannot run, with the reason each doc gives."""
    listed = [f"{s.where}: {s.attrs['reason']}" for s in of_kind("not-run")]
    print("\nnot run here:\n" + "\n".join(listed))
    assert listed and all(s.attrs.get("reason") for s in of_kind("not-run"))


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if "file" in s.attrs], ids=_id)
def test_block_shows_its_file_as_it_is(snippet: Snippet):
    """``file="config/examples/..."``: the block is that file, which users copy; they must not drift."""
    assert snippet.body.strip() == (ROOT / snippet.attrs["file"]).read_text().strip(), \
        f"{snippet.where} differs from {snippet.attrs['file']}"


@pytest.mark.parametrize("text,error", [
    ("<!-- snippet: nonsense -->\n```sh\nls\n```\n", "kind must be one of"),
    ("<!-- snippet: not-run -->\n```sh\nls\n```\n", "needs reason"),
    ("<!-- snippet: run -->\n\ntext\n```sh\nls\n```\n", "not followed by a fenced block"),
    ("<!-- snippet: topology fragmnt -->\n```yaml\na: 1\n```\n", "unknown flag"),
])
def test_malformed_markers_are_refused(text, error):
    with pytest.raises(MarkerError, match=error):
        parse(text, "x.md")


def test_parser_reads_markers_indents_and_output_lines():
    text = ("1. step\n\n   <!-- snippet: run -->\n   ```sh\n   curl -s \\\n        URL\n"
            "   # [1,\"x\",2,1,{}]\n   # a comment\n   echo hi\n   ```\n\n```yaml\na: 1\n```\n")
    first, second = parse(text, "x.md")
    assert (first.kind, first.line, first.lang) == ("run", 4, "sh")
    assert second.kind is None and second.body == "a: 1\n"
    commands = shell_commands(first)
    assert [(c.command, c.expected) for c in commands] == [("curl -s URL", ['[1,"x",2,1,{}]']), ("echo hi", [])]


# --- YAML: check-config ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def materials(tmp_path_factory) -> dict[str, Path]:
    return write_materials(tmp_path_factory.mktemp("materials"))


@pytest.mark.parametrize("snippet", of_kind("topology", "provider", "gateway", "policy"), ids=_id)
def test_config_block_passes_check_config(snippet: Snippet, materials, tmp_path):
    sandbox = Sandbox(tmp_path, materials)
    sandbox.add_block(snippet)
    status, output = sandbox.check()
    assert status == 0, f"{snippet.where} ({snippet.kind}) as printed is refused:\n{output}"


@pytest.mark.parametrize("snippet", of_kind("transcript"), ids=_id)
def test_transcript_prints_as_shown(snippet: Snippet, materials, tmp_path):
    """Each ``$ hms-gateway ...`` line, run in a sandbox holding the configuration blocks of the
    block's section, prints exactly the lines under it and exits with the ``[N]`` shown."""
    sandbox = Sandbox(tmp_path, materials)
    for block in section_blocks(snippet, SNIPPETS, frozenset(CONFIG_KINDS - {"helm-values"})):
        sandbox.add_block(block)
    status, output = sandbox.check()
    assert status == 0, f"{snippet.where}: the configuration of its section is refused:\n{output}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    commands = transcript_commands(snippet)
    assert commands, f"{snippet.where}: no `$ ` command"
    for command in commands:
        assert command.command.startswith("hms-gateway "), f"{snippet.where}: {command.command!r}"
        run = subprocess.run(["bash", "-c", command.command], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
        assert run.stdout.rstrip("\n").split("\n") == command.expected, \
            f"{snippet.where}: {command.command}\nprinted:\n{run.stdout}{run.stderr}"
        if command.status is not None:
            assert run.returncode == command.status, f"{snippet.where}: {command.command}: exit {run.returncode}"


@pytest.mark.parametrize("snippet", of_kind("helm-values"), ids=_id)
def test_helm_values_block_passes_schema_and_check_config(snippet: Snippet, materials, tmp_path):
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    values = merge_values(defaults, yaml.safe_load(snippet.body))
    schema = json.loads((CHART / "values.schema.json").read_text())
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(schema).iter_errors(values)]
    assert not errors, f"{snippet.where}: the chart's schema refuses it:\n" + "\n".join(errors)
    gateway_file = write_chart_config(values, tmp_path / "etc", certificate=materials["certificate"],
                                      private_key=materials["private_key"], users_file=materials["users"])
    status, output = check_config(gateway_file)
    assert status == 0, f"{snippet.where}: the gateway refuses what the chart would mount:\n{output}"


# --- run: a real gateway with the demo's configuration ----------------------------------------


def lay_out_as_the_repository(workdir: Path) -> None:
    """What a block finds in the repository after `make run`, besides ``certs/`` (the gateway's
    own): ``config/`` as shipped, ``var/demo``'s keys (the values tests/conftest.py gave the
    gateway), ``.venv`` (this interpreter's)."""
    shutil.copytree(ROOT / "config", workdir / "config")
    demo = workdir / "var" / "demo"
    demo.mkdir(parents=True)
    (demo / CREDENTIALS_FILE).write_text(os.environ[CREDENTIALS_ENV])
    (demo / "gateway-token.key").write_text(os.environ[KEY_ENV] + "\n")
    (workdir / ".venv").symlink_to(Path(sys.executable).parent.parent, target_is_directory=True)


@pytest.fixture(scope="module")
def hms(tmp_path_factory):
    """This module's metastore, seeded by the demo's PySpark pipeline as ``make run``'s is: the
    blocks print what the demo holds, and no table, database or event of another module's."""
    from tests.support.hms import start_hms

    running = start_hms(tmp_path_factory.mktemp("hms-docs"), catalog=True)
    try:
        yield running
    finally:
        running.server.stop()


@pytest.fixture(scope="module")
def demo_gateway(hms, tmp_path_factory):
    """config/gateway.yaml and config/topologies/*.yaml as `make run` serves them, on free ports,
    in front of the session HMS (which holds the demo catalog). Its directory stands for the
    repository the blocks run in: ``certs/ca.crt`` is its CA, ``var/demo/aws-credentials`` the
    demo's access keys (the secrets tests/conftest.py put where the glue topology reads them)."""
    from demo.iceberg import write_demo_table_in_subprocess
    from tests.support.gateway import start_gateway

    demo = yaml.safe_load((ROOT / "config" / "gateway.yaml").read_text())
    extra = {k: v for k, v in demo.items() if k not in ("listeners", "tls", "topologies_dir")}
    topologies = shipped_topologies(f"thrift://{hms.host}:{hms.port}")
    workdir = tmp_path_factory.mktemp("doc-gateway")
    lay_out_as_the_repository(workdir)
    gw = start_gateway(workdir, topologies, DEMO_USERS, gateway_extra=extra)
    assert gw.ca_file == gw.workdir / "certs" / "ca.crt"  # what the blocks pass as --cacert / ca=
    try:
        # the Iceberg table `make run` writes through the gateway, written the same way (docs/iceberg.md reads it)
        write_demo_table_in_subprocess(gw.url(path="iceberg"), gw.ca_file, "etl", DEMO_USERS["etl"])
        yield gw
    finally:
        gw.stop()


#: The demo's databases (demo/seed_job.py; lakehouse: demo/iceberg.py), what the docs print.
DEMO_DATABASES = {"default", "hmshttptestdatabase", "lakehouse", "sales"}


@pytest.fixture
def foreign_databases(hms, demo_gateway) -> frozenset[str]:
    """Databases other tests created in the metastore (none but the blocks' own, now that the
    module has its own): left out of printed listings."""
    from tests.support.thrift_gen import hive_metastore_client

    client, transport = hive_metastore_client(hms.host, hms.port)
    try:
        names = set(client.get_all_databases())
    finally:
        transport.close()
    assert DEMO_DATABASES <= names, "the session metastore lacks the demo catalog"
    return frozenset(names - DEMO_DATABASES)


def localize(text: str, gw) -> str:
    """The demo's ports in a block become the test gateway's."""
    text = text.replace("localhost:8443", f"localhost:{gw.port}")
    return re.sub(r"(localhost|127\.0\.0\.1):9464", f"127.0.0.1:{gw.management_port}", text)


def tjson_list(node) -> bool:
    return (isinstance(node, list) and len(node) >= 2 and isinstance(node[0], str)
            and isinstance(node[1], int) and node[1] == len(node) - 2)


def matches(printed, actual, foreign: frozenset[str]) -> bool:
    """``printed`` (the doc) equals ``actual``, once the names in ``foreign`` (databases other
    tests created in the shared metastore) are taken out of ``actual``'s TJSON string lists."""
    if tjson_list(actual) and actual[0] == "str":
        kept = [x for x in actual[2:] if x not in foreign]
        actual = ["str", len(kept), *kept]
    if isinstance(printed, dict) and isinstance(actual, dict):
        return printed.keys() == actual.keys() and all(matches(printed[k], actual[k], foreign) for k in printed)
    if isinstance(printed, list) and isinstance(actual, list):
        return len(printed) == len(actual) and all(matches(p, a, foreign) for p, a in zip(printed, actual))
    return printed == actual


def program_line_matches(printed: str, actual: str, foreign: frozenset[str]) -> bool:
    """A line a program block prints (``# → ...``, ``// → ...``) equals the program's, once the names in
    ``foreign`` are taken out of a printed list of strings."""
    if printed == actual.strip():
        return True
    try:
        p, a = ast.literal_eval(printed), ast.literal_eval(actual.strip())
    except (ValueError, SyntaxError):
        return False
    return isinstance(a, list) and p == [x for x in a if not (isinstance(x, str) and x in foreign)]


def run_env(gw) -> dict[str, str]:
    """A shell in the repository after `make run`: the venv's python first on PATH, nothing a
    block sets itself (:data:`UNSET`), no AWS configuration of this machine's."""
    kept = {k: v for k, v in os.environ.items() if k not in UNSET}
    return {**kept, "PYTHONPATH": str(ROOT),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


def section_exports(snippet: Snippet, env: dict[str, str]) -> dict[str, str]:
    """``env`` after the ``export`` lines of the shell ``run`` blocks before ``snippet`` in its
    section: a reader runs those in the shell they start the program from."""
    exports = [c.command for block in section_blocks(snippet, SNIPPETS, frozenset({"run"}))
               if block.lang in ("sh", "bash") for c in shell_commands(block) if c.command.startswith("export ")]
    if not exports:
        return env
    proc = subprocess.run(["bash", "-c", "\n".join([*exports, "env -0"])], env=env, capture_output=True,
                          check=True, timeout=10)
    return dict(item.split("=", 1) for item in proc.stdout.decode().split("\0") if "=" in item)


def run_shell_block(snippet: Snippet, gw, out: Path) -> list[tuple[int, str, str]]:
    """The block's commands in one bash session, as a reader pastes them (an ``export`` or
    ``cd`` holds for the commands after it), up to the first that fails; each command's
    (exit status, stdout, stderr)."""
    lines = ["set -o pipefail"]
    for i, command in enumerate(shell_commands(snippet)):
        # the newline before `}`: a command may end in a comment
        lines += [f"{{ {localize(command.command, gw)}", f'}} >"{out}/{i}.out" 2>"{out}/{i}.err"',
                  f'status=$?; echo $status >"{out}/{i}.status"; [ $status = 0 ] || exit $status']
    subprocess.run(["bash", "-c", "\n".join(lines)], cwd=gw.workdir, env=run_env(gw), capture_output=True,
                   timeout=60 * max(1, len(shell_commands(snippet))))
    results = []
    for i in range(len(shell_commands(snippet))):
        if not (out / f"{i}.status").exists():
            break
        results.append((int((out / f"{i}.status").read_text()), (out / f"{i}.out").read_text(),
                        (out / f"{i}.err").read_text()))
    return results


def run_interrupted(snippet: Snippet, gw, seconds: float) -> list[tuple[str, str]]:
    """A block whose commands stream until interrupted (``interrupt="S"``): each runs for S
    seconds, then gets Ctrl-C's SIGINT, as a reader stops it; (stdout, stderr) of each."""
    results = []
    for command in shell_commands(snippet):
        # Ctrl-C's default action even when this run inherited SIGINT ignored (a suite started in
        # the background: the shell ignores SIGINT for its background jobs, and exec keeps that)
        proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", localize(command.command, gw)], cwd=gw.workdir,
                                env=run_env(gw), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            stdout, stderr = proc.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=10)
        results.append((stdout, stderr))
    return results


@pytest.mark.parametrize("snippet", of_kind("run"), ids=_id)
def test_run_block_works_as_printed(snippet: Snippet, demo_gateway, foreign_databases, tmp_path):
    gw, foreign = demo_gateway, foreign_databases
    if snippet.lang in PROGRAMS:
        name, command, output = PROGRAMS[snippet.lang]
        script = tmp_path / name
        script.write_text(localize(snippet.body, gw))
        env = section_exports(snippet, run_env(gw))
        if snippet.lang == "javascript":
            (tmp_path / "node_modules").symlink_to(NODE_MODULES, target_is_directory=True)
            env["NODE_EXTRA_CA_CERTS"] = str(gw.ca_file)
        proc = subprocess.run([*command, str(script)], cwd=gw.workdir, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{snippet.where}:\n{proc.stdout}\n{proc.stderr}"
        printed = [line.strip()[len(output):].strip() for line in snippet.body.split("\n")
                   if line.strip().startswith(output)]
        if printed:
            assert len(printed) == len(proc.stdout.splitlines()) and all(
                program_line_matches(p, a, foreign) for p, a in zip(printed, proc.stdout.splitlines())), \
                f"{snippet.where}: the doc prints\n" + "\n".join(printed) + f"\nthe program printed\n{proc.stdout}"
        return
    commands = shell_commands(snippet)
    if "interrupt" in snippet.attrs:
        for command, (stdout, stderr) in zip(commands, run_interrupted(snippet, gw, float(snippet.attrs["interrupt"]))):
            where = f"{snippet.file}:{command.line}"
            assert stdout.strip(), f"{where}: nothing within {snippet.attrs['interrupt']} s: {command.command}\n{stderr}"
            if command.expected:
                assert stdout.split("\n")[:len(command.expected)] == command.expected, \
                    f"{where}: the doc prints\n" + "\n".join(command.expected) + f"\nthe gateway sent\n{stdout}"
        return
    results = run_shell_block(snippet, gw, tmp_path)
    for command, (status, stdout, stderr) in zip(commands, results):
        where = f"{snippet.file}:{command.line}"
        assert status == 0, f"{where}: {command.command}\n{stdout}\n{stderr}"
        if command.expected:
            printed = "\n".join(command.expected)
            try:
                ok = matches(json.loads(printed), json.loads(stdout), foreign)
            except json.JSONDecodeError:
                ok = printed.strip() == stdout.strip()
            assert ok, f"{where}: the doc prints\n{printed}\nthe gateway answered\n{stdout}"
    assert len(results) == len(commands), f"{snippet.file}: the block's session ended before {commands[len(results)].command}"
