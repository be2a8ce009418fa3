"""Owner assertion: objects created through the gateway are owned by the effective user.

Hive 3 and later set a new database's or table's owner from the caller's identity on the server.
HMS 2.3 stores whatever owner the client wrote (``set_ugi`` does not change it), so a client
could create objects in someone else's name. The gateway therefore writes the effective user
(after principal mapping and ``doAs``) into the owner field of ``create_database`` and
``create_table*`` calls, with owner type ``USER``, replacing what the client sent.

Works on the strict-binary call after translation, so every client protocol gets it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.thrift.binary import FIELD_HEADER, I32, read_message_header
from gateway.thrift.schema import ServiceSchema, StructSchema, TType
from gateway.thrift.walk import struct_fields

#: Owner fields by struct (Hive IDL names), and the struct's owner-type field if it has one.
_OWNER_FIELDS = {"Database": ("ownerName", "ownerType"), "Table": ("owner", None)}
_PRINCIPAL_TYPE_USER = 1  # hive_metastore.thrift: enum PrincipalType { USER = 1, ... }


@dataclass(frozen=True)
class _Rule:
    arg_id: int  # the call's argument that holds the object
    owner_id: int
    owner_type_id: int | None


def _field_id(struct: StructSchema, name: str | None) -> int | None:
    return next((f.id for f in struct.fields.values() if f.name == name), None)


class OwnerAssertion:
    """Rewrites the owner of objects created by calls of ``schema``'s creating methods."""

    def __init__(self, schema: ServiceSchema):
        self.rules: dict[str, _Rule] = {}
        for name, method in schema.methods.items():
            if not name.startswith(("create_database", "create_table")):
                continue
            for arg in method.args.fields.values():
                spec = arg.spec
                if isinstance(spec, StructSchema) and spec.name in _OWNER_FIELDS:
                    owner, owner_type = _OWNER_FIELDS[spec.name]
                    owner_id = _field_id(spec, owner)
                    if owner_id is not None:
                        self.rules[name] = _Rule(arg.id, owner_id, _field_id(spec, owner_type))

    def apply(self, call: bytes, method: str, user: str) -> bytes:
        """``call`` with the created object's owner set to ``user``; unchanged for other methods.

        Raises ``ProtocolError`` when ``call`` is malformed (it was produced by the gateway's
        own translation, so this means a bug or a hostile binary client).
        """
        rule = self.rules.get(method)
        if rule is None:
            return call
        _, pos = read_message_header(call)
        args, _ = struct_fields(call, pos)
        target = next((f for f in args if f[0] == rule.arg_id and f[1] == TType.STRUCT), None)
        if target is None:
            return call
        _, _, start, end = target
        fields, _ = struct_fields(call, start)
        drop = {rule.owner_id, rule.owner_type_id}
        out = bytearray(call[:start])
        for fid, ftype, fstart, fend in fields:
            if fid not in drop:
                out += call[fstart - 3 : fend]
        raw = user.encode("utf-8")
        out += FIELD_HEADER.pack(TType.STRING, rule.owner_id) + I32.pack(len(raw)) + raw
        if rule.owner_type_id is not None:
            out += FIELD_HEADER.pack(TType.I32, rule.owner_type_id) + I32.pack(_PRINCIPAL_TYPE_USER)
        out.append(TType.STOP)
        out += call[end:]
        return bytes(out)
