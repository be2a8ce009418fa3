"""``moto_server`` with the two IAM checks moto 5 leaves out and the gateway's delegated S3
access relies on: an ``AssumeRole`` session policy, and the expiry of temporary credentials.
Run as ``python -m demo.moto_iam -H host -p port`` (moto's own arguments):
:func:`demo.s3.start_s3` starts it for ``make run S3=1`` and the tests.

moto checks the signature, the key, the session token and the identity policies (the role's,
a user's); it keeps an ``AssumeRole`` ``Policy`` but never evaluates it, so a vended key for
one table read the whole bucket. After moto's own check this module also requires, for a
session with a policy, that the policy allows the request (AWS: the effective permissions are
the intersection of the role's and the session's), and for ``CopyObject``/``UploadPartCopy``
(``x-amz-copy-source``) ``s3:GetObject`` on the source, which moto does not ask for either.

The session policy is evaluated as IAM does for the forms a session policy of
:func:`gateway.iceberg.vending.session_policy` uses: ``Allow``/``Deny``, ``Action`` and
``Resource`` lists with ``*``/``?`` wildcards, and ``StringEquals``/``StringLike`` conditions
on ``s3:prefix``; anything else (``NotAction``, another operator or key) fails closed.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone
from urllib.parse import parse_qs, unquote, urlparse, urlsplit

__all__ = ["permits", "main"]

_OPERATORS = {"StringEquals": False, "StringLike": True}  # name → wildcards allowed


def _pattern(value: str, *, wildcards: bool = True, case: bool = True) -> re.Pattern:
    text = re.escape(value)
    if wildcards:
        text = text.replace(r"\*", ".*").replace(r"\?", ".")
    return re.compile(text, 0 if case else re.IGNORECASE)


def _listed(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _conditions_hold(conditions: dict, context: dict[str, str]) -> bool:
    for operator, pairs in conditions.items():
        wildcards = _OPERATORS.get(operator)
        if wildcards is None:
            return False
        for key, expected in pairs.items():
            value = context.get(key)
            if value is None or not any(_pattern(e, wildcards=wildcards).fullmatch(value)
                                        for e in _listed(expected)):
                return False
    return True


def permits(policy: dict, action: str, resource: str, context: dict[str, str]) -> bool:
    """Whether IAM ``policy`` (a parsed policy document) allows ``action`` (``s3:GetObject``) on
    ``resource`` (an ARN) with condition ``context`` (``{"s3:prefix": ...}``): some ``Allow``
    statement matches and no ``Deny`` does. Statements of an unsupported form match nothing
    when they allow and everything when they deny (fail closed)."""
    allowed = False
    statements = policy.get("Statement", [])
    for statement in [statements] if isinstance(statements, dict) else statements:
        deny = statement.get("Effect") != "Allow"
        if set(statement) - {"Sid", "Effect", "Action", "Resource", "Condition"}:
            if deny:
                return False
            continue
        if not any(_pattern(a, case=False).fullmatch(action) for a in _listed(statement.get("Action", []))):
            continue
        if not any(_pattern(r).fullmatch(resource) for r in _listed(statement.get("Resource", []))):
            continue
        if not _conditions_hold(statement.get("Condition", {}), context):
            continue
        if deny:
            return False
        allowed = True
    return allowed


def _install() -> None:
    import json

    from moto.iam.access_control import AssumedRoleAccessKey, IAMRequestBase
    from moto.sts.models import sts_backends

    moto_check = IAMRequestBase.check_action_permitted

    def session(request: IAMRequestBase):
        key = request._access_key
        if not isinstance(key, AssumedRoleAccessKey):
            return None
        for role in sts_backends[key.account_id][key.partition].assumed_roles:
            if role.access_key_id == key._access_key_id:
                return role
        return None

    def check_action_permitted(self: IAMRequestBase, resource: str) -> None:
        moto_check(self, resource)
        role = session(self)
        if role is not None and role.expiration.replace(tzinfo=timezone.utc) <= datetime.now(timezone.utc):
            self._raise_access_denied()
        checks = [(self._action, resource)]
        source = self._headers.get("x-amz-copy-source")
        if self._action == "s3:PutObject" and source:
            path = unquote(urlparse(source).path).lstrip("/")  # as moto reads it
            checks.append(("s3:GetObject", f"arn:aws:s3:::{path}"))
            action, self._action = self._action, "s3:GetObject"
            try:
                moto_check(self, checks[1][1])  # the role's own policy, for the source
            finally:
                self._action = action
        if role is None or not role.policy:
            return
        policy = json.loads(role.policy)
        query = parse_qs(urlsplit(self._path).query, keep_blank_values=True)
        context = {"s3:prefix": query["prefix"][0]} if "prefix" in query else {}
        if not all(permits(policy, action, arn, context) for action, arn in checks):
            self._raise_access_denied()

    IAMRequestBase.check_action_permitted = check_action_permitted


def main(argv: list[str] | None = None) -> None:
    """moto's server (``moto.server.main``) with the checks above installed."""
    _install()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
