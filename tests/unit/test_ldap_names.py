"""Issue 48, canonical user names: which attribute of an LDAP entry is the user name, and which
of its values a login names (the directory's spelling, as its case-ignoring match found it)."""

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
