"""The connector of a Kerberized HMS (``upstream.sasl``): every connection of a pool speaks
Thrift's SASL transport (:mod:`gateway.upstream.sasl`).

* The gateway's own calls (readiness, the notification-log follower, lock housekeeping…) and,
  with ``impersonation: none``, every call: GSSAPI as the gateway's principal
  (:mod:`gateway.upstream.kerberos`).
* With ``impersonation: delegation-token`` (the default), a call acting for a user goes over
  that user's connections, authenticated with DIGEST-MD5 and a delegation token HMS issued for
  them to the gateway as a Hadoop proxy user (``get_delegation_token(user, <short name>)`` on a
  GSSAPI connection), as Hive's ``HadoopThriftAuthBridge.Client`` does with ``TOKEN`` auth:
  :mod:`gateway.upstream.tokens`, :mod:`gateway.upstream.digest` (at the configured protection,
  as GSSAPI). HMS then runs the calls, and audits them, as that user; its groups come from
  HMS's own group mapping, so connections are pooled per user.

Raises :class:`~gateway.upstream.cyrus.CyrusUnavailable` at construction when users are
impersonated and Cyrus SASL's DIGEST-MD5 is not installed.
"""

from __future__ import annotations

import asyncio
import logging

from gateway.upstream.settings import SaslConfig
from gateway.thrift.schema import load_schema
from gateway.upstream.connector import GatewayCall
from gateway.upstream.errors import UpstreamError
from gateway.upstream.framing import Unframed
from gateway.upstream.kerberos import GssapiMechanism, keytab_login, service_principal
from gateway.upstream.sasl import SaslTransport, StaleCredentials, negotiate
from gateway.upstream.cyrus import require
from gateway.upstream.digest import DigestMechanism
from gateway.upstream.tokens import DelegationTokens
from gateway.upstream.ugi import Identity, UgiKey

log = logging.getLogger(__name__)


class UpstreamProxyUserRefused(UpstreamError):
    """HMS refused to issue a delegation token to the gateway for a user (502)."""

    status = 502
    outcome = "identity_refused"


class SaslConnector:
    """SASL connections to the HMS at ``host`` (see the module docstring); replies and frames
    up to ``max_reply_bytes``."""

    sends_ugi = False

    def __init__(self, config: SaslConfig, host: str, max_reply_bytes: int):
        self.config = config
        self.target = service_principal(config.service_principal, host)
        self.login = keytab_login(config.principal, config.keytab, config.renew_margin_seconds)
        self.max_reply_bytes = max_reply_bytes
        self.impersonating = config.impersonation == "delegation-token"
        if self.impersonating:
            require("DIGEST-MD5")  # at start-up, not at a user's first call
        self._call: GatewayCall | None = None
        self.tokens = DelegationTokens(self._fetch, self._renew, self._cancel,
                                       renew_interval=config.token_renew_interval_seconds,
                                       margin=config.renew_margin_seconds)

    def key(self, identity: Identity | None) -> UgiKey:
        if identity is None or not self.impersonating:
            return None
        return identity.user, ()

    def bind(self, gateway_call: GatewayCall) -> None:
        self._call = gateway_call

    async def open(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   label: str, key: UgiKey) -> Unframed:
        if key is None:
            mechanism = GssapiMechanism(self.login, self.target, self.config.protection, label)
            await mechanism.prepare()
        else:
            mechanism = DigestMechanism(await self.tokens.get(key[0]), self.config.protection, label)
        try:
            await negotiate(reader, writer, mechanism, label)
        except StaleCredentials:
            assert isinstance(mechanism, DigestMechanism) and key is not None
            self.tokens.invalidate(key[0], mechanism.token)
            raise
        log.info("upstream %s: SASL %s at QOP %s as %s", label, mechanism.name, mechanism.qop,
                 self.config.principal if key is None else key[0])
        return SaslTransport(reader, writer, label, mechanism, self.max_reply_bytes)

    def released(self, key: UgiKey) -> None:
        if key is not None:
            self.tokens.release(key[0])

    async def close(self) -> None:
        await self.tokens.close()

    # --- the token RPCs, as the gateway ----------------------------------------------------

    async def _rpc(self, method: str, **args):
        from gateway.upstream.metastore import decode_result, encode_call  # imports this module's users

        assert self._call is not None, "bind() first"
        schema = load_schema()
        return decode_result(schema, method, await self._call(encode_call(schema, method, args)))

    async def _fetch(self, user: str) -> str:
        from thriftpy2.thrift import TException

        try:
            return await self._rpc("get_delegation_token", token_owner=user,
                                   renewer_kerberos_principal_name=self.config.short_name)
        except TException as exc:
            log.warning("HMS refused a delegation token for %s to %s: %s", user,
                        self.config.principal, str(getattr(exc, "message", exc))[:300])
            short = self.config.short_name
            raise UpstreamProxyUserRefused(
                f"HMS refused to let {self.config.principal} act for {user}: allow the gateway as "
                f"a Hadoop proxy user in HMS's core-site.xml (hadoop.proxyuser.{short}.hosts and "
                f"hadoop.proxyuser.{short}.groups)") from None

    async def _renew(self, text: str) -> int:
        from thriftpy2.thrift import TException

        try:
            return await self._rpc("renew_delegation_token", token_str_form=text)
        except TException as exc:  # expired, cancelled, past its max date, or not ours to renew
            log.info("HMS did not renew a delegation token: %s", str(getattr(exc, "message", exc))[:300])
            raise StaleCredentials(f"HMS did not renew a delegation token of {self.config.principal}") from None

    async def _cancel(self, text: str) -> None:
        await self._rpc("cancel_delegation_token", token_str_form=text)
