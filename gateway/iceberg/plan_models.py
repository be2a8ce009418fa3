"""The request and response models of server-side scan planning (the spec's ``planTableScan``,
``fetchPlanningResult``, ``cancelPlanning``, ``fetchScanTasks``): PyIceberg's own
(``pyiceberg.catalog.rest.scan_planning``), with what they need to be written as the spec
writes them, since PyIceberg only reads them:

- tasks are written from the planner's JSON values (:meth:`ScanTaskList.of`), not as PyIceberg's
  models: those write a residual filter as ``{}`` (the field is typed as the abstract
  ``BooleanExpression``) and ``file-format`` upper case, and ten thousand of them cost seconds;
- the answers of the two result operations are one model each (:class:`PlanningResult`,
  :class:`FetchedPlanningResult`), a union discriminated by ``status``;
- a request's ``filter`` is bounded before PyIceberg reads it (:func:`filter_fault`: the
  service's ``planning.max_filter_depth``, ``max_filter_bytes``, ``max_filter_literals``), since
  PyIceberg parses, binds and evaluates it recursively, for every data file.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, RootModel
from pyiceberg.catalog.rest.scan_planning import (
    FetchScanTasksRequest as _FetchScanTasksRequest,
    PlanCancelled,
    PlanFailed,
    PlanSubmitted,
    PlanTableScanRequest as _PlanTableScanRequest,
    ScanTasks,
    StorageCredential,
)
from pyiceberg.expressions import BooleanExpression

from gateway.iceberg.bodies import document, validated
from gateway.iceberg.errors import BadRequest
from gateway.iceberg.plan_store import MAX_TOKEN_BYTES, PlanningOptions

__all__ = ["FetchScanTasksRequest", "FetchedPlanningResult", "PlanCancelled", "PlanCompleted", "PlanFailed",
           "PlanSubmitted", "PlanTableScanRequest", "PlanningResult", "ScanTaskList", "StorageCredential",
           "filter_fault"]

#: Longest ``select``/``stats-fields`` list and plan task string accepted (a plan task is a
#: token: at most MAX_TOKEN_BYTES compressed, in base64).
MAX_FIELDS, MAX_PLAN_TASK = 10_000, MAX_TOKEN_BYTES * 4 // 3 + 1024


def filter_fault(value: Any, planning: PlanningOptions) -> str | None:
    """What puts a request's ``filter`` (its JSON value, None when absent) beyond the service's
    bounds, in words naming the setting; None when it is within them. The depth counts every
    level of its JSON (an ``and`` inside an ``or`` with a ``values`` list is four), the literals
    every value of ``value`` and ``values``, the size its compact JSON's bytes."""
    literals = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if level > planning.max_filter_depth:
            return f"the filter is nested deeper than planning.max_filter_depth ({planning.max_filter_depth} levels)"
        if isinstance(item, dict):
            values = item.get("values")
            literals += ("value" in item) + (len(values) if isinstance(values, list) else 0)
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
    if literals > planning.max_filter_literals:
        return (f"the filter has {literals} literal values, more than planning.max_filter_literals "
                f"({planning.max_filter_literals})")
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > planning.max_filter_bytes:
        return f"the filter is {size} bytes, more than planning.max_filter_bytes ({planning.max_filter_bytes})"
    return None


class PlanTableScanRequest(_PlanTableScanRequest):
    """PyIceberg's ``PlanTableScanRequest`` (its validator: ``end-snapshot-id`` with
    ``start-snapshot-id``, not both ``snapshot-id`` and ``start-snapshot-id``), lists bounded."""

    select: list[Annotated[str, Field(max_length=1024)]] | None = Field(default=None, max_length=MAX_FIELDS)
    stats_fields: list[Annotated[str, Field(max_length=1024)]] | None = Field(
        alias="stats-fields", default=None, max_length=MAX_FIELDS)

    @classmethod
    def from_request(cls, catalog: Any, request: Any, body: bytes) -> PlanTableScanRequest:
        """The request of ``body``, its filter within ``catalog.service.planning``'s bounds.
        Raises ``BadRequest`` (400) naming the bound or the first bad field."""
        raw = document(body)
        fault = filter_fault(raw.get("filter"), catalog.service.planning)
        if fault is not None:
            raise BadRequest(fault)
        return validated(cls, raw)


class FetchScanTasksRequest(_FetchScanTasksRequest):
    """PyIceberg's ``FetchScanTasksRequest``: the ``plan-task`` string, bounded."""

    plan_task: str = Field(alias="plan-task", max_length=MAX_PLAN_TASK)


class ScanTaskList(ScanTasks):
    """The spec's ``ScanTasks`` (also ``fetchScanTasks``'s answer, ``FetchScanTasksResult``),
    written from the planner's JSON (:meth:`of`; PyIceberg's own models read it)."""

    _text: str | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, tasks: str | dict, more: dict | None = None):
        """An answer writing ``tasks`` (the spec's JSON object of them, as text or as
        :meth:`gateway.iceberg.planning.Planned.values`), then ``more``'s members, unchecked."""
        text = tasks if isinstance(tasks, str) else json.dumps(tasks, separators=(",", ":"))
        if more:
            rest = json.dumps(more, separators=(",", ":"))
            text = rest if text == "{}" else f"{text[:-1]},{rest[1:]}"
        # the fields given: pydantic's default_factory check inspects list's signature each time (0.5 ms)
        answer = cls.model_construct(delete_files=[], file_scan_tasks=[], plan_tasks=[])
        answer._text = text
        return answer

    def model_dump_json(self, **kwargs: Any) -> str:
        if self._text is None:
            return super().model_dump_json(**kwargs)
        return self._text


class PlanCompleted(ScanTaskList):
    """The spec's ``CompletedPlanningWithIDResult``: tasks, ``plan-id``, and
    ``storage-credentials`` for the files (vended ones, as on load; absent otherwise)."""

    status: Literal["completed"] = "completed"
    plan_id: str = Field(alias="plan-id")
    storage_credentials: list[StorageCredential] | None = Field(alias="storage-credentials", default=None)


class _Union(RootModel[Any]):
    def model_dump_json(self, **kwargs: Any) -> str:  # the chosen model writes itself
        return self.root.model_dump_json(**kwargs)


class PlanningResult(_Union):
    """``planTableScan``'s answer, the spec's ``PlanTableScanResult``."""

    root: Annotated[PlanCompleted | PlanSubmitted | PlanFailed, Field(discriminator="status")]


class FetchedPlanningResult(_Union):
    """``fetchPlanningResult``'s answer, the spec's ``FetchPlanningResult``."""

    root: Annotated[PlanCompleted | PlanSubmitted | PlanCancelled | PlanFailed, Field(discriminator="status")]


for _model in (PlanningResult, FetchedPlanningResult):  # PyIceberg's fields name BooleanExpression lazily
    _model.model_rebuild(_types_namespace={"BooleanExpression": BooleanExpression})
