"""The owner of an object a client creates without naming one: the authenticated user.

Hive 4's ``HMSHandler.create_database`` sets a missing owner to the caller's short name
(``SecurityUtils.getUGI().getShortUserName()``); we do the same for databases and tables,
so an authenticated client's objects (Kerberos: the short name of its principal,
``hadoop.security.auth_to_local``) are owned by it. An owner the client names is kept, as
Hive keeps it; without SASL there is nobody to fill in.
"""

from __future__ import annotations

from typing import Any

from hms_txn.wire.session import authenticated_user
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


def owned_database(db: Any) -> Any:
    user = authenticated_user()
    if db is not None and user is not None and not db.ownerName:
        db.ownerName, db.ownerType = user, t.PrincipalType.USER
    return db


def owned_table(tbl: Any) -> Any:
    user = authenticated_user()
    if tbl is not None and user is not None and not tbl.owner:
        tbl.owner = user
        if getattr(tbl, "ownerType", None) is None:
            tbl.ownerType = t.PrincipalType.USER
    return tbl
