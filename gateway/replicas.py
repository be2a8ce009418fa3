"""What ``check-config --replicas N`` warns about: state that would differ between replicas.

Secrets that every replica must share (a Kerberos provider's ``cookie.signing_key``, a
``gateway-token`` provider's ``signing_key``) are required ``file:``/``env:`` references: the
gateway never generates one, so replicas that mount one Secret agree. What is left to catch
is configuration that keeps state per replica where the deployment needs one copy:

* an ``event-stream`` service whose ``options.broker`` has ``offset_file``: no HMS lock, so
  every replica publishes every event (drop ``offset_file``: the offset and the lock are HMS's).
"""

from __future__ import annotations

from gateway.config import TopologyConfig

__all__ = ["replica_warnings"]


def replica_warnings(topologies: dict[str, TopologyConfig], replicas: int) -> list[str]:
    """One line per problem for a deployment of ``replicas`` gateways (none for one), each
    naming the topology file's key and the reason."""
    if replicas < 2:
        return []
    warnings = []
    for name, topology in topologies.items():
        for i, service in enumerate(topology.services):
            broker = service.options.get("broker") if service.kind == "event-stream" else None
            if isinstance(broker, dict) and broker.get("offset_file") is not None:
                warnings.append(
                    f"topology {name}: services[{i}].options.broker.offset_file: with {replicas} replicas "
                    "each replica publishes every event to the broker (the file is per replica); "
                    "remove offset_file so that one replica publishes, under an HMS lock, with the offset in HMS")
    return warnings
