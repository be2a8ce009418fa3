"""The container image without a Docker engine: the Dockerfile's stages, and the builder stage's
install replayed in a fresh venv (tests/unit/test_dockerfile.py, tests/integration/test_image_install.py);
the client distribution installed on its own likewise (tests/integration/test_client_install.py).

The builder stage runs ``pip wheel --no-deps .`` and installs that wheel, with its runtime
dependencies and no extras, into a new venv; :func:`install_image_venv` does the same here, with
pip's cache (built wheels of gssapi and krb5 included), so a second run downloads and builds nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
CLIENT = ROOT / "clients" / "python"  # the client distribution's project


def stages(commands: list) -> list[list]:
    """The instructions of each stage (``dockerfile.parse_file``'s commands, split at FROM)."""
    split: list[list] = []
    for cmd in commands:
        if cmd.cmd == "FROM":
            split.append([])
        split[-1].append(cmd)
    return split


def apt_packages(stage: list) -> set[str]:
    """The packages a stage's ``apt-get install`` commands name (options left out)."""
    words = " ".join(" ".join(c.value) for c in stage if c.cmd == "RUN").split()
    named: set[str] = set()
    for i, word in enumerate(words):
        if word == "install" and i and words[i - 1] == "apt-get":
            for arg in words[i + 1:]:
                if arg in ("&&", "\\", ";"):
                    break
                if not arg.startswith("-"):
                    named.add(arg)
    return named


@dataclass(frozen=True)
class ImageVenv:
    """A venv holding the project's wheel and its runtime dependencies only."""

    root: Path
    env: dict[str, str]  # this process's environment without the repository's venv or sources

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name

    @property
    def site_packages(self) -> Path:
        (site,) = (self.root / "lib").glob("python3.*/site-packages")
        return site

    def run(self, *command: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout,
                              env=self.env, cwd=cwd)


def install_image_venv(workdir: Path) -> ImageVenv:
    """The builder stage's install in ``workdir``: the wheel (``pip wheel --no-deps``), then a new
    venv with that wheel and its runtime dependencies. Raises AssertionError with pip's output
    when a step fails."""
    return _wheel_in_fresh_venv(ROOT, "hms_gateway-*.whl", workdir)


def install_client_venv(workdir: Path, extras: str = "") -> ImageVenv:
    """The client distribution (clients/python) as a user installs it, in ``workdir``: its wheel,
    then a new venv with that wheel, its dependencies and ``extras`` (e.g. ``"tunnel"``), and
    nothing of the server's. Raises AssertionError with pip's output when a step fails."""
    return _wheel_in_fresh_venv(CLIENT, "hms_gateway_client-*.whl", workdir, extras)


def _wheel_in_fresh_venv(source: Path, pattern: str, workdir: Path, extras: str = "") -> ImageVenv:
    wheels = workdir / "wheels"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels),
                            str(source)], capture_output=True, text=True, timeout=900, env=env)
    assert build.returncode == 0, f"pip wheel failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    (wheel,) = wheels.glob(pattern)
    image = ImageVenv(workdir / "venv", env)
    venv.EnvBuilder(with_pip=True, clear=True).create(image.root)
    # --no-compile: the bytecode the Dockerfile precompiles is no part of what is checked here
    install = image.run(image.bin("python"), "-m", "pip", "install", "-q", "--no-compile",
                        f"{wheel}[{extras}]" if extras else wheel, cwd=workdir, timeout=1800)
    assert install.returncode == 0, f"pip install failed:\n{install.stdout[-3000:]}\n{install.stderr[-3000:]}"
    return image


def distribution_files(image: ImageVenv, distribution: str) -> list[str]:
    """The files ``distribution`` installed in ``image`` (its RECORD), as paths below site-packages."""
    (record,) = image.site_packages.glob(f"{distribution.replace('-', '_')}-*.dist-info/RECORD")
    return [line.split(",", 1)[0] for line in record.read_text().splitlines() if line]


NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[(?P<name>[^\]]+)\]")
LDD = re.compile(r"^\s*(?P<name>\S+) => (?P<path>/\S+)", re.M)


def locally_built_extensions(site_packages: Path) -> list[Path]:
    """Extension modules of the distributions pip built here from source (wheel tag
    ``linux_*``, not ``manylinux``): they link against this system's libraries, which the image
    must install, while manylinux wheels carry theirs."""
    found = []
    for wheel in site_packages.glob("*.dist-info/WHEEL"):
        tags = [line.split(":", 1)[1].strip() for line in wheel.read_text().splitlines() if line.startswith("Tag:")]
        if tags and all(re.search(r"-linux_[^-]+$", tag) for tag in tags):
            for line in (wheel.parent / "RECORD").read_text().splitlines():
                path = line.split(",", 1)[0]
                if path.endswith(".so"):
                    found.append(site_packages / path)
    return found


def _per_file(command: list[str], files: list[Path], header: str) -> dict[str, str]:
    """``command files...``'s output split by file (``readelf`` and ``ldd`` name each file on a
    line of its own, in ``header`` form), in one process for all of them."""
    output = subprocess.run([*command, *map(str, files)], capture_output=True, text=True, check=True).stdout
    if len(files) == 1:  # a single file gets no header line
        return {str(files[0]): output}
    parts = re.split(header, output, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def linked_packages(extensions: list[Path]) -> dict[str, set[str]]:
    """Debian package → the extensions that link against one of its libraries directly (ELF
    ``NEEDED`` entries, resolved by ``ldd``, owned per ``dpkg -S``)."""
    dynamic = _per_file(["readelf", "-d"], extensions, r"^File: (\S+)$")
    resolved = _per_file(["ldd"], extensions, r"^(\S+):$")
    users: dict[str, set[str]] = {}  # library path → extensions
    for extension in map(str, extensions):
        paths = {m["name"]: m["path"] for m in LDD.finditer(resolved[extension])}
        for name in NEEDED.findall(dynamic[extension]):
            assert name in paths, f"{extension}: {name} does not resolve"
            # "<multiarch dir>/<file>": with merged /usr a package may list it under /lib or /usr/lib
            library = "/".join(os.path.realpath(paths[name]).split("/")[-2:])
            users.setdefault(library, set()).add(Path(extension).name)
    search = subprocess.run(["dpkg", "-S", *users], capture_output=True, text=True)
    owners: dict[str, set[str]] = {}
    found = set()
    for line in search.stdout.splitlines():
        package, _, path = line.partition(": ")
        library = "/".join(path.split("/")[-2:])
        if library in users and not line.startswith("diversion"):
            found.add(library)
            owners.setdefault(package.split(":")[0], set()).update(users[library])
    assert found == users.keys(), f"libraries of no Debian package: {sorted(users.keys() - found)}"
    return owners
