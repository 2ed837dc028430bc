"""The security tables of the metastore's schema: the delegation tokens this metastore
issues, Hive's SQL-standard authorization (roles, who holds them, privileges) and
HiveServer2's token store. They are tables of ``schema.metadata`` like every other:
``migrations`` imports this module, so a schema it creates or upgrades has them.
"""

from sqlalchemy import (
    BigInteger, Boolean, Column, ForeignKey, Index, Integer, String, Table, Text,
    UniqueConstraint,
)

from hms_txn.store.schema import NAME, metadata

# ------------------------------------------------------------------ delegation tokens (v3)
#
# Owned by hms_txn.domain.security.delegation_tokens. One row per live token, keyed by its
# sequence number; cancelling deletes the row. ``identifier`` is base64 of the identifier
# Writable (the DIGEST-MD5 user name); ``digest_secret`` is hex of H(identifier:realm:
# password), what DIGEST-MD5 needs, so the token password itself is not stored.

delegation_tokens = Table(
    "delegation_tokens", metadata,
    Column("sequence_number", Integer, primary_key=True, autoincrement=False),
    Column("identifier", Text, nullable=False),
    Column("owner", String(256), nullable=False),
    Column("renewer", String(256), nullable=False),
    Column("real_user", String(256), nullable=False),
    Column("issue_ms", BigInteger, nullable=False),
    Column("max_date_ms", BigInteger, nullable=False),
    Column("expiry_ms", BigInteger, nullable=False),
    Column("digest_secret", String(32), nullable=False),
    info={"since": 3},
)

next_delegation_token_id = Table(
    "next_delegation_token_id", metadata,
    Column("id", Integer, primary_key=True),
    Column("next_id", BigInteger, nullable=False),
    info={"since": 3},
)


# ------------------------------------------------------------- roles and privileges (v8)
#
# Owned by hms_txn.domain.security.roles / privileges (the SQL-standard authorization calls:
# we store and answer, engines decide) and token_store (HiveServer2's DBTokenStore).
# Principal and grantor types are stored as PrincipalType names ("USER", "ROLE", "GROUP"),
# as Hive stores them.

roles = Table(
    "roles", metadata,
    Column("role_name", NAME, primary_key=True),
    Column("create_time", Integer, nullable=False),
    Column("owner_name", String(128)),
    info={"since": 8},
)

# Hive's ROLE_MAP: who (a user, group or role) holds a role.
role_members = Table(
    "role_members", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("role_name", NAME, nullable=False),
    Column("principal_name", String(128), nullable=False),
    Column("principal_type", String(16), nullable=False),
    Column("add_time", Integer, nullable=False),
    Column("grantor", String(128)),
    Column("grantor_type", String(16)),
    Column("grant_option", Boolean, nullable=False),
    UniqueConstraint("role_name", "principal_name", "principal_type",
                     name="uq_role_members"),
    info={"since": 8},
)
Index("ix_role_members_principal", role_members.c.principal_name,
      role_members.c.principal_type)

# One row per granted privilege, of every object type (Hive's GLOBAL_PRIVS, DB_PRIVS,
# DC_PRIVS, TBL_PRIVS, PART_PRIVS, TBL_COL_PRIVS, PART_COL_PRIVS in one table): object_type
# is the HiveObjectType number. A database is named (db_name), a data connector too
# (object_name); tables and partitions are referenced by id, as Hive references them, so
# their grants follow a rename and go with a drop (the foreign keys cascade).
privileges = Table(
    "privileges", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("object_type", Integer, nullable=False),
    Column("cat_name", NAME),
    Column("db_name", NAME),
    Column("object_name", NAME),
    Column("tbl_id", BigInteger, ForeignKey("tbls.tbl_id", ondelete="CASCADE")),
    Column("part_id", BigInteger, ForeignKey("partitions.part_id", ondelete="CASCADE")),
    Column("column_name", String(767)),
    Column("principal_name", String(128), nullable=False),
    Column("principal_type", String(16), nullable=False),
    Column("privilege", String(128), nullable=False),
    Column("create_time", Integer, nullable=False),
    Column("grantor", String(128)),
    Column("grantor_type", String(16)),
    Column("grant_option", Boolean, nullable=False),
    Column("authorizer", String(128)),
    info={"since": 8},
)
Index("ix_privileges_object", privileges.c.object_type, privileges.c.db_name,
      privileges.c.object_name)
Index("ix_privileges_table", privileges.c.tbl_id)
Index("ix_privileges_partition", privileges.c.part_id)
Index("ix_privileges_principal", privileges.c.principal_name, privileges.c.principal_type)

# HiveServer2's DBTokenStore (add_token ... get_master_keys): opaque strings it stores and
# reads back; unrelated to the tokens this metastore issues (delegation_tokens).
token_store_tokens = Table(
    "token_store_tokens", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("token_identifier", String(767), nullable=False, unique=True),
    Column("token", Text),
    info={"since": 8},
)

# Key ids are handed out once (AUTOINCREMENT on SQLite: a removed key's id is not reused).
token_store_master_keys = Table(
    "token_store_master_keys", metadata,
    Column("key_id", Integer, primary_key=True, autoincrement=True),
    Column("master_key", Text),
    sqlite_autoincrement=True,
    info={"since": 8},
)
