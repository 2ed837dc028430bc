"""HiveServer2's delegation-token store in the metastore (Hive's ``DBTokenStore``: the
``add_token`` ... ``get_master_keys`` calls).

HiveServer2 (and a Java metastore configured with ``DBTokenStore``) keeps the tokens and
master keys of its own token manager here so that several instances share them. To the
metastore they are opaque strings, stored and handed back as Hive's ``ObjectStore`` does:
adding an identifier that exists answers false and changes nothing, removing one that does
not answers false, a missing token reads as ``""`` (Thrift cannot return null), master keys
get increasing ids that are never reused, and ``get_master_keys`` lists the keys without
their ids.

These rows are not the tokens this metastore issues (``delegation_tokens``): those are
identified by our own sequence numbers and keep only what DIGEST-MD5 needs, while these carry
another token manager's identifiers and secrets under its own sequence numbers, so one table
for both could only mix two namespaces.
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import MetastoreError
from hms_txn.store.security_schema import token_store_master_keys as keys
from hms_txn.store.security_schema import token_store_tokens as tokens


def add_token(conn: Connection, identifier: str | None, token: str | None) -> bool:
    if identifier is None:
        raise MetastoreError("add_token needs a token identifier")
    if conn.execute(select(tokens.c.id).where(tokens.c.token_identifier == identifier)).first():
        return False
    conn.execute(insert(tokens).values(token_identifier=identifier, token=token))
    return True


def remove_token(conn: Connection, identifier: str | None) -> bool:
    return conn.execute(delete(tokens).where(tokens.c.token_identifier == identifier)).rowcount > 0


def get_token(conn: Connection, identifier: str | None) -> str:
    found = conn.execute(select(tokens.c.token)
                         .where(tokens.c.token_identifier == identifier)).scalar()
    return found if found is not None else ""


def token_identifiers(conn: Connection) -> list[str]:
    return [r[0] for r in conn.execute(select(tokens.c.token_identifier).order_by(tokens.c.id))]


def add_master_key(conn: Connection, key: str | None) -> int:
    return conn.execute(insert(keys).values(master_key=key)).inserted_primary_key[0]


def update_master_key(conn: Connection, key_id: int, key: str | None) -> None:
    """Hive's handler turns the store's NoSuchObjectException into a MetaException carrying
    the exception's ``toString()``."""
    if conn.execute(update(keys).where(keys.c.key_id == key_id)
                    .values(master_key=key)).rowcount < 1:
        raise MetastoreError(f"NoSuchObjectException(message:No key found with keyId: "
                             f"{key_id})")


def remove_master_key(conn: Connection, key_id: int) -> bool:
    return conn.execute(delete(keys).where(keys.c.key_id == key_id)).rowcount > 0


def master_keys(conn: Connection) -> list[str | None]:
    return [r[0] for r in conn.execute(select(keys.c.master_key).order_by(keys.c.key_id))]
