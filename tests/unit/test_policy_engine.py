"""Decisions of the catalog policy engine, on cases shaped after Apache Ranger's own
policy-engine tests (agents-common/src/test/resources/policyengine/test_policyengine_hive*.json):
the same situations, in this project's data."""

from __future__ import annotations

import pytest

from gateway.policy import CatalogView, PolicyEngine, Resource
from gateway.policy.model import Policy, PolicyItem, ResourceSpec, expand_accesses


def item(*accesses: str, users=(), groups=()) -> PolicyItem:
    return PolicyItem(expand_accesses(list(accesses)), frozenset(users), frozenset(groups))


def res(*values: str, excludes: bool = False) -> ResourceSpec:
    return ResourceSpec(tuple(values), excludes)


def policy(pid: int, *levels: ResourceSpec, **kw) -> Policy:
    return Policy(id=pid, name=f"p{pid}", resources=tuple(levels), **kw)


STAR = res("*")

# The situations of test_policyengine_hive.json, in this project's names.
CATALOG = PolicyEngine([
    policy(1, res("sales"), STAR, STAR, allow=(item(groups=["public"]),)),  # an item with no access
    policy(2, res("sales"), res("orders*"), STAR, allow=(
        item("select", users=["alice", "bob"], groups=["analysts", "auditors"]),
        item("create", "drop", users=["admin"], groups=["admins"]),
    )),
    policy(3, res("hr"), res("staff*"), STAR, allow=(item("select", users=["alice", "bob"], groups=["analysts"]),)),
    policy(4, res("hr"), res("pay"), res("secret*", excludes=True),
           allow=(item("select", users=["alice"]),)),
    policy(6, res("mkt1", "mkt2"), allow=(item("select", users=["alice"]),)),
    policy(7, res("mkt1"), res("leads", "campaigns"), STAR, allow=(item("create", users=["alice"]),)),
    policy(8, res("scratch"), STAR, STAR,
           allow=(item("create", "update", "drop", users=["alice", "bob"]),),
           allow_exceptions=(item("create", "update", users=["alice"]), item("create", "update", "drop", users=["bob"]))),
    policy(9, res("hr"), deny_all_else=True, allow=(item("select", users=["alice", "carol", "dave"], groups=["analysts"]),)),
])


def decide(user, groups, db, table=None, column=None, access="_any", engine=CATALOG):
    d = engine.evaluate(user, groups, Resource(db, table, column), access)
    return d.allowed, d.policy_id


@pytest.mark.parametrize("user,groups,resource,access,expected", [
    # allow by user and by group, on a table matched by a wildcard
    ("alice", ["staff"], ("sales", "orders_2024", "id"), "select", (True, 2)),
    ("carol", ["staff", "analysts"], ("sales", "orders_2024", "id"), "select", (True, 2)),
    ("carol", ["staff", "auditors"], ("sales", "orders_2024", "id"), "select", (True, 2)),
    ("carol", ["staff", "other"], ("sales", "orders_2024", "id"), "select", (False, -1)),
    ("alice", ["staff"], ("sales", "customers", "id"), "select", (False, -1)),
    # a table-level request matches a policy whose column level is '*'
    ("admin", ["staff"], ("sales", "orders_new"), "create", (True, 2)),
    ("alice", ["staff", "admins"], ("sales", "orders_new"), "drop", (True, 2)),
    ("alice", ["staff"], ("sales", "orders_new"), "create", (False, -1)),
    ("alice", ["staff", "admins"], ("sales", "customers"), "create", (False, -1)),
    # isExcludes on the column level
    ("alice", [], ("hr", "pay", "secret_1"), "select", (False, -1)),
    ("alice", [], ("hr", "pay", "amount"), "select", (True, 4)),
    # a database-only policy says nothing about tables: no isDenyAllElse there
    ("eve", [], ("hr", "pay", "secret_1"), "select", (False, -1)),
    # the unknown database
    ("alice", [], ("finance",), "_any", (False, -1)),
])
def test_concrete_and_any_decisions(user, groups, resource, access, expected):
    assert decide(user, groups, *resource, access=access) == expected


@pytest.mark.parametrize("user,groups,resource,expected", [
    # _any on a database: allowed through a policy on tables below it (Ranger DESCENDANT match)
    ("alice", ["staff"], ("sales",), (True, 2)),
    ("carol", ["staff", "analysts"], ("sales",), (True, 2)),
    ("carol", ["staff"], ("sales",), (False, -1)),  # policy 1 names public but grants nothing
    ("alice", [], ("hr",), (True, 3)),              # tie with policy 9: the first in file order
    ("eve", [], ("hr",), (False, 9)),               # isDenyAllElse denies every access type
    ("alice", [], ("hr", "staff_list"), (True, 3)),
    ("alice", [], ("hr", "staff_list", "name"), (True, 3)),
    ("alice", [], ("hr", "other_table"), (False, -1)),  # policy 9 is database-only
    ("alice", [], ("mkt1", "leads"), (True, 7)),
    # allow exceptions take away per access type: alice keeps drop, bob keeps nothing
    ("alice", [], ("scratch", "t", "c"), (True, 8)),
    ("bob", [], ("scratch", "t", "c"), (False, -1)),
])
def test_any_access(user, groups, resource, expected):
    assert decide(user, groups, *resource) == expected


def test_allow_exception_only_removes_what_it_names():
    assert decide("alice", [], "scratch", "t", access="drop") == (True, 8)
    assert decide("alice", [], "scratch", "t", access="create") == (False, -1)


# The four cases of test_policyengine_hive_any_access_priority.json.
PRIORITY = PolicyEngine([
    policy(101, res("case1"), STAR, STAR, priority=1, deny=(item("create", "drop", "alter", groups=["public"]),)),
    policy(102, res("case1"), res("t1"), STAR, allow=(item("select", "update", "drop", "read", "write", users=["hive"]),)),
    policy(201, res("case2"), STAR, STAR, deny=(item("create", "drop", "alter", groups=["public"]),)),
    policy(202, res("case2"), res("t1"), STAR, allow=(item("select", "update", "drop", "read", "write", users=["hive"]),)),
    policy(301, res("case3"), STAR, STAR, priority=1, deny=(item("create", "drop", "alter", groups=["public"]),)),
    policy(302, res("case3"), res("t1"), STAR, allow=(item("select", "update", "create", "alter", "index", "lock", "read", "write", users=["hive"]),)),
    policy(401, res("case4"), STAR, STAR, priority=1, deny=(item("create", "drop", "alter", groups=["public"]),)),
    policy(402, res("case4"), res("t1"), STAR, priority=1, allow=(item("create", "drop", "alter", users=["hive"]),)),
])


@pytest.mark.parametrize("db,expected", [
    ("case1", (True, 102)), ("case2", (True, 202)), ("case3", (True, 302)), ("case4", (False, -1)),
])
def test_any_access_with_priorities(db, expected):
    assert decide("hive", [], db, engine=PRIORITY) == expected


def test_deny_beats_allow_and_higher_priority_wins():
    engine = PolicyEngine([
        policy(1, res("db"), STAR, STAR, allow=(item("select", groups=["public"]),)),
        policy(2, res("db"), res("secret"), STAR, deny=(item("select", groups=["interns"]),)),
        policy(3, res("db"), res("secret"), STAR, priority=1, allow=(item("select", users=["ian"]),)),
    ])
    assert decide("ann", ["interns"], "db", "open", "c", "select", engine) == (True, 1)
    assert decide("ann", ["interns"], "db", "secret", "c", "select", engine) == (False, 2)
    assert decide("ian", ["interns"], "db", "secret", "c", "select", engine) == (True, 3)  # override
    # a deny of higher priority than an allow wins as well
    engine = PolicyEngine([
        policy(5, res("db"), STAR, STAR, allow=(item("all", users=["ann"]),)),
        policy(6, res("db"), STAR, STAR, priority=1, deny=(item("drop", users=["ann"]),)),
    ])
    assert decide("ann", [], "db", "t", access="drop", engine=engine) == (False, 6)
    assert decide("ann", [], "db", "t", access="alter", engine=engine) == (True, 5)


def test_deny_exceptions():
    engine = PolicyEngine([
        policy(1, res("db"), STAR, STAR, allow=(item("select", groups=["public"]),),
               deny=(item("select", groups=["contractors"]),),
               deny_exceptions=(item("select", users=["carl"]),)),
    ])
    assert decide("cora", ["contractors"], "db", "t", access="select", engine=engine) == (False, 1)
    assert decide("carl", ["contractors"], "db", "t", access="select", engine=engine) == (True, 1)


def test_deny_of_a_policy_below_does_not_hide_the_parent():
    engine = PolicyEngine([
        policy(1, res("db"), STAR, STAR, allow=(item("select", groups=["public"]),)),
        policy(2, res("db"), res("secret"), STAR, deny=(item("all", groups=["public"]),)),
    ])
    assert engine.visible("ann", [], "db")
    assert not engine.visible("ann", [], "db", "secret")
    assert engine.visible("ann", [], "db", "open")


def test_disabled_policy_is_ignored():
    engine = PolicyEngine([
        policy(1, res("db"), STAR, allow=(item("select", groups=["public"]),)),
        policy(2, res("db"), STAR, enabled=False, deny=(item("select", groups=["public"]),)),
        policy(3, res("db"), STAR, enabled=False, deny_all_else=True),
    ])
    assert decide("ann", [], "db", "t", access="select", engine=engine) == (True, 1)
    assert decide("ann", [], "db", "t", access="drop", engine=engine) == (False, -1)


def test_wildcards_are_case_insensitive_and_literal_otherwise():
    engine = PolicyEngine([
        policy(1, res("Sales_?"), res("ORD*[x]"), allow=(item("select", users=["ann"]),)),
    ])
    assert decide("ann", [], "SALES_1", "ord_2024[X]", access="select", engine=engine) == (True, 1)
    assert decide("ann", [], "sales_12", "ord[x]", access="select", engine=engine) == (False, -1)  # ? is one char
    assert decide("ann", [], "sales_1", "ordx", access="select", engine=engine) == (False, -1)  # [x] is literal
    assert decide("Ann", [], "sales_1", "ord[x]", access="select", engine=engine) == (False, -1)  # users are exact


def test_public_and_current_user():
    engine = PolicyEngine([
        policy(1, res("home_{USER}"), STAR, allow=(item("all", users=["{USER}"]),)),
        policy(2, res("shared"), STAR, allow=(item("select", groups=["public"]),)),
    ])
    assert decide("ann", [], "home_ann", "t", access="drop", engine=engine) == (True, 1)
    assert decide("ann", [], "HOME_ANN", "t", access="drop", engine=engine) == (True, 1)
    assert decide("ann", [], "home_bob", "t", access="drop", engine=engine) == (False, -1)
    assert decide("zed", ["nobody"], "shared", "t", access="select", engine=engine) == (True, 2)
    assert engine.visible_databases("ann", [], ["home_ann", "home_bob", "shared"]) == ["home_ann", "shared"]


def test_all_grants_every_access_and_is_itself_an_access():
    engine = PolicyEngine([policy(1, res("db"), STAR, allow=(item("all", users=["ann"]),)),
                           policy(2, res("db"), STAR, allow=(item("select", users=["bob"]),))])
    for access in ("select", "update", "create", "drop", "alter", "index", "lock", "read", "write", "all"):
        assert decide("ann", [], "db", "t", access=access, engine=engine) == (True, 1)
    assert decide("bob", [], "db", "t", access="all", engine=engine) == (False, -1)


def test_bad_requests_raise_value_error():
    with pytest.raises(ValueError, match="unknown access type"):
        CATALOG.evaluate("ann", [], Resource("db"), "delete")
    with pytest.raises(ValueError, match="column needs its table"):
        CATALOG.evaluate("ann", [], Resource("db", None, "c"), "select")


def test_listing_filters_agree_with_visible():
    names = ["orders_1", "ORDERS_2", "customers", "orders", "staff_a", "pay", "leads", "x\ny"]
    for user, groups in [("alice", ["staff"]), ("carol", ["analysts"]), ("eve", []), ("bob", [])]:
        for db in ("sales", "hr", "mkt1", "scratch", "finance"):
            expected = [n for n in names if CATALOG.visible(user, groups, db, n)]
            assert CATALOG.visible_tables(user, groups, db, names) == expected, (user, db)
            plain = names[:-1]  # no newline in a name: the one-pass path
            assert CATALOG.visible_tables(user, groups, db, plain) == [n for n in expected if n in plain]
        dbs = ["sales", "HR", "mkt1", "mkt2", "scratch", "finance"]
        assert CATALOG.visible_databases(user, groups, dbs) == [d for d in dbs if CATALOG.visible(user, groups, d)]
    assert CATALOG.visible_tables("alice", ["staff"], "sales", ["orders_1", "customers"]) == ["orders_1"]
    assert CATALOG.visible_databases("eve", [], ["sales", "hr", "mkt1"]) == []


def test_listing_with_excluded_and_per_user_table_names():
    engine = PolicyEngine([
        policy(1, res("db"), res("tmp_*", "{USER}_*", excludes=True), allow=(item("select", groups=["public"]),)),
        policy(2, res("db"), res("{USER}_own"), allow=(item("select", users=["{USER}"]),)),
        policy(3, res("db"), res("audit"), STAR, deny=(item("all", groups=["public"]),)),
    ])
    names = ["tmp_1", "ann_x", "ann_own", "bob_own", "facts", "audit"]
    # audit: a deny for everyone at the same priority as the allow
    assert engine.visible_tables("ann", [], "db", names) == ["ann_own", "bob_own", "facts"]
    assert [n for n in names if engine.visible("ann", [], "db", n)] == ["ann_own", "bob_own", "facts"]
    assert engine.visible_tables("bob", [], "db", names) == ["ann_x", "ann_own", "bob_own", "facts"]


def test_listing_with_many_prefix_values():
    engine = PolicyEngine([
        policy(1, res("db"), res("a*", "ab*", "c*", "d?x*"), allow=(item("select", users=["ann"]),)),
        policy(2, res("db"), res("ab_secret*"), deny=(item("select", users=["ann"]),)),
    ])
    names = ["a", "ab", "ab_secret_1", "b", "c1", "dzx", "dx", "AB_SECRET"]
    expected = [n for n in names if engine.visible("ann", [], "db", n)]
    assert expected == ["a", "ab", "c1", "dzx"]
    assert engine.visible_tables("ann", [], "db", names) == expected


def test_authorized_columns_follow_column_level_policies():
    # hr.pay: alice may select every column but secret* (an excluding column level)
    assert CATALOG.columns_uniform("alice", [], "hr", "pay") is None
    assert CatalogView(CATALOG, "alice").columns("HR", "pay", ["id", "Secret_SSN", "name", "secret2"]) \
        == ["id", "name"]
    assert CatalogView(CATALOG, "bob").columns("hr", "pay", ["id", "name"]) == []
    # sales.orders*: every column-level policy says 'column: *', so one decision covers all
    uniform = CATALOG.columns_uniform("alice", [], "sales", "orders_2024")
    assert uniform is not None and uniform.allowed and uniform.policy_id == 2
    assert CatalogView(CATALOG, "alice").columns("sales", "orders_2024", ["a", "b"]) == ["a", "b"]
    denied = CATALOG.columns_uniform("carol", ["other"], "sales", "orders_2024")
    assert denied is not None and not denied.allowed
    assert CatalogView(CATALOG, "carol", ["other"]).columns("sales", "orders_2024", ["a"]) == []


def test_a_deny_on_one_column_filters_only_that_column():
    engine = PolicyEngine([
        policy(1, res("sales"), STAR, STAR, allow=(item("select", groups=["analysts"]),)),
        policy(2, res("sales"), res("customers"), res("ssn"), deny=(item("select", groups=["analysts"]),)),
    ])
    assert engine.columns_uniform("alice", ["analysts"], "sales", "orders").allowed
    assert engine.columns_uniform("alice", ["analysts"], "sales", "customers") is None
    assert CatalogView(engine, "alice", ["analysts"]).columns("sales", "customers", ["name", "SSN", "ssn2"]) \
        == ["name", "ssn2"]
    # the table stays visible: a deny below it does not hide it (Ranger's ignoreDescendantDeny)
    assert engine.visible("alice", ["analysts"], "sales", "customers")
    with pytest.raises(ValueError):
        CatalogView(engine, "alice").may("peek", "sales", "orders")


def test_batch_listing_agrees_with_one_by_one_under_many_wildcard_user_and_excluding_levels():
    """The batch paths (per-user {USER} levels, literal prefilters, one union pass, many
    prefixes, remembered verdicts) decide as visible() does name by name, call after call."""
    policies = []
    for i in range(40):
        table = [res(f"*{i % 7}?x*"), res(f"t{i}_*", "t*", excludes=True), res(f"{{USER}}_{i}*"), res(f"tab{i}"),
                 res(f"p{i}*", f"q{i}*")][i % 5]
        policies.append(policy(i + 1, res("sales", "db*"), table, STAR,
                               allow=(item("select", groups=["analysts"]),),
                               deny=(item("select", groups=[f"g{i % 4}"]),) if i % 3 == 0 else (),
                               priority=i % 2))
    engine = PolicyEngine(policies)
    names = [f"t{i}_tab{i % 37}" for i in range(300)] + ["ann_3x", "ann_13", "p5_a", "q9", "a1bx", "zz2yx", "T7_Up"]
    for user, groups in [("ann", ["analysts"]), ("bob", ["g0"]), ("ann", ["g1", "g2"]), ("eve", [])]:
        for db in ("sales", "db_x", "other"):
            expected = [n for n in names if engine.visible(user, groups, db, n)]
            for _ in range(2):  # the second call meets remembered verdicts
                assert engine.visible_tables(user, groups, db, names) == expected, (user, groups, db)
    assert 0 < len([n for n in names if engine.visible("ann", ["analysts"], "sales", n)]) < len(names)
