"""The listing filter's batch path (:meth:`PolicyEngine.visible_tables`,
:meth:`PolicyEngine.visible_databases`: one trie regex pass per listing, decisions per
signature) against the general path, :meth:`PolicyEngine.visible` name by name, on generated
policies and listings: wildcard values and names holding ``*``/``?``, excluding levels,
``{USER}``, non-ASCII (final sigma, dotted I), empty names and listings, newlines, databases
the user cannot see. The catalog-policy step's listing branch is checked the same way on
strict-binary ``get_all_tables``/``get_all_databases`` replies, invalid UTF-8 included."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.observability.audit import AuditEvent
from gateway.hms_thrift.exchange import ThriftExchange
from gateway.hms_thrift.reply import ThriftReply
from gateway.hms_thrift.steps.catalog_policy import CatalogPolicy
from gateway.thrift.objects import encode_reply
from gateway.policy import PolicyEngine
from gateway.policy.model import Policy, PolicyItem, ResourceSpec, expand_accesses
from gateway.providers.authentication.base import Principal
from gateway.providers.identity import Identity
from gateway.thrift.binary import encode_binary_call, read_message_header
from gateway.thrift.schema import TType, load_schema
from tests.support.fake_hms import list_of_strings_reply

SCHEMA = load_schema()
ALPHABET = "ab_1*?.\u03a3\u03c3\u0130Ié{}"
# Name-like text: short runs of a few letters, so that values and names meet often.
text = st.text(alphabet=ALPHABET, max_size=6)
value = st.one_of(
    text,
    text.map(lambda t: t + "*"),
    st.tuples(text, text).map(lambda p: f"*{p[0]}?{p[1]}*"),
    text.map(lambda t: "{USER}" + t),
    st.sampled_from(["*", "a*", "A_1", "*1", "?", "{user}_*"]),
)
level = st.builds(ResourceSpec, st.lists(value, min_size=1, max_size=3).map(tuple), st.booleans())
users = st.sampled_from(["ann", "Ann", "bob", "a*", "b?1", "{user}", "x{USER}", "\u0130van"])
group_sets = st.frozensets(st.sampled_from(["g1", "g2", "staff"]), max_size=2)


@st.composite
def items(draw):
    return PolicyItem(expand_accesses(draw(st.lists(st.sampled_from(["select", "update", "all", "read"]),
                                                     min_size=1, max_size=2))),
                      draw(st.frozensets(st.sampled_from(["ann", "bob", "{USER}", "Ann"]), max_size=2)),
                      draw(st.frozensets(st.sampled_from(["g1", "g2", "public"]), max_size=1)))


@st.composite
def policies(draw):
    out = []
    for i in range(draw(st.integers(1, 10))):
        depth = draw(st.integers(1, 3))
        out.append(Policy(
            i + 1, f"p{i}", tuple(draw(level) for _ in range(depth)),
            allow=tuple(draw(st.lists(items(), max_size=2))),
            allow_exceptions=tuple(draw(st.lists(items(), max_size=1))),
            deny=tuple(draw(st.lists(items(), max_size=1))),
            deny_exceptions=tuple(draw(st.lists(items(), max_size=1))),
            priority=draw(st.integers(0, 1)), deny_all_else=draw(st.booleans()), enabled=draw(st.booleans())))
    return out


names = st.lists(st.one_of(text, st.sampled_from(["", "A*1", "ab\nc", "a\u03a3", "\u0130_1"])), max_size=40)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies(), users, group_sets, st.one_of(text, st.just("nobody_sees_this")), names)
def test_batch_listing_decides_as_visible_name_by_name(policy_list, user, groups, database, listing):
    engine = PolicyEngine(policy_list)
    expected_tables = [n for n in listing if engine.visible(user, groups, database, n)]
    expected_databases = [n for n in listing if engine.visible(user, groups, n)]
    for _ in range(2):  # the second round meets the remembered filter and verdicts
        assert engine.visible_tables(user, groups, database, listing) == expected_tables
        assert engine.visible_databases(user, groups, listing) == expected_databases
    for db, expected in ((database, expected_tables), (None, expected_databases)):
        verdict = engine.listing_verdict(user, groups, db)
        if verdict is not None:  # the same for every name: the step skips decoding then
            assert expected == (listing if verdict else [])


def test_many_policies_on_one_database_in_one_pass():
    """Literal, prefix and wildcard values of 300 policies (a deep trie, long values) on one
    listing of 2,000 names, and values deeper than the trie may nest."""
    long = "l" * 300
    policy_list = [Policy(i + 1, f"p{i}", (ResourceSpec(("sales",)), ResourceSpec(
        ([f"t{i}", f"t{i}_*", f"*{i}?z*", long[:i + 1], long[:i] + "*"][i % 5],), i % 7 == 0)),
        allow=(PolicyItem(expand_accesses(["select"]), frozenset({"ann"})),),
        deny=(PolicyItem(expand_accesses(["select"]), frozenset({"ann"})),) if i % 11 == 5 and i % 7 else ())
        for i in range(300)]
    engine = PolicyEngine(policy_list)
    listing = [f"T{i}_{i % 13}z" for i in range(1500)] + [long[:i] for i in range(500)] + ["", "t5", "T7"]
    expected = [n for n in listing if engine.visible("ann", [], "sales", n)]
    assert 0 < len(expected) < len(listing)
    assert engine.visible_tables("ann", [], "Sales", listing) == expected
    assert engine.visible_tables("ann", [], "other", listing) == []


def test_a_database_the_user_cannot_see_lists_nothing_without_looking_at_names():
    engine = PolicyEngine([Policy(1, "p", (ResourceSpec(("sales",)), ResourceSpec(("t*",))),
                                  allow=(PolicyItem(expand_accesses(["select"]), frozenset({"ann"})),))])
    assert engine.listing_verdict("ann", [], "hr") is False
    assert engine.listing_verdict("ann", [], "sales") is None
    assert engine.visible_tables("ann", [], "hr", ["t1", "x"]) == []
    assert engine.visible_tables("ann", [], "sales", ["t1", "x", "T2"]) == ["t1", "T2"]
    assert engine.visible_tables("ann", [], "sales", []) == []


# --- the catalog-policy step on strict-binary listing replies ------------------------------

def _reply_names(step: CatalogPolicy, method: str, call: bytes, items: list, user: str, groups) -> list:
    identity = Identity(user, Principal(user, "basic"), frozenset(groups))
    header, _ = read_message_header(call)
    exchange = ThriftExchange(None, AuditEvent("t", None),  # type: ignore[arg-type]
                        identity=identity, header=header, call=call)
    reply = ThriftReply(list_of_strings_reply(method, 1, items), SCHEMA)
    asyncio.run(step.on_reply(exchange, reply))
    return ThriftReply(reply.message, SCHEMA).result.success


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies(), users, group_sets, text, st.lists(st.one_of(text, st.binary(max_size=4)), max_size=30))
def test_step_listing_keeps_what_visible_keeps(policy_list, user, groups, database, listing):
    engine = PolicyEngine(policy_list)
    step = CatalogPolicy("t", "/hms", engine, SCHEMA)
    # as the reply decodes: UTF-8 names as str, anything else as bytes
    decoded = ThriftReply(list_of_strings_reply("get_all_tables", 1, listing), SCHEMA).result.success
    shown = [n if isinstance(n, str) else n.decode("utf-8", "surrogateescape") for n in decoded]
    call = encode_binary_call("get_all_tables", 1, [(1, TType.STRING, database)])
    assert _reply_names(step, "get_all_tables", call, listing, user, groups) == [
        n for n, s in zip(decoded, shown) if engine.visible(user, groups, database, s)]
    call = encode_binary_call("get_all_databases", 1, [])
    assert _reply_names(step, "get_all_databases", call, listing, user, groups) == [
        n for n, s in zip(decoded, shown) if engine.visible(user, groups, s)]


def test_step_does_not_decode_a_listing_the_policies_decide_alike():
    """A database the user may see whole keeps HMS's bytes; one they cannot see answers an
    empty list; HMS's declared exception passes either way."""
    engine = PolicyEngine([Policy(1, "p", (ResourceSpec(("sales",)), ResourceSpec(("*",))),
                                  allow=(PolicyItem(expand_accesses(["select"]), frozenset({"ann"})),))])
    step = CatalogPolicy("t", "/hms", engine, SCHEMA)
    result_class = SCHEMA.methods["get_all_tables"].result_class
    _, field, exception, _ = result_class.thrift_spec[1]
    failure = encode_reply("get_all_tables", 1, result_class(**{field: exception(message="boom")}))
    for database, expected in (("sales", ["a", "b\xff"]), ("hr", [])):
        call = encode_binary_call("get_all_tables", 1, [(1, TType.STRING, database)])
        header, _ = read_message_header(call)
        for message, shown in ((list_of_strings_reply("get_all_tables", 1, ["a", "b\xff"]), expected),
                               (failure, None)):
            exchange = ThriftExchange(None, AuditEvent("t", None),  # type: ignore[arg-type]
                                identity=Identity("ann", Principal("ann", "basic"), frozenset()),
                                header=header, call=call)
            reply = ThriftReply(message, SCHEMA)
            asyncio.run(step.on_reply(exchange, reply))
            if shown is None or database == "sales":
                assert reply.message is message  # untouched
            if database == "sales" and shown is not None:
                assert reply._result is None  # never decoded
            assert ThriftReply(reply.message, SCHEMA).result.success == shown
            assert exchange.event.policy_hidden == (None if shown is None else 2 - len(shown))
