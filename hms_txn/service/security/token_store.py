"""HiveServer2's delegation-token store calls (``domain.security.token_store``): ``add_token``,
``remove_token``, ``get_token``, ``get_all_token_identifiers``, ``add_master_key``,
``update_master_key``, ``remove_master_key``, ``get_master_keys``.

Most of them declare no exception, so a refusal reaches the client as TApplicationException
INTERNAL_ERROR carrying the message, as from Hive's handler; ``update_master_key`` of an
unknown key is a MetaException. In extension mode they are forwarded to the upstream, which
already holds the store of the HiveServer2 instances using it (docs/extension-mode.md).
"""

from __future__ import annotations

from hms_txn.domain.security import token_store
from hms_txn.service.units import UnitOfWork


class TokenStoreService:
    def __init__(self, units: UnitOfWork):
        self.units = units

    def add_token(self, token_identifier, delegation_token):
        return self.units.write(
            lambda conn: token_store.add_token(conn, token_identifier, delegation_token))

    def remove_token(self, token_identifier):
        return self.units.write(lambda conn: token_store.remove_token(conn, token_identifier))

    def get_token(self, token_identifier):
        return self.units.read(lambda conn: token_store.get_token(conn, token_identifier))

    def get_all_token_identifiers(self):
        return self.units.read(token_store.token_identifiers)

    def add_master_key(self, key):
        return self.units.write(lambda conn: token_store.add_master_key(conn, key))

    def update_master_key(self, seq_number, key):
        self.units.write(lambda conn: token_store.update_master_key(conn, seq_number, key))

    def remove_master_key(self, key_seq):
        return self.units.write(lambda conn: token_store.remove_master_key(conn, key_seq))

    def get_master_keys(self):
        return self.units.read(token_store.master_keys)
