"""How a server process authenticates its clients, from its configuration: the SASL
mechanisms it offers and the Kerberos identity behind GSSAPI.

* ``hive.metastore.sasl.enabled`` / ``hive.metastore.authentication`` turn SASL on
  (``Config.sasl_required``); with it, framed transport is refused, as Hive refuses it.
* Kerberos (``Config.kerberos_required``: ``hive.metastore.authentication=KERBEROS``, or
  SASL with ``hadoop.security.authentication=kerberos`` or a keytab: the Hive 2.3 key set)
  offers GSSAPI as ``hive.metastore.kerberos.principal`` (``_HOST``: this host's canonical
  name) from ``hive.metastore.kerberos.keytab.file``, with the protections of
  ``hadoop.rpc.protection``; principals become short names by
  ``hadoop.security.auth_to_local``.
* PLAIN is offered when users are configured (required when it is the only way in);
  DIGEST-MD5 (delegation tokens) whenever SASL is on.

Every setting that cannot work (no keytab, a keytab without the principal's key, bad
auth_to_local rules) stops start-up with a ConfigError naming the key, before the database
is opened.
"""

from __future__ import annotations

import logging
from typing import Callable

from hms_txn.common.config import Config, ConfigError
from hms_txn.common.kerberos_names import AuthToLocal, KerberosNameError, server_principal
from hms_txn.domain.security.token_codec import short_name as first_component
from hms_txn.wire.sasl import CredentialLookup, KerberosServer, PasswordBook, SaslServer
from hms_txn.wire.sasl_gssapi import Acceptor, default_realm

log = logging.getLogger(__name__)


def kerberos_server(config: Config) -> KerberosServer | None:
    """The GSSAPI side of the server, or None when Kerberos is off."""
    if not config.kerberos_required():
        return None
    principal = server_principal(config["hive.metastore.kerberos.principal"] or "", "0.0.0.0")
    acceptor = Acceptor(principal, config["hive.metastore.kerberos.keytab.file"] or "",
                        config["hadoop.rpc.protection"])
    names = _auth_to_local(config, acceptor.default_realm)
    log.info("Kerberos: accepting as %s (keytab %s), protection %s", acceptor.principal,
             acceptor.keytab, ",".join(acceptor.qops))
    return KerberosServer(acceptor, names)


def _auth_to_local(config: Config, realm: str | None) -> AuthToLocal:
    try:
        return AuthToLocal(config["hadoop.security.auth_to_local"], default_realm=realm,
                           mechanism=config["hadoop.security.auth_to_local.mechanism"])
    except KerberosNameError as err:
        raise ConfigError(f"{config.source}: hadoop.security.auth_to_local: {err}") from None


def user_names(config: Config) -> Callable[[str], str]:
    """Principal -> short name for the names clients give (token owners and renewers):
    ``hadoop.security.auth_to_local`` with Kerberos, else the first component."""
    if not config.kerberos_required():
        return first_component
    realm = default_realm()
    if realm is None and config["hive.metastore.kerberos.principal"]:
        realm = config["hive.metastore.kerberos.principal"].rpartition("@")[2] or None
    return _auth_to_local(config, realm).short_name


def sasl_server(config: Config, credentials: CredentialLookup | None,
                kerberos: KerberosServer | None) -> SaslServer | None:
    """The handshake the server runs on every connection, or None without SASL."""
    if not config.sasl_required():
        return None
    if config["hive.metastore.thrift.framed.transport.enabled"]:
        raise ConfigError(f"{config.source}: Framed transport is not supported with SASL "
                          f"enabled (hive.metastore.thrift.framed.transport.enabled=true with "
                          f"hive.metastore.sasl.enabled): Hive's metastore refuses it too; "
                          f"SASL frames every message itself")
    plain_only = kerberos is None or config["hive.metastore.authentication"] == "CONFIG"
    return SaslServer(PasswordBook.from_config(config, required=plain_only), credentials,
                      kerberos)
