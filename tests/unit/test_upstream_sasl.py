"""Thrift's SASL client transport (gateway.upstream.sasl), Hadoop token strings and the
delegation-token cache (gateway.upstream.tokens), with fake servers and mechanisms; DIGEST-MD5
is in test_upstream_digest.py, the real Kerberized HMS in
tests/integration/test_secure_upstream.py."""

from __future__ import annotations

import asyncio
import base64
import struct
from types import SimpleNamespace

import gssapi
import pytest

from gateway.thrift.binary import encode_binary_call
from gateway.upstream.errors import UpstreamBadReply
from gateway.upstream.kerberos import service_principal
from gateway.upstream.sasl import (BAD, COMPLETE, OK, START, SaslTransport, StaleCredentials,
                                   UpstreamAuthFailed, encode_message, negotiate)
from gateway.upstream.tokens import DelegationTokens, TokenFormatError, parse_token


class XorMechanism:
    """A fake two-step mechanism whose 'protection' is XOR with 0x5A (so wrapped bytes differ)."""

    name = "FAKE"
    retains_frames = False
    receive_buffer = 1 << 16

    def __init__(self, qop: str = "auth"):
        self.complete = False
        self.qop = qop
        self.seen: list[bytes] = []

    def initial_response(self) -> bytes:
        return b"hello"

    def step(self, challenge: bytes) -> bytes:
        self.seen.append(challenge)
        self.complete = True
        return b"answer:" + challenge

    def wrap(self, data: bytes) -> list[bytes]:
        return [b"W" + bytes(b ^ 0x5A for b in data)]

    def unwrap(self, data: bytes) -> bytes:
        if not data.startswith(b"W"):
            raise UpstreamBadReply("not wrapped")
        return bytes(b ^ 0x5A for b in data[1:])

    def refused(self, reason: str) -> UpstreamAuthFailed:
        return UpstreamAuthFailed("refused: " + reason)


def _reply(name: str, seqid: int) -> bytes:
    """A strict-binary REPLY with no fields (HMS's answer to a void call)."""
    message = bytearray(encode_binary_call(name, seqid, []))
    message[3] = 2  # the message type byte: REPLY
    return bytes(message)


async def _server(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return server, reader, writer


async def _exchange(hms, qop: str = "auth", request: bytes = b"request-bytes") -> bytes:
    """Negotiate with the fake ``hms``, send ``request`` in a frame, read one reply."""
    server, reader, writer = await _server(hms)
    mech = XorMechanism(qop)
    try:
        await negotiate(reader, writer, mech, "hms:9083")
        io = SaslTransport(reader, writer, "hms:9083", mech, 1 << 20)
        io.write(request)
        reply = await io.message(1 << 20)
        assert not io.unread()
        return reply
    finally:
        writer.close()
        server.close()


async def _read_msg(reader):
    status, size = struct.unpack("!BI", await reader.readexactly(5))
    return status, await reader.readexactly(size)


def test_negotiation_messages_and_frames_as_thrift_writes_them():
    seen = []

    async def hms(reader, writer):
        seen.append(await _read_msg(reader))  # START + mechanism
        seen.append(await _read_msg(reader))  # initial response
        writer.write(encode_message(OK, b"challenge"))
        seen.append(await _read_msg(reader))  # our last response, COMPLETE
        writer.write(encode_message(COMPLETE, b""))
        (size,) = struct.unpack("!I", await reader.readexactly(4))
        seen.append(await reader.readexactly(size))
        reply = _reply("get_all_databases", 1)
        half = len(reply) // 2  # a reply in two frames still reads as one message
        writer.write(struct.pack("!I", half) + reply[:half] + struct.pack("!I", len(reply) - half) + reply[half:])
        await writer.drain()

    reply = asyncio.run(_exchange(hms))
    assert seen[0] == (START, b"FAKE")
    assert seen[1] == (OK, b"hello")
    assert seen[2] == (COMPLETE, b"answer:challenge")
    assert seen[3] == b"request-bytes"
    assert reply == _reply("get_all_databases", 1)


def test_wrapped_frames_at_integrity_or_privacy():
    got = []

    async def hms(reader, writer):
        await _read_msg(reader), await _read_msg(reader)
        writer.write(encode_message(COMPLETE, b"c"))  # server done: the client sends nothing more
        (size,) = struct.unpack("!I", await reader.readexactly(4))
        got.append(await reader.readexactly(size))
        reply = _reply("get_all_databases", 7)
        wrapped = b"W" + bytes(b ^ 0x5A for b in reply)
        writer.write(struct.pack("!I", len(wrapped)) + wrapped)
        await writer.drain()

    assert asyncio.run(_exchange(hms, "auth-conf", b"plain")) == _reply("get_all_databases", 7)
    assert got == [b"W" + bytes(b ^ 0x5A for b in b"plain")]


def test_bad_status_is_the_mechanisms_refusal_and_a_non_sasl_server_is_named():
    async def refusing(reader, writer):
        await _read_msg(reader), await _read_msg(reader)
        writer.write(encode_message(BAD, b"GSS initiate failed"))
        await writer.drain()

    async def plain_thrift(reader, writer):
        await _read_msg(reader)
        writer.write(encode_binary_call("get_all_databases", 0, []))  # a binary Thrift message
        await writer.drain()

    async def go(handler):
        server, reader, writer = await _server(handler)
        try:
            await negotiate(reader, writer, XorMechanism(), "hms:9083")
        finally:
            writer.close()
            server.close()

    with pytest.raises(UpstreamAuthFailed, match="refused: GSS initiate failed"):
        asyncio.run(go(refusing))
    with pytest.raises(UpstreamAuthFailed, match="hive.metastore.sasl.enabled"):
        asyncio.run(go(plain_thrift))


def test_oversized_frame_is_refused_before_it_is_read():
    async def hms(reader, writer):
        await _read_msg(reader), await _read_msg(reader)
        writer.write(encode_message(COMPLETE, b""))
        writer.write(struct.pack("!I", 1 << 30))
        await writer.drain()

    with pytest.raises(UpstreamBadReply, match="SASL frame of 1073741824 bytes"):
        asyncio.run(_exchange(hms))


@pytest.mark.parametrize("qop,refused", [("auth-int", True), ("auth-conf", True), ("auth", False)])
def test_a_wrapped_frame_over_the_announced_buffer_is_refused_from_its_length(qop, refused):
    """The length prefix is not covered by the layer's MAC: past the receive buffer the gateway
    announced, the frame is refused before its body is read (here HMS sends 10 bytes of it and
    closes; had the body been awaited, the read would end short instead). At ``auth`` there is
    no layer and no announced buffer: frames are bounded by ``max_frame_bytes`` only."""
    size = XorMechanism.receive_buffer + 1

    async def hms(reader, writer):
        await _read_msg(reader), await _read_msg(reader)
        writer.write(encode_message(COMPLETE, b""))
        writer.write(struct.pack("!I", size) + b"W" * 10)
        await writer.drain()
        writer.close()

    async def go():
        server, reader, writer = await _server(hms)
        mech = XorMechanism(qop)
        try:
            await negotiate(reader, writer, mech, "hms:9083")
            io = SaslTransport(reader, writer, "hms:9083", mech, 1 << 20)
            while True:
                await io.chunk()
        finally:
            writer.close()
            server.close()

    if refused:
        with pytest.raises(UpstreamBadReply) as caught:
            asyncio.run(go())
        assert f"SASL frame of {size} bytes" in str(caught.value)
        assert f"FAKE {qop} layer carries at most {XorMechanism.receive_buffer} bytes" in str(caught.value)
    else:
        with pytest.raises(asyncio.IncompleteReadError):
            asyncio.run(go())


def test_host_in_service_principal():
    assert service_principal("hive/_HOST@R.TEST", "HMS1.Example.com") == "hive/hms1.example.com@R.TEST"
    assert service_principal("hive/fixed@R.TEST", "other") == "hive/fixed@R.TEST"
    assert service_principal("hive@R.TEST", "h") == "hive@R.TEST"


# --- Hadoop token strings --------------------------------------------------------------------

def _vlong(value: int) -> bytes:
    """Hadoop WritableUtils.writeVLong, for building test tokens."""
    if -112 <= value <= 127:
        return struct.pack("b", value)
    size, marker = -112, value
    if value < 0:
        marker, size = value ^ -1, -120
    tmp = marker
    while tmp:
        tmp >>= 8
        size -= 1
    count = (-(size + 120)) if size < -120 else (-(size + 112))
    return struct.pack("b", size) + marker.to_bytes(count, "big")


def _text(data: bytes) -> bytes:
    return _vlong(len(data)) + data


def make_token(owner: str = "alice", renewer: str = "hmsgw", issue_ms: int = 1_700_000_000_123,
               max_ms: int = 1_700_604_800_123, password: bytes = b"\x01secret\xff") -> str:
    identifier = (b"\x00" + _text(owner.encode()) + _text(renewer.encode()) + _text(b"hmsgw")
                  + _vlong(issue_ms) + _vlong(max_ms) + _vlong(42) + _vlong(3))
    raw = _text(identifier) + _text(password) + _text(b"HIVE_DELEGATION_TOKEN") + _text(b"")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_token_string_parses_as_hadoops_writable():
    text = make_token()
    token = parse_token(text)
    assert (token.owner, token.renewer, token.kind) == ("alice", "hmsgw", "HIVE_DELEGATION_TOKEN")
    assert token.issue_date == pytest.approx(1_700_000_000.123)
    assert token.max_date == pytest.approx(1_700_604_800.123)
    assert token.password == b"\x01secret\xff"
    assert text not in repr(token) and "secret" not in repr(token)


def test_small_and_negative_vints():
    from gateway.upstream.tokens import _vlong as read

    for value in (0, 1, -1, -112, 127, 128, 255, 65536, -113, -(1 << 40), 1 << 62):
        assert read(_vlong(value), 0) == (value, len(_vlong(value)))


@pytest.mark.parametrize("text", ["", "!!!", base64.urlsafe_b64encode(b"\x05ab").decode(),
                                  make_token()[:-6]])
def test_malformed_token_strings_are_refused(text):
    with pytest.raises(TokenFormatError):
        parse_token(text)


# --- the token cache --------------------------------------------------------------------------

class FakeHMS:
    def __init__(self, renew_interval: float = 100.0, max_life: float = 1000.0):
        self.now = 1_700_000_000.0
        self.renew_interval, self.max_life = renew_interval, max_life
        self.live: dict[str, float] = {}  # token text -> renewal deadline
        self.calls: list[tuple[str, str]] = []
        self.refuse_renewal = False
        self.count = 0

    async def fetch(self, user: str) -> str:
        self.count += 1
        issue = int(self.now * 1000)
        text = make_token(owner=user, issue_ms=issue, max_ms=issue + int(self.max_life * 1000),
                          password=b"pw%d" % self.count)
        self.live[text] = self.now + self.renew_interval
        self.calls.append(("fetch", user))
        return text

    async def renew(self, text: str) -> int:
        self.calls.append(("renew", parse_token(text).owner))
        if self.refuse_renewal or text not in self.live:
            raise StaleCredentials("not renewed")
        self.live[text] = self.now + self.renew_interval
        return int(self.live[text] * 1000)

    async def cancel(self, text: str) -> None:
        self.calls.append(("cancel", parse_token(text).owner))
        del self.live[text]


def _cache(hms: FakeHMS, margin: float = 10.0) -> DelegationTokens:
    return DelegationTokens(hms.fetch, hms.renew, hms.cancel, renew_interval=hms.renew_interval,
                            margin=margin, clock=lambda: hms.now)


def test_token_cache_fetches_once_renews_before_deadline_and_refetches_before_max_life():
    async def go():
        hms = FakeHMS()
        tokens = _cache(hms)
        first = await tokens.get("alice")
        assert await tokens.get("alice") is first  # cached: no call at all
        assert hms.calls == [("fetch", "alice")]
        hms.now += 95  # within the margin of the renewal deadline
        assert await tokens.get("alice") is first
        assert hms.calls[-1] == ("renew", "alice") and tokens.renewed == 1
        hms.now += 900  # within the margin of the max date: a new token, the old one cancelled
        second = await tokens.get("alice")
        await asyncio.sleep(0)
        assert second.text != first.text
        assert first.text not in hms.live and second.text in hms.live
        assert ("cancel", "alice") in hms.calls
        return tokens

    tokens = asyncio.run(go())
    assert (tokens.fetched, tokens.cancelled) == (2, 1)


def test_token_cache_refetches_when_renewal_is_refused_and_on_invalidate():
    async def go():
        hms = FakeHMS()
        tokens = _cache(hms)
        first = await tokens.get("bob")
        hms.now += 95
        hms.refuse_renewal = True  # as HMS 2.3 for a renewer hmsgw/host@REALM
        second = await tokens.get("bob")
        assert second.text != first.text and tokens.renewals_refused == 1
        await asyncio.sleep(0)
        assert first.text not in hms.live  # the old one cancelled
        hms.now += 95
        calls = len(hms.calls)
        third = await tokens.get("bob")  # within a renewal interval of the refusal: fetched at once
        assert third.text != second.text and hms.calls[calls] == ("fetch", "bob")
        await asyncio.sleep(0)
        tokens.invalidate("bob", third)  # HMS refused it: dropped and cancelled
        assert not tokens.holds("bob")
        await asyncio.sleep(0)
        assert third.text not in hms.live and hms.calls[-1] == ("cancel", "bob")
        assert (await tokens.get("bob")).text != third.text

    asyncio.run(go())


def test_a_failed_renewal_is_tried_again_a_renewal_interval_later():
    """One refusal (HMS restarting, a token store failing over) does not make the process give
    up renewing for good: after ``renew_interval`` renewals are tried, and succeed, again."""
    async def go():
        hms = FakeHMS()
        tokens = _cache(hms)
        await tokens.get("bob")
        hms.now += 95
        hms.refuse_renewal = True
        await tokens.get("bob")  # refused: fetched anew
        hms.refuse_renewal = False  # the refusal passed
        hms.now += 95  # still within renew_interval of the refusal: fetched, not renewed
        third = await tokens.get("bob")
        assert (tokens.renewed, tokens.fetched) == (0, 3)
        hms.now += 95  # past it: renewed again
        assert await tokens.get("bob") is third
        assert tokens.renewed == 1 and hms.calls[-1] == ("renew", "bob")
        hms.now += 95
        assert await tokens.get("bob") is third and tokens.renewed == 2
        return tokens

    tokens = asyncio.run(go())
    assert tokens.renewals_refused == 1


def test_a_refused_token_replaced_meanwhile_leaves_the_new_one_alone():
    async def go():
        hms = FakeHMS()
        tokens = _cache(hms)
        first = await tokens.get("bob")
        tokens.invalidate("bob", first)
        second = await tokens.get("bob")
        tokens.invalidate("bob", first)  # a late refusal of the old token
        await asyncio.sleep(0)
        assert tokens.holds("bob") and await tokens.get("bob") is second
        assert second.text in hms.live and first.text not in hms.live
        assert hms.calls.count(("cancel", "bob")) == 1

    asyncio.run(go())


@pytest.mark.parametrize("answer,reason", [
    (lambda user: make_token(owner="mallory"), "names another owner (mallory)"),
    (lambda user: make_token(owner=user) + "AAAA", "does not parse"),
])
def test_a_token_for_someone_else_or_unreadable_is_refused_and_cancelled(answer, reason):
    cancelled = []

    async def fetch(user: str) -> str:
        return answer(user)

    async def cancel(text: str) -> None:
        cancelled.append(text)

    async def go():
        tokens = DelegationTokens(fetch, FakeHMS().renew, cancel)
        with pytest.raises(UpstreamAuthFailed) as caught:
            await tokens.get("alice")
        await asyncio.sleep(0)
        return tokens, str(caught.value)

    tokens, message = asyncio.run(go())
    assert reason in message and "alice" in message
    assert cancelled == [answer("alice")] and not tokens.holds("alice")


def test_release_and_close_cancel_every_token():
    async def go():
        hms = FakeHMS()
        tokens = _cache(hms)
        await tokens.get("alice")
        await tokens.get("bob")
        await tokens.get("carol")
        tokens.release("alice")
        await asyncio.sleep(0)
        assert not tokens.holds("alice") and len(hms.live) == 2
        await tokens.close()
        assert hms.live == {}
        assert tokens.cancelled == 3

    asyncio.run(go())


def test_concurrent_first_calls_of_one_user_fetch_one_token():
    async def go():
        hms = FakeHMS()
        tokens = _cache(hms)
        got = await asyncio.gather(*(tokens.get("alice") for _ in range(5)))
        assert len({t.text for t in got}) == 1
        assert hms.calls.count(("fetch", "alice")) == 1

    asyncio.run(go())


# --- configuration ----------------------------------------------------------------------------

def test_sasl_settings_are_validated():
    from pydantic import ValidationError

    from gateway.upstream.settings import SaslConfig, UpstreamConfig

    sasl = {"principal": "hmsgw/gw.example.com@EX.COM", "keytab": "gw.keytab",
            "service_principal": "hive/_HOST@EX.COM"}
    config = UpstreamConfig.model_validate({"urls": ["thrift://hms:9083"], "sasl": sasl})
    assert config.sasl.short_name == "hmsgw"
    assert (config.sasl.protection, config.sasl.impersonation) == ("authentication", "delegation-token")
    with pytest.raises(ValidationError, match="not supported with transport: framed"):
        UpstreamConfig.model_validate({"urls": ["thrift://hms:9083"], "transport": "framed", "sasl": sasl})
    with pytest.raises(ValidationError, match="thrift:// URLs only"):
        UpstreamConfig.model_validate({"urls": ["https://hms:9443/hms"], "sasl": sasl})
    with pytest.raises(ValidationError, match="not a Kerberos principal"):
        SaslConfig.model_validate({**sasl, "principal": "a b@R"})
    with pytest.raises(ValidationError):
        SaslConfig.model_validate({**sasl, "protection": "auth-conf"})  # Hadoop's names only
    # every protection with either impersonation (the users' DIGEST-MD5 has the three layers)
    for protection in ("authentication", "integrity", "privacy"):
        for impersonation in ("delegation-token", "none"):
            config = SaslConfig.model_validate({**sasl, "protection": protection, "impersonation": impersonation})
            assert (config.protection, config.impersonation) == (protection, impersonation)


def test_gssapi_layer_choice_names_both_sides_when_hms_does_not_offer_the_protection():
    from gateway.upstream.kerberos import GssapiMechanism

    class Context:  # a fake established GSS-API context (the real one: tests/integration)
        complete = True

        def __init__(self, offer: int):
            self.offer = offer

        actual_flags = {gssapi.RequirementFlag.integrity, gssapi.RequirementFlag.confidentiality}

        def unwrap(self, data):
            return SimpleNamespace(message=struct.pack("!I", self.offer << 24 | 65536), encrypted=False)

        def wrap(self, data, encrypt):
            return SimpleNamespace(message=b"wrapped:" + data, encrypted=encrypt)

    login = SimpleNamespace(principal="hmsgw/gw@R")
    mech = GssapiMechanism(login, "hive/hms@R", "privacy", "hms:9083")
    mech._context = Context(offer=1)  # HMS: hadoop.rpc.protection=authentication
    with pytest.raises(UpstreamAuthFailed) as caught:
        mech.step(b"offer")
    assert "hadoop.rpc.protection=authentication" in str(caught.value)
    assert "upstream.sasl.protection is privacy" in str(caught.value)

    mech = GssapiMechanism(login, "hive/hms@R", "integrity", "hms:9083")
    mech._context = Context(offer=1 | 2 | 4)
    answer = mech.step(b"offer")
    assert mech.complete and mech.qop == "auth-int"
    # RFC 4752: the layer, and the gateway's own receive buffer (the largest one), not HMS's
    assert answer == b"wrapped:" + struct.pack("!I", 2 << 24 | 0xFFFFFF)
    assert mech.receive_buffer == 0xFFFFFF


class _PrivacyContext:
    """A fake established GSS-API context offering privacy, whose wrap and unwrap say whether
    they encrypted (``encrypted``, python-gssapi's ``conf_state``)."""

    complete = True

    def __init__(self, encrypts: bool = True, flags=("integrity", "confidentiality")):
        self.encrypts = encrypts
        self.actual_flags = {getattr(gssapi.RequirementFlag, name) for name in flags}

    def wrap(self, data, encrypt):
        return SimpleNamespace(message=b"wrapped:" + data, encrypted=encrypt and self.encrypts)

    def unwrap(self, data):
        if data == b"offer":
            return SimpleNamespace(message=struct.pack("!I", 4 << 24 | 65536), encrypted=False)
        return SimpleNamespace(message=data.removeprefix(b"wrapped:"), encrypted=self.encrypts)


def _gssapi_at_privacy(context):
    from gateway.upstream.kerberos import GssapiMechanism

    mech = GssapiMechanism(SimpleNamespace(principal="hmsgw/gw@R"), "hive/hms@R", "privacy", "hms:9083")
    mech._context = context
    mech.step(b"offer")
    return mech


def test_gssapi_privacy_never_sends_nor_accepts_an_unencrypted_frame():
    mech = _gssapi_at_privacy(_PrivacyContext())
    assert mech.qop == "auth-conf"
    assert mech.wrap(b"call") == [b"wrapped:call"] and mech.unwrap(b"wrapped:reply") == b"reply"

    mech = _gssapi_at_privacy(_PrivacyContext(encrypts=False))  # GSS-API applied integrity only
    with pytest.raises(UpstreamBadReply, match="did not encrypt a request to upstream hms:9083 at privacy"):
        mech.wrap(b"call")
    with pytest.raises(UpstreamBadReply, match="unencrypted frame at privacy"):
        mech.unwrap(b"wrapped:reply")


def test_gssapi_privacy_needs_a_context_with_confidentiality():
    with pytest.raises(UpstreamAuthFailed, match="no confidentiality for protection privacy"):
        _gssapi_at_privacy(_PrivacyContext(flags=("integrity",)))
