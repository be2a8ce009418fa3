"""Issue 48, canonical user names: which attribute of an LDAP entry is the user name, and which
of its values a login names (the directory's spelling, as its case-ignoring match found it);
with a fake connection, that a failed group search refuses a login or a lookup, and that lookups
are cached. The real slapd: tests/integration/test_auth_ldap.py."""

from __future__ import annotations

import pytest

from gateway.providers.authentication.ldap import LdapProvider
from gateway.providers.authentication.ldap_authenticator import directory_spelling

BASE = {"type": "ldap", "url": "ldap://ldap:389"}


@pytest.mark.parametrize("settings, attributes", [
    ({"user_dn_template": "uid={user},ou=people,dc=x"}, ("uid",)),
    ({"user_dn_template": "sAMAccountName={user},dc=x"}, ("sAMAccountName",)),
    ({"user_search_base": "dc=x"}, ("uid",)),  # the default filter (uid={user})
    ({"user_search_base": "dc=x", "user_search_filter": "(&(objectClass=person)(sAMAccountName={user}))"},
     ("sAMAccountName",)),
    ({"user_search_base": "dc=x", "user_search_filter": "(|(uid={user})(mail={user})(uid={user}))"},
     ("uid", "mail")),
    # both set: the template decides (the authenticator binds with it, never searches)
    ({"user_dn_template": "cn={user},dc=x", "user_search_base": "dc=x"}, ("cn",)),
])
def test_the_name_attribute_is_the_one_compared_with_the_login(settings, attributes):
    assert LdapProvider(**BASE, **settings).name_attributes == attributes


@pytest.mark.parametrize("settings", [
    {"user_dn_template": "{user}@corp.example.org"},  # a UPN bind: no attribute to read the name from
    {"user_dn_template": "cn=x,uid={user},dc=x"},
    {"user_search_base": "dc=x", "user_search_filter": "(uid={user}*)"},
    {"user_search_base": "dc=x", "user_search_filter": "(uid:caseExactMatch:={user})"},
])
def test_settings_naming_no_attribute_fail(settings):
    with pytest.raises(ValueError, match=r"\{user\}"):
        LdapProvider(**BASE, **settings)


@pytest.mark.parametrize("login, values, spelling", [
    ("ALICE", ["alice"], "alice"),
    ("alice", ["Alice"], "Alice"),  # the directory's spelling, whatever it is
    ("  aLiCe ", ["alice"], "alice"),  # insignificant spaces (RFC 4518 §2.6.1)
    ("ｂｏｂ", ["bob"], "bob"),  # compatibility forms (NFKC, RFC 4518 §2.2)
    ("STRASSE", ["straße"], "straße"),  # full case folding
    ("alice@example.org", ["alice", "alice@example.org"], "alice@example.org"),
    ("bob", ["alice"], None),  # found some other way: refused, never guessed
    ("alice", [], None),
])
def test_directory_spelling(login, values, spelling):
    assert directory_spelling(login, values) == spelling


# --- the authenticator against a fake ldap3 connection: failures refuse, lookups are cached ----

class _Values:
    def __init__(self, values):
        self.values = values


class _Entry:
    def __init__(self, dn: str, attributes: dict[str, list[str]]):
        self.entry_dn, self._attributes = dn, attributes

    def __contains__(self, name):
        return name in self._attributes

    def __getitem__(self, name):
        return _Values(self._attributes[name])


class _Connection:
    """Answers searches for alice's entry and the group search; ``failing`` searches (by base)
    answer ``unavailable`` (52), as a directory that cannot serve them."""

    def __init__(self, log: list, failing: str | None):
        self.log, self.failing, self.result, self.entries = log, failing, {}, []

    def bind(self):
        return True

    def unbind(self):
        pass

    def search(self, base, flt, search_scope=None, attributes=None, size_limit=0):
        self.log.append((base, flt))
        if base == self.failing:
            self.result, self.entries = {"result": 52, "description": "unavailable"}, []
        elif base == "ou=people,dc=x":
            self.result, self.entries = {"result": 0}, [_Entry("uid=alice,ou=people,dc=x", {})]
        elif base == "uid=alice,ou=people,dc=x":
            self.result, self.entries = {"result": 0}, [_Entry(base, {"uid": ["alice"]})]
        else:  # the group search
            self.result, self.entries = {"result": 0}, [_Entry("cn=analysts,dc=x", {"cn": ["analysts"]})]


def _authenticator(failing: str | None = None):
    from gateway.providers.authentication.ldap_authenticator import LdapAuthenticator
    provider = LdapProvider(**BASE, user_search_base="ou=people,dc=x", group_search_base="ou=groups,dc=x")
    authenticator = LdapAuthenticator(provider)
    searches: list = []
    authenticator._connection = lambda user=None, password=None: _Connection(searches, failing)
    return authenticator, searches


def test_a_login_is_the_directorys_spelling_with_its_groups_searched_by_it():
    authenticator, searches = _authenticator()
    principal = authenticator._verify("ALICE", "pw")
    assert (principal.name, principal.groups) == ("alice", {"analysts"})
    assert "(memberUid=alice)" in searches[-1][1]  # the group search names the directory's spelling


def test_a_failed_group_search_refuses_the_login_and_the_lookup():
    from gateway.providers.authentication.base import DirectoryUnavailable
    authenticator, _ = _authenticator(failing="ou=groups,dc=x")
    assert authenticator._verify("alice", "pw") is None  # never alice without her groups
    with pytest.raises(DirectoryUnavailable, match="unavailable"):
        authenticator._look_up("alice")


async def test_lookups_are_cached_by_name():
    authenticator, searches = _authenticator()
    first = await authenticator.lookup("alice")
    count = len(searches)
    assert await authenticator.lookup("alice") == first and len(searches) == count
    assert (first.name, first.groups) == ("alice", {"analysts"})
    assert (await authenticator.lookup("ALICE")).name == "alice"
