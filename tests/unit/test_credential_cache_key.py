"""The credential cache's keys: a keyed digest per process, never the password (issue 14 moved
it from HMAC-SHA256 to keyed BLAKE2b, which costs a third of the instructions)."""

from __future__ import annotations

from gateway.providers.authentication.credential_cache import CredentialCache


def test_keys_are_keyed_digests_that_tell_credentials_apart():
    cache = CredentialCache()
    key = cache.key("alice", "secret")
    assert len(key) == 32 and b"secret" not in key and b"alice" not in key
    assert cache.key("alice", "secret") == key
    # The separator keeps ("ab", "c") and ("a", "bc") apart; the key is per cache (per process).
    assert len({key, cache.key("alice", "secret2"), cache.key("alic", "esecret"), cache.key("bob", "secret"),
                CredentialCache().key("alice", "secret")}) == 5


def test_a_cached_principal_is_found_by_its_credentials_only():
    cache = CredentialCache()
    cache.put("alice", "secret", "principal")
    assert cache.get("alice", "secret") == "principal"
    assert cache.get("alice", "Secret") is None and cache.get("Alice", "secret") is None
