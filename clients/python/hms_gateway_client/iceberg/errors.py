"""The one error of the restricted reader."""

from __future__ import annotations


class ReadRestrictionError(Exception):
    """A ``read-restrictions`` object this reader cannot apply as the Iceberg REST spec says (an
    unknown action, an action on a type it does not apply to, a filter it cannot evaluate...):
    the read fails, as the spec requires, and the message names the restriction."""
