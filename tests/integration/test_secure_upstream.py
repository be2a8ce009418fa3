"""The gateway's upstream against a real Kerberized HMS 2.3.10 and a real KDC
(tests/support/secure_hms.py): GSSAPI at each QOP, delegation-token impersonation (HMS's audit
shows the end user) at each QOP, a refused proxy user, an evicted user's token cancelled, tokens replaced
under short lifetimes, and the faults' errors (KDC unreachable: 503; wrong service principal or
QOP: 502 naming both sides). The pools are driven in-process, as every kind drives them
(tests/integration/test_kerberized_metastore.py runs the kinds through a gateway).

One KDC and HMS for the module, with delegation tokens that must be renewed every 6 s and live
12 s at most.
"""

from __future__ import annotations

import asyncio
import os
import re
import struct
import time
from pathlib import Path

import pytest

from gateway.upstream.settings import SaslConfig
from gateway.pipeline.outcomes import status_of
from gateway.providers.identity import Identity
from gateway.upstream.kerberos import KeytabLogin
from gateway.upstream.metastore import MetastoreClient
from gateway.upstream.failover import Upstream
from gateway.upstream.pool import UpstreamPool
from gateway.upstream.sasl import StaleCredentials, UpstreamAuthFailed, negotiate
from gateway.upstream.secure import SaslConnector, UpstreamProxyUserRefused
from gateway.upstream.digest import DigestMechanism
from gateway.upstream.tokens import parse_token
from tests.support.secure_hms import running_secure_hms

pytestmark = pytest.mark.integration

RENEW_MS, MAX_MS = 6_000, 12_000
MAX_REPLY = 1 << 30


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    with running_secure_hms(tmp_path_factory.mktemp("secure-upstream"),
                            token_renew_interval_ms=RENEW_MS, token_max_lifetime_ms=MAX_MS) as running:
        old = os.environ.get("KRB5_CONFIG")
        os.environ["KRB5_CONFIG"] = running.env["KRB5_CONFIG"]  # MIT's gssapi reads it per call
        try:
            yield running
        finally:
            if old is None:
                os.environ.pop("KRB5_CONFIG", None)
            else:
                os.environ["KRB5_CONFIG"] = old


def _sasl(secure, **more) -> SaslConfig:
    return SaslConfig.model_validate({**secure.gateway_sasl(), **more})


def _pool(secure, max_identities: int = 16, **more) -> UpstreamPool:
    connector = SaslConnector(_sasl(secure, **more), "localhost", MAX_REPLY)
    return UpstreamPool(secure.url, connector=connector, max_identities=max_identities, timeout=30)


def _client(pool: UpstreamPool) -> MetastoreClient:
    return MetastoreClient(Upstream([pool]))


def _user(name: str) -> Identity:
    return Identity(user=name, principal=None, groups=frozenset({"analysts"}))


@pytest.mark.parametrize("protection", ["authentication", "integrity", "privacy"])
def test_gssapi_as_the_gateway_at_each_protection(secure, protection):
    async def go():
        pool = _pool(secure, protection=protection, impersonation="none")
        try:
            client = _client(pool)
            name = f"qop_{protection}"
            await client.call("create_database", database=client.idl.Database(
                name=name, description="x" * 3900, locationUri=None, parameters={"k%d" % i: "v" * 3000 for i in range(60)}))
            db = await client.call("get_database", name=name, identity=_user("alice"))
            await client.call("drop_database", name=name, deleteData=True, cascade=True)
            mechanism = pool._idle[0].io.mechanism
            # the TGT's lifetime is known: the login renews itself before it ends (no kinit)
            assert time.time() < pool.connector.login._renew_at < time.time() + 2 * 86400
            return db, mechanism.qop
        finally:
            await pool.close()

    db, qop = asyncio.run(go())
    assert db.description == "x" * 3900
    assert len(db.parameters) == 60  # a reply of ~180 KB, wrapped and unwrapped whole
    assert qop == {"authentication": "auth", "integrity": "auth-int", "privacy": "auth-conf"}[protection]
    # impersonation: none runs every call as the gateway's principal, also one acting for alice
    assert "alice" not in secure.audit_users("get_database: qop_")


def test_each_user_under_their_own_identity_with_a_delegation_token(secure):
    async def go():
        pool = _pool(secure)
        try:
            client = _client(pool)
            await client.call("get_all_databases", identity=_user("etl"))
            await client.call("get_all_databases", identity=_user("etl"))  # the same connection
            await client.call("get_database", name="default", identity=_user("analyst1"))
            await client.call("get_database", name="default")  # the gateway's own call
            tokens = pool.connector.tokens
            return tokens.fetched, len(pool._idle), tokens._held["etl"].token
        finally:
            await pool.close()

    fetched, idle, token = asyncio.run(go())
    assert fetched == 2 and idle == 3
    assert token.owner == "etl" and token.renewer == "hmsgw"
    users = secure.audit_users("get_database: default") | secure.audit_users("get_all_databases")
    assert {"etl", "analyst1"} <= users
    assert any(u.startswith("hmsgw/") for u in secure.audit_users("get_database: default"))
    assert token.text not in secure.log()  # HMS logs no token: neither does the gateway (caplog below)


@pytest.mark.parametrize("protection", ["integrity", "privacy"])
def test_each_user_under_their_own_identity_at_integrity_and_privacy(secure, protection):
    """DIGEST-MD5 with the user's token at auth-int/auth-conf (Cyrus SASL against HMS's Java
    server): a request of ~180 KB crosses HMS's 64 KiB receive buffer (several frames), its
    reply comes back in one wrapped frame, and HMS audits the user."""
    user, name = f"dt_{protection}", f"dt_qop_{protection}"

    async def go():
        pool = _pool(secure, protection=protection)
        try:
            client = _client(pool)
            parameters = {"k%d" % i: "v" * 3000 for i in range(60)}
            await client.call("create_database", identity=_user(user), database=client.idl.Database(
                name=name, description="y" * 3900, locationUri=None, parameters=parameters))
            db = await client.call("get_database", name=name, identity=_user(user))
            await client.call("drop_database", name=name, deleteData=True, cascade=True, identity=_user(user))
            digest = next(conn.io.mechanism for conn in pool._idle if conn.io.mechanism.name == "DIGEST-MD5")
            return db, {conn.io.mechanism.name: conn.io.mechanism.qop for conn in pool._idle}, digest.ssf
        finally:
            await pool.close()

    db, qops, ssf = asyncio.run(go())
    assert db.description == "y" * 3900 and len(db.parameters) == 60
    qop = {"integrity": "auth-int", "privacy": "auth-conf"}[protection]
    # the user's DIGEST-MD5 connection and the gateway's GSSAPI one (its token fetch), both at it
    assert qops == {"DIGEST-MD5": qop, "GSSAPI": qop}
    assert ssf == {"integrity": 1, "privacy": 128}[protection]  # privacy: RC4-128 with Java's server
    assert secure.audit_users(f"get_database: {name}") == {user}
    assert secure.audit_users(f"create_database: Database(name:{name}") == {user}


async def _stripping_proxy(port: int, ciphers: bytes):
    """A man in the middle before HMS that replaces the cipher-opts of its DIGEST-MD5 challenge
    (the first SASL message HMS sends) with ``ciphers``; the rest passes unchanged."""

    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def handle(client_reader, client_writer):
        hms_reader, hms_writer = await asyncio.open_connection("localhost", port)
        upward = asyncio.ensure_future(pipe(client_reader, hms_writer))
        try:
            status, size = struct.unpack("!BI", await hms_reader.readexactly(5))
            challenge = re.sub(rb'cipher="[^"]*"', b'cipher="' + ciphers + b'"', await hms_reader.readexactly(size))
            client_writer.write(struct.pack("!BI", status, len(challenge)) + challenge)
            await pipe(hms_reader, client_writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            client_writer.close()
        finally:
            upward.cancel()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


@pytest.mark.parametrize("ciphers,ssf", [(b"rc4-40,rc4-56,des", None), (b"rc4-40,des,rc4", 128)])
def test_privacy_holds_to_112_bit_ciphers_when_hmss_challenge_is_stripped(secure, ciphers, ssf):
    """HMS's cipher-opts are not covered by the digest: an attacker stripping its strong ciphers
    gets a 502 naming both sides (Cyrus's min_ssf), never a connection at 40 or 56 bits."""
    async def go():
        pool = _pool(secure, protection="privacy")
        proxy = await _stripping_proxy(secure.port, ciphers)
        try:
            await _client(pool).call("get_all_databases", identity=_user("stripped"))
            mechanism = DigestMechanism(pool.connector.tokens._held["stripped"].token, "privacy", "hms")
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
            try:
                await negotiate(reader, writer, mechanism, "hms")
                return mechanism.ssf
            finally:
                writer.close()
        finally:
            proxy.close()
            await pool.close()

    if ssf is None:
        with pytest.raises(UpstreamAuthFailed) as caught:
            asyncio.run(go())
        assert "the ciphers rc4-40,rc4-56,des but the gateway's upstream.sasl.protection privacy " \
               "requires one of at least 112 bits (3des or rc4)" in str(caught.value)
        assert status_of(caught.value)[0] == 502
    else:  # the strong one among weak ones: chosen, and HMS's Java server agrees
        assert asyncio.run(go()) == ssf


@pytest.mark.parametrize("encrypt", [True, False])
def test_gssapi_privacy_refuses_a_frame_the_peer_did_not_encrypt(secure, encrypt):
    """MIT Kerberos on both sides: an acceptor with HMS's service keytab, speaking Thrift's
    SASL server side, offers privacy, then wraps its reply with or without confidentiality.
    GSS-API's unwrap tells which (python-gssapi's ``encrypted``); the gateway takes only the
    encrypted one."""
    import gssapi

    from gateway.upstream.kerberos import GssapiMechanism
    from gateway.upstream.sasl import COMPLETE, OK, SaslTransport, encode_message
    from gateway.upstream.errors import UpstreamBadReply

    reply = b"\x80\x01\x00\x02" + b"r" * 100

    async def acceptor(reader, writer):
        async def message():
            status, size = struct.unpack("!BI", await reader.readexactly(5))
            return status, await reader.readexactly(size)

        creds = gssapi.Credentials(usage="accept", store={"keytab": str(secure.service_keytab)})
        context = gssapi.SecurityContext(creds=creds, usage="accept")
        await message()  # START GSSAPI
        writer.write(encode_message(OK, context.step((await message())[1]) or b""))
        await message()  # the client's last context token (empty)
        writer.write(encode_message(OK, context.wrap(struct.pack("!I", 4 << 24 | 65536), False).message))
        await message()  # the client's choice
        writer.write(encode_message(COMPLETE, b""))
        wrapped = context.wrap(reply, encrypt)
        assert wrapped.encrypted is encrypt
        writer.write(struct.pack("!I", len(wrapped.message)) + wrapped.message)
        await writer.drain()

    async def go():
        server = await asyncio.start_server(acceptor, "127.0.0.1", 0)
        mechanism = GssapiMechanism(KeytabLogin(secure.gateway_principal, secure.gateway_keytab),
                                    secure.service_principal, "privacy", "hms")
        await mechanism.prepare()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        try:
            await negotiate(reader, writer, mechanism, "hms")
            return await SaslTransport(reader, writer, "hms", mechanism, MAX_REPLY).chunk()
        finally:
            writer.close()
            server.close()

    if encrypt:
        assert asyncio.run(go()) == reply
    else:
        with pytest.raises(UpstreamBadReply, match="unencrypted frame at privacy"):
            asyncio.run(go())


def test_a_refused_proxy_user_gets_a_502_naming_the_hadoop_settings(secure):
    async def go():
        pool = _pool(secure, principal=secure.outsider_principal, keytab=str(secure.outsider_keytab))
        try:
            await _client(pool).call("get_all_databases", identity=_user("alice"))
        finally:
            await pool.close()

    with pytest.raises(UpstreamProxyUserRefused) as caught:
        asyncio.run(go())
    assert "hadoop.proxyuser.outsider.hosts" in str(caught.value)
    assert "hadoop.proxyuser.outsider.groups" in str(caught.value)
    assert "AuthorizationException" not in str(caught.value) and "impersonate" not in str(caught.value)
    assert status_of(caught.value)[0] == 502


def test_evicted_users_token_is_cancelled_and_hms_no_longer_accepts_it(secure, caplog):
    async def go():
        pool = _pool(secure, max_identities=1)
        try:
            client = _client(pool)
            await client.call("get_all_databases", identity=_user("first"))
            token = pool.connector.tokens._held["first"].token
            await client.call("get_all_databases", identity=_user("second"))  # evicts "first"
            for _ in range(50):
                if pool.connector.tokens.cancelled:
                    break
                await asyncio.sleep(0.1)
            held = pool.connector.tokens.holds("first")
            # HMS no longer accepts the token: DIGEST-MD5 with it is refused.
            reader, writer = await asyncio.open_connection("localhost", secure.port)
            try:
                await negotiate(reader, writer, DigestMechanism(token, "authentication", "hms"), "hms")
                accepted = True
            except StaleCredentials:
                accepted = False
            finally:
                writer.close()
            return token, held, accepted, pool.connector.tokens.cancelled
        finally:
            await pool.close()

    token, held, accepted, cancelled = asyncio.run(go())
    assert cancelled == 1 and not held and not accepted
    assert token.text not in caplog.text


def test_tokens_renewed_and_refetched_under_short_lifetimes_without_a_failed_call(secure):
    async def go():
        pool = _pool(secure, renew_margin_seconds=2, token_renew_interval_seconds=RENEW_MS / 1000)
        try:
            client = _client(pool)
            tokens = pool.connector.tokens
            seen = []
            started = time.monotonic()
            while time.monotonic() - started < MAX_MS / 1000 + 1.5:
                await client.call("get_all_databases", identity=_user("renewer"))
                seen.append(tokens._held["renewer"].token.text)
                for conn in pool._idle:  # a new connection per call: each needs a live token
                    conn.close()
                await asyncio.sleep(1.0)
            return tokens, len(set(seen))
        finally:
            await pool.close()

    tokens, distinct = asyncio.run(go())
    # HMS 2.3 will not let hmsgw/localhost@REALM renew (it compares the full name with the
    # token's short renewer): the cache noticed and fetched anew before each 6 s deadline.
    assert tokens.renewed == 0 and tokens.renewals_refused >= 1
    assert tokens.fetched >= 3 and distinct == tokens.fetched


def test_a_cancelled_token_behind_the_caches_back_is_replaced_without_a_failed_call(secure):
    async def go():
        pool = _pool(secure)
        try:
            client = _client(pool)
            await client.call("get_all_databases", identity=_user("bob"))
            token = pool.connector.tokens._held["bob"].token
            await pool.connector._cancel(token.text)
            for conn in pool._idle:
                conn.close()
            await client.call("get_all_databases", identity=_user("bob"))
            return token, pool.connector.tokens._held["bob"].token
        finally:
            await pool.close()

    before, after = asyncio.run(go())
    assert before.text != after.text and parse_token(after.text).owner == "bob"


def test_wrong_service_principal_and_protection_are_502_naming_both_sides(secure):
    async def call(**more):
        pool = _pool(secure, impersonation="none", **more)
        try:
            await _client(pool).call("get_all_databases")
        finally:
            await pool.close()

    with pytest.raises(UpstreamAuthFailed) as caught:
        asyncio.run(call(service_principal="nohive/_HOST@GATEWAY.TEST"))
    assert "nohive/localhost@GATEWAY.TEST" in str(caught.value)
    assert "hive.metastore.kerberos.principal" in str(caught.value)
    assert status_of(caught.value)[0] == 502


def test_kdc_unreachable_is_503_with_the_reason(secure, tmp_path):
    conf = Path(secure.env["KRB5_CONFIG"]).read_text()
    dead = tmp_path / "krb5.conf"
    dead.write_text(re.sub(r"kdc = [^\n]+", "kdc = 127.0.0.1:9", conf))  # nothing listens on 9

    async def go():
        pool = _pool(secure, impersonation="none")
        pool.connector.login = KeytabLogin(secure.gateway_principal, secure.gateway_keytab)  # a fresh login
        try:
            await _client(pool).call("get_all_databases")
        finally:
            await pool.close()

    os.environ["KRB5_CONFIG"] = str(dead)
    try:
        with pytest.raises(Exception) as caught:
            asyncio.run(go())
    finally:
        os.environ["KRB5_CONFIG"] = secure.env["KRB5_CONFIG"]
    assert status_of(caught.value)[0] == 503
    assert "KDC" in str(caught.value)


def _topology(tmp_path: Path, sasl: dict) -> Path:
    import yaml

    path = tmp_path / "secure.yaml"
    path.write_text(yaml.safe_dump({
        "providers": {"authentication": [{"type": "htpasswd", "users_file": str(tmp_path / "users")}]},
        "services": [{"path": "hms", "upstream": {"urls": ["thrift://localhost:9083"], "sasl": sasl}}],
    }))
    (tmp_path / "users").write_text("")
    return path


def test_check_config_names_an_unreadable_keytab_and_a_principal_not_in_it(secure, tmp_path):
    from gateway.config import ConfigError, load_topology_file

    good = secure.gateway_sasl()
    loaded = load_topology_file(_topology(tmp_path, good))
    assert loaded.services[0].upstream.sasl.keytab == Path(good["keytab"])

    with pytest.raises(ConfigError) as caught:
        load_topology_file(_topology(tmp_path, {**good, "keytab": "missing.keytab"}))
    assert caught.value.key == "services[0].upstream.sasl.keytab"
    assert str(tmp_path / "missing.keytab") in caught.value.reason

    with pytest.raises(ConfigError) as caught:
        load_topology_file(_topology(tmp_path, {**good, "principal": "nobody/localhost@GATEWAY.TEST"}))
    assert caught.value.key == "services[0].upstream.sasl.principal"
    assert good["keytab"] in caught.value.reason and "nobody/localhost@GATEWAY.TEST" in caught.value.reason


def test_short_tickets_are_renewed_by_a_new_keytab_login_without_a_failed_call(secure, tmp_path):
    principal = "shortlived/localhost@GATEWAY.TEST"
    keytab = secure.realm.add_service(principal, tmp_path / "shortlived.keytab")
    secure.realm.realm.run_kadminl(f'modprinc -maxlife "6 seconds" {principal}')  # kadmin's own quoting

    async def go():
        pool = _pool(secure, principal=principal, keytab=str(keytab), impersonation="none")
        login = pool.connector.login = KeytabLogin(principal, keytab)  # a fresh login
        try:
            client = _client(pool)
            started = time.monotonic()
            while time.monotonic() - started < 9:  # past the first TGT's end
                await client.call("get_all_databases")
                for conn in pool._idle:  # each call a new connection: a new service ticket
                    conn.close()
                await asyncio.sleep(1.0)
            return login.logins
        finally:
            await pool.close()

    assert asyncio.run(go()) >= 2
