"""Hot reload of topology files, as Knox redeploys a topology when its file changes.

The topology directory is polled; a file added, changed or removed takes effect without a
restart, and so does a change to a policy file a topology names (``policy_file``): a revoked
grant is refused from the next poll on. Each file is validated on its own: an invalid one is logged (file, key, reason) and its
previous version keeps serving. Unchanged topologies keep their objects (pools, caches). A
new topology's services are started (:meth:`ServiceKind.start`) once it serves, and a replaced
one's closed: upstream pools gracefully (calls in flight finish on the connections they hold,
which are closed when returned).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from gateway.config import ConfigError, TopologyConfig, load_topology_file, topology_files
from gateway.observability import metrics
from gateway.topology import Router, Topology

log = logging.getLogger(__name__)

_Stamp = tuple[int, int]  # (mtime_ns, size)


def _file_stamps(paths) -> dict[Path, _Stamp | None]:
    stamps: dict[Path, _Stamp | None] = {}
    for path in paths:
        try:
            st = path.stat()
        except OSError:  # removed (between glob and stat, or a policy file gone)
            stamps[path] = None
            continue
        stamps[path] = (st.st_mtime_ns, st.st_size)
    return stamps


def _stamps(directory: Path) -> dict[Path, _Stamp]:
    return {p: s for p, s in _file_stamps(topology_files(directory)).items() if s is not None}


def _policy_stamps(config: TopologyConfig) -> dict[Path, _Stamp | None]:
    return _file_stamps(sorted({s.policy_file for s in config.services if s.policy_file is not None}))


class TopologyReloader:
    """Keeps ``router.topologies`` in step with the topology files (``*.yaml``, ``*.yml``) of ``directory``.

    ``build(config)`` turns a validated topology into its run-time object. ``reload()`` applies
    the directory now (returns True when something changed); ``run(interval)`` polls forever.
    """

    def __init__(
        self,
        directory: Path,
        router: Router,
        configs: dict[str, TopologyConfig],
        build: Callable[[TopologyConfig], Topology],
    ):
        self.directory = directory
        self.router = router
        self.build = build
        self._configs = dict(configs)
        self._stamps = _stamps(directory)
        self._policies = {name: _policy_stamps(config) for name, config in configs.items()}
        self._lock = asyncio.Lock()

    async def reload(self, *, force: bool = False) -> bool:
        """Apply what changed on disk (everything when ``force``). Never raises for bad files."""
        async with self._lock:
            stamps = _stamps(self.directory)
            policy_changed = {name for name, recorded in self._policies.items()
                              if _file_stamps(recorded) != recorded}
            if stamps == self._stamps and not policy_changed and not force:
                return False
            changed = {p for p, s in stamps.items() if force or self._stamps.get(p) != s}
            changed |= {source for name in policy_changed
                        if (source := self._configs[name].source) is not None and source in stamps}
            for name in policy_changed:  # a bad policy file is then reported once, not every poll
                self._policies[name] = _policy_stamps(self._configs[name])
            removed = {p.stem for p in self._stamps.keys() - stamps.keys()}
            self._stamps = stamps

            topologies = dict(self.router.topologies)
            retired: list[Topology] = []
            fresh: list[Topology] = []
            failures = applied = 0
            for path in sorted(changed):
                try:
                    config = load_topology_file(path)
                    if (self._configs.get(config.name) == config and config.name in topologies
                            and config.name not in policy_changed):
                        continue  # touched, not changed
                    built = self.build(config)
                except ConfigError as exc:
                    failures += 1
                    log.error("topology not reloaded, previous version kept: %s", exc)
                    continue
                action = "reloaded" if config.name in topologies else "deployed"
                if config.name in topologies:
                    retired.append(topologies[config.name])
                topologies[config.name] = built
                fresh.append(built)
                self._configs[config.name] = config
                self._policies[config.name] = _policy_stamps(config)
                applied += 1
                log.info("topology %s %s", config.name, action)
            for name in removed:
                if name in topologies:
                    retired.append(topologies.pop(name))
                    self._configs.pop(name, None)
                    self._policies.pop(name, None)
                    applied += 1
                    log.info("topology %s undeployed", name)

            self.router.topologies = topologies  # one assignment: requests see old or new
            for topology in fresh:
                for service in topology.services.values():
                    await service.handler.start()
            for topology in retired:
                for service in topology.services.values():
                    await service.handler.close()
            if failures:
                metrics.CONFIG_RELOADS.labels(outcome="failure").inc(failures)
            if applied:
                metrics.CONFIG_RELOADS.labels(outcome="success").inc()
            return applied > 0

    async def run(self, interval: float) -> None:
        """Poll every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reload()
            except Exception:  # a reload bug must not stop future reloads
                log.exception("topology reload failed")
