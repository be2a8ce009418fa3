"""Pipeline steps, one module each, registered by role (Knox: the provider roles a service asks
for). Each service kind names the roles of its chain, in data-path order, in its ``roles``
attribute (:mod:`gateway.services`; ``docs/architecture.md`` shows them per kind);
:func:`build_chain` builds only those.

A step class builds itself with ``build(ctx)`` from the service's
:class:`gateway.pipeline.step.StepContext` and returns the step, or None when the role has
nothing to do for that service (no ``policy_file``: no catalog policy). Steps that are the same
for every service of a topology (authentication with its failure throttle, identity assertion,
ownership assertion) are built once per topology through ``ctx.per_topology``.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from gateway.pipeline.step import Chain, Step, StepContext
from gateway.registry import resolve

#: Role name → ``"module:Class"`` of its step, as :data:`gateway.services.KINDS` (imported only
#: when a kind asks for the role). The class declares the same ``name``.
STEPS: dict[str, str] = {
    "authentication": "gateway.pipeline.steps.authentication:Authentication",
    "identity-assertion": "gateway.pipeline.steps.identity_assertion:IdentityAssertion",
    "authorization": "gateway.pipeline.steps.service_acl:ServiceAcl",
    "method-exposure": "gateway.hms_thrift.steps.exposure:MethodExposure",
    "ugi-claim": "gateway.hms_thrift.steps.ugi_claim:UgiClaim",
    "catalog-policy": "gateway.hms_thrift.steps.catalog_policy:CatalogPolicy",
    "ownership-assertion": "gateway.hms_thrift.steps.ownership:OwnershipAssertion",
}


class UnknownRole(LookupError):
    """A service kind asks for a step role that :data:`STEPS` does not register."""


@cache
def step_class(role: str) -> type[Step]:
    """The step class registered for ``role``.

    Raises :class:`UnknownRole` for a role :data:`STEPS` lacks, ``TypeError`` when the class
    does not declare ``name = role``.
    """
    target = STEPS.get(role)
    if target is None:
        raise UnknownRole(f"no pipeline step has role {role!r}; known roles: {', '.join(STEPS)}")
    cls = resolve(target)
    if getattr(cls, "name", None) != role:
        raise TypeError(f"{target} must declare name = {role!r}")
    return cls


def build_chain(roles: Iterable[str], ctx: StepContext) -> Chain:
    """The chain of ``roles`` (a kind's ``chain``, in order) for the service of ``ctx``.

    Raises :class:`UnknownRole`, and ``ConfigError`` when a step finds the configuration lacking.
    """
    classes = [step_class(role) for role in roles]  # every role known before anything is built
    steps = (cls.build(ctx) for cls in classes)
    return Chain(step for step in steps if step is not None)
