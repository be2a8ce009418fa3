"""The request and response models of server-side scan planning (the spec's ``planTableScan``,
``fetchPlanningResult``, ``cancelPlanning``, ``fetchScanTasks``): PyIceberg's own
(``pyiceberg.catalog.rest.scan_planning``), with what they need to be written as the spec
writes them, since PyIceberg only reads them:

- a residual filter is written as the spec's ``Expression`` (PyIceberg's field is typed as the
  abstract ``BooleanExpression``, which pydantic writes as ``{}``);
- ``file-format`` is written lower case, as the spec's ``FileFormat`` enum has it;
- the answers of the two result operations are one model each (:class:`PlanningResult`,
  :class:`FetchedPlanningResult`), a union discriminated by ``status``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, RootModel, field_serializer
from pyiceberg.catalog.rest.scan_planning import (
    FetchScanTasksRequest as _FetchScanTasksRequest,
    PlanCancelled,
    PlanFailed,
    PlanSubmitted,
    PlanTableScanRequest as _PlanTableScanRequest,
    RESTDataFile,
    RESTEqualityDeleteFile,
    RESTFileScanTask,
    RESTPositionDeleteFile,
    ScanTasks,
    StorageCredential,
)
from pyiceberg.expressions import BooleanExpression, SerializableBooleanExpression
from pyiceberg.manifest import FileFormat

__all__ = ["DataFile", "EqualityDeleteFile", "FetchScanTasksRequest", "FetchedPlanningResult", "FileScanTask",
           "PlanCancelled", "PlanCompleted", "PlanFailed", "PlanSubmitted", "PlanTableScanRequest", "PlanningResult",
           "PositionDeleteFile", "ScanTaskList", "StorageCredential"]

#: Longest ``select``/``stats-fields`` list and plan task string accepted.
MAX_FIELDS, MAX_PLAN_TASK = 10_000, 64 * 1024


class PlanTableScanRequest(_PlanTableScanRequest):
    """PyIceberg's ``PlanTableScanRequest`` (its validator: ``end-snapshot-id`` with
    ``start-snapshot-id``, not both ``snapshot-id`` and ``start-snapshot-id``), lists bounded."""

    select: list[Annotated[str, Field(max_length=1024)]] | None = Field(default=None, max_length=MAX_FIELDS)
    stats_fields: list[Annotated[str, Field(max_length=1024)]] | None = Field(
        alias="stats-fields", default=None, max_length=MAX_FIELDS)


class FetchScanTasksRequest(_FetchScanTasksRequest):
    """PyIceberg's ``FetchScanTasksRequest``: the ``plan-task`` string, bounded."""

    plan_task: str = Field(alias="plan-task", max_length=MAX_PLAN_TASK)


class _Written:
    @field_serializer("file_format")
    def _lower(self, value: FileFormat) -> str:
        return value.value.lower()


class DataFile(_Written, RESTDataFile):
    """The spec's ``DataFile``."""


class PositionDeleteFile(_Written, RESTPositionDeleteFile):
    """The spec's ``PositionDeleteFile``."""


class EqualityDeleteFile(_Written, RESTEqualityDeleteFile):
    """The spec's ``EqualityDeleteFile``."""


DeleteFile = Annotated[PositionDeleteFile | EqualityDeleteFile, Field(discriminator="content")]


class FileScanTask(RESTFileScanTask):
    """The spec's ``FileScanTask``: a data file, indexes into the answer's ``delete-files``,
    and the residual filter (``true`` when nothing is left to check)."""

    data_file: DataFile = Field(alias="data-file")
    residual_filter: SerializableBooleanExpression | None = Field(alias="residual-filter", default=None)


class ScanTaskList(ScanTasks):
    """The spec's ``ScanTasks`` (also ``fetchScanTasks``'s answer, ``FetchScanTasksResult``)."""

    delete_files: list[DeleteFile] = Field(alias="delete-files", default_factory=list)
    file_scan_tasks: list[FileScanTask] = Field(alias="file-scan-tasks", default_factory=list)


class PlanCompleted(ScanTaskList):
    """The spec's ``CompletedPlanningWithIDResult``: tasks, the plan id, and storage
    credentials for the files (vended ones, as on load; absent otherwise)."""

    status: Literal["completed"] = "completed"
    plan_id: str = Field(alias="plan-id")
    storage_credentials: list[StorageCredential] | None = Field(alias="storage-credentials", default=None)


class _Union(RootModel[Any]):
    def model_dump_json(self, **kwargs: Any) -> str:  # as PyIceberg's models: nulls left out
        return super().model_dump_json(**{"exclude_none": True, **kwargs})


class PlanningResult(_Union):
    """``planTableScan``'s answer, the spec's ``PlanTableScanResult``."""

    root: Annotated[PlanCompleted | PlanSubmitted | PlanFailed, Field(discriminator="status")]


class FetchedPlanningResult(_Union):
    """``fetchPlanningResult``'s answer, the spec's ``FetchPlanningResult``."""

    root: Annotated[PlanCompleted | PlanSubmitted | PlanCancelled | PlanFailed, Field(discriminator="status")]


for _model in (PlanningResult, FetchedPlanningResult):  # PyIceberg's fields name BooleanExpression lazily
    _model.model_rebuild(_types_namespace={"BooleanExpression": BooleanExpression})
