"""Pydantic validation errors told the way a configuration error is: the one error to report,
and for a misspelt key the closest key the model accepts at that place (``difflib``)."""

from __future__ import annotations

import difflib
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

__all__ = ["reported_error"]


def _closest_key(model: type[BaseModel], err: Any) -> str:
    """For an unknown key (``extra_forbidden``): ``"; did you mean 'x'?"`` naming the closest
    key the model at that location accepts, else ``""``."""
    if err["type"] != "extra_forbidden":
        return ""
    fields = _fields_at(model, err["loc"][:-1])
    close = difflib.get_close_matches(str(err["loc"][-1]), fields, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model a pydantic error location leads to from ``model`` (through
    fields, list indexes, dict keys and discriminated-union tags); [] when it leads elsewhere."""
    annotation: Any = model
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    models = [m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
    return list(models[0].model_fields) if len(models) == 1 else []


def _members(annotation: Any) -> list[Any]:
    """``annotation`` without ``Annotated``, ``Optional`` and ``Union`` wrappers: its alternatives."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin in (Union, UnionType):
        return [m for arg in get_args(annotation) if arg is not type(None) for m in _members(arg)]
    return [annotation]


def _step(annotation: Any, part: Any) -> Any:
    members = _members(annotation)
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel):
            if part in member.model_fields:
                return member.model_fields[part].annotation
            tag = member.model_fields.get("type")
            if tag is not None and part in get_args(tag.annotation):  # the union tag in the location
                return member
        elif get_origin(member) is list and isinstance(part, int):
            return get_args(member)[0]
        elif get_origin(member) is dict and isinstance(part, str):
            return get_args(member)[1]
    return None


def reported_error(model: type[BaseModel], exc: ValidationError) -> tuple[tuple[Any, ...], str]:
    """The one error of ``exc`` a :class:`ConfigError` reports, as (pydantic location, reason).

    A misspelt key is also a missing one: the unknown key with a close match is preferred, its
    reason ending ``"; did you mean 'x'?"``; else the first error.
    """
    errors = exc.errors()
    err = next((e for e in errors if _closest_key(model, e)), errors[0])
    return err["loc"], err["msg"].removeprefix("Value error, ") + _closest_key(model, err)
