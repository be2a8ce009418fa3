"""One user's view of the catalog under a catalog policy, for one request: what every service
kind asks of the policy (the Thrift policy step, the Glue kind, the change feed, a REST catalog).

A :class:`CatalogView` answers, in Ranger's Hive model (:mod:`gateway.policy.engine`):

* whether the user may do an access on a database or table (:meth:`CatalogView.may`; access
  ``""`` is Ranger's ``_any``: some access on the object or below it, what listing and naming
  an object need);
* which names of a listing stay (:meth:`~CatalogView.visible_databases`,
  :meth:`~CatalogView.visible_tables`, in bulk) and which columns of a table are kept
  (:meth:`~CatalogView.keep`, :meth:`~CatalogView.columns`: ``select`` on the column, as
  Ranger's column-level Hive checks and Lake Formation's ``AuthorizedColumns``);
* whether the user may place storage at a location (:meth:`~CatalogView.url_refusal`, Ranger
  Hive's ``url`` resource, :mod:`gateway.policy.urls`), asked by every protocol alike;
* which row filter and masks apply to the user on a table (:meth:`~CatalogView.restrictions`,
  Ranger's row-filter and data-mask policies, :mod:`gateway.policy.restrictions`);
* how much it hid, for the audit line: ``hidden`` (listed objects), ``hidden_columns``
  (distinct ``(database, table, column)`` removed) and ``restricting`` (the ids of the policies
  that filtered or masked what the request answered).

Decisions are cached for the request (a reply names the same tables again and again). Names
are matched case-insensitively, as Ranger does. Built with ``engine`` None (no policy on the
service) the view shows everything and hides nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from gateway.policy.engine import Decision, PolicyEngine, Resource
from gateway.policy.model import ACCESS_TYPES, ALL, ANY_ACCESS
from gateway.policy.restrictions import TableRestrictions, table_restrictions
from gateway.policy.urls import PLACING, dot_segment

#: A table's column predicate: whether a column (by name) stays.
Keep = Callable[[str], bool]


class CatalogView:
    """What ``user`` (member of ``groups``) sees of the catalog under ``engine`` (None: no
    policy, everything visible), for one request."""

    __slots__ = ("engine", "user", "groups", "hidden", "hidden_columns", "restricting", "_visible", "_keeps")

    def __init__(self, engine: PolicyEngine | None, user: str, groups: Iterable[str] = frozenset()):
        self.engine, self.user = engine, user
        self.groups = groups if isinstance(groups, frozenset) else frozenset(groups)
        #: Objects the listings of this request hid.
        self.hidden = 0
        #: (database, table, column), lower-cased, removed from this request's replies.
        self.hidden_columns: set[tuple[str, str, str]] = set()
        #: Ids of the row-filter and data-mask policies that applied to this request's answers.
        self.restricting: set[int] = set()
        self._visible: dict[tuple[str, str | None], bool] = {}
        self._keeps: dict[tuple[str, str], Keep | None] = {}

    # --- objects ----------------------------------------------------------------------------

    def decide(self, access: str, database: str, table: str | None = None,
               column: str | None = None) -> Decision | None:
        """The engine's :class:`Decision` (its policy id is the audit's) for ``access`` (a Ranger
        Hive access type, ``all``, or ``""``/``_any``) on the object; None without a policy.
        Raises ``ValueError`` for an unknown access type or a column without a table."""
        if self.engine is None:
            return None
        return self.engine.evaluate(self.user, self.groups, Resource(database, table, column),
                                    access or ANY_ACCESS)

    def may(self, access: str, database: str, table: str | None = None) -> bool:
        """Whether the user may do ``access`` (``select``, ``update``, ``create``, ``drop``,
        ``alter``…; ``""`` for Ranger's ``_any``) on the database or table. Raises
        ``ValueError`` for an unknown access type."""
        if not access or access == ANY_ACCESS:
            return self.visible(database, table)
        if access.lower() not in ACCESS_TYPES and access.lower() != ALL:
            raise ValueError(f"unknown access type {access!r}")
        decision = self.decide(access, database, table)
        return decision is None or decision.allowed

    def may_url(self, access: str, url: str) -> bool:
        """Whether the user may do ``access`` (``read``, ``write``) on the location ``url``
        (Ranger Hive's ``url`` resource, :meth:`PolicyEngine.evaluate_url`); True without a
        policy. Raises ``ValueError`` for an unknown access type."""
        return self.engine is None or self.engine.evaluate_url(self.user, self.groups, url, access).allowed

    def url_refusal(self, location: str, what: str) -> str | None:
        """None when the user may place ``what`` (``"table db.t"``) at ``location``: Ranger's
        ``url`` permission, both :data:`~gateway.policy.urls.PLACING` accesses, on it. Else the
        refusal's message, naming the user, ``what`` and the location (cut to 300 characters),
        which every protocol sends in its own error model (the Iceberg service's 403, the
        Thrift ``MetaException``). A location with a ``.`` or ``..`` segment is refused too
        (:func:`~gateway.policy.urls.dot_segment`). None without a policy."""
        if self.engine is None:
            return None
        shown = location[:300]
        if dot_segment(location):
            return f"{self.user} may not place {what} at {shown}: a location must not have '.' or '..' segments"
        for access in PLACING:
            if not self.may_url(access, location):
                return (f"{self.user} may not place {what} at {shown}: it needs the url permission "
                        f"({access}) on that location")
        return None

    def visible(self, database: str, table: str | None = None) -> bool:
        """Whether the database (or its table) is shown and may be named: ``_any`` on it."""
        if self.engine is None:
            return True
        key = (database.lower(), None if table is None else table.lower())
        seen = self._visible.get(key)
        if seen is None:
            seen = self._visible[key] = self.engine.visible(self.user, self.groups, *key)
        return seen

    def restrictions(self, database: str, table: str, columns: Sequence[str] | None = None,
                     column_types: dict[str, str] | None = None) -> TableRestrictions:
        """The row filter and masks that apply to the user on ``database.table``
        (:func:`~gateway.policy.restrictions.table_restrictions`; ``columns`` None: the columns
        the mask policies name); their policy ids are added to ``restricting``. Never raises."""
        found = table_restrictions(self.engine, self.user, self.groups, database, table, columns, column_types)
        self.restricting.update(found.policy_ids)
        return found

    # --- listings ---------------------------------------------------------------------------

    def visible_databases(self, names: Sequence[str]) -> list[str]:
        """The database names of a listing the user may see, in order; the others counted in
        ``hidden``."""
        if self.engine is None:
            return list(names)
        return self._counted(names, self.engine.visible_databases(self.user, self.groups, names))

    def visible_tables(self, database: str, names: Sequence[str]) -> list[str]:
        """The table names of a listing of ``database`` the user may see, in order; the others
        counted in ``hidden``."""
        if self.engine is None:
            return list(names)
        return self._counted(names, self.engine.visible_tables(self.user, self.groups, database, names))

    def listing_verdict(self, database: str | None = None) -> bool | None:
        """What a listing of the tables of ``database`` (None: of databases) shows, whatever the
        names: True all, False none, None it depends on the names (a caller may then skip
        reading the names)."""
        if self.engine is None:
            return True
        return self.engine.listing_verdict(self.user, self.groups, database)

    def _counted(self, names: Sequence[str], shown: list[str]) -> list[str]:
        self.hidden += len(names) - len(shown)
        return shown

    # --- columns ----------------------------------------------------------------------------

    def all_columns(self, database: str | None, table: str | None) -> bool:
        """Whether every column of the table is kept (decided without column names)."""
        return self.keep(database, table) is None

    def keep(self, database: str | None, table: str | None) -> Keep | None:
        """None when every column of the table stays, else a predicate on column names that
        records each column it removes in ``hidden_columns``."""
        key = ((database or "").lower(), (table or "").lower())
        if key in self._keeps:
            return self._keeps[key]
        keep: Keep | None = None
        if self.engine is not None:
            uniform = self.engine.columns_uniform(self.user, self.groups, key[0], key[1])
            if uniform is None:
                keep = self._counting(key, self._column_checker(key))
            elif not uniform.allowed:
                keep = self._counting(key, lambda name: False)
        self._keeps[key] = keep
        return keep

    def columns(self, database: str | None, table: str | None, names: Iterable[str]) -> list[str]:
        """The names of ``names`` (in order) the user may select on the table."""
        keep = self.keep(database, table)
        return list(names) if keep is None else [n for n in names if keep(n)]

    def _column_checker(self, table: tuple[str, str]) -> Keep:
        decided: dict[str, bool] = {}
        engine, user, groups = self.engine, self.user, self.groups
        assert engine is not None

        def allowed(name: str) -> bool:
            low = (name or "").lower()
            verdict = decided.get(low)
            if verdict is None:
                verdict = decided[low] = engine.evaluate(
                    user, groups, Resource(table[0], table[1], low), "select").allowed
            return verdict
        return allowed

    def _counting(self, table: tuple[str, str], keep: Keep) -> Keep:
        hidden = self.hidden_columns

        def counted(name: str) -> bool:
            if keep(name):
                return True
            hidden.add((*table, (name or "").lower()))
            return False
        return counted
