"""How a client of a metastore connects, from a configuration: the one mapping of the
hive-site.xml keys onto ``hms_txn.wire.client.ClientOptions``, used by the ``hms-txn``
commands, ``spark.hive_acid`` and the streaming client (extension mode's upstream has its
own ``hms_txn.upstream.*`` keys, with the same TLS keys).

* where: ``uri``, else ``hive.metastore.uris``, else ``thrift://127.0.0.1:<hive.metastore.port>``;
* ``hive.metastore.thrift.framed.transport.enabled`` / ``.compact.protocol.enabled``: the
  transport and protocol, as the server reads them;
* ``hive.metastore.use.SSL`` and ``hive.metastore.truststore.path`` (``wire.tls.TlsClient``);
* SASL when ``hive.metastore.sasl.enabled`` (or ``hive.metastore.authentication=CONFIG``
  or ``KERBEROS``) is on or a PLAIN user is given: PLAIN as that user (``user``/``password``
  arguments, else ``hive.metastore.client.plain.username`` / ``hms_txn.client.plain.password``),
  else DIGEST-MD5 with the Hive delegation token of the Hadoop credentials file named by
  ``HADOOP_TOKEN_FILE_LOCATION`` whose service is ``hive.metastore.token.signature``, else
  Kerberos (GSSAPI) when it is configured (``Config.kerberos_required``, or the metastore's
  principal given): the metastore's
  principal ``hive.metastore.kerberos.principal``, this client's ticket from the ticket
  cache or from ``hms_txn.client.kerberos.keytab`` (``principal``/``keytab`` arguments win),
  the protections of ``hadoop.rpc.protection`` -- the order Hive's own client follows.
"""

from __future__ import annotations

import os

from hms_txn.common.config import Config, ConfigError
from hms_txn.domain.security.token_codec import KIND, read_credentials
from hms_txn.wire.client import (ClientOptions, MetastoreClient, SaslDigest, SaslGssapi,
                                 SaslPlain, connect)
from hms_txn.wire.tls import TlsClient, TlsSetupError

TOKEN_FILE_ENV = "HADOOP_TOKEN_FILE_LOCATION"


def metastore_uri(config: Config, uri: str | None = None) -> str:
    return uri or config["hive.metastore.uris"] or \
        f"thrift://127.0.0.1:{config['hive.metastore.port']}"


def client_options(config: Config, *, user: str | None = None, password: str | None = None,
                   principal: str | None = None, keytab: str | None = None,
                   timeout: float = 60.0) -> ClientOptions:
    """The options of a connection as ``config`` describes it (see the module docstring);
    ConfigError naming the key or file when they cannot be used."""
    try:
        tls = TlsClient.from_config(config)
        if tls is not None:
            tls.context()              # a trust store that cannot be loaded fails here
    except TlsSetupError as err:
        raise ConfigError(f"{config.source}: {err}") from None
    user = user or config["hive.metastore.client.plain.username"]
    if user:
        sasl = SaslPlain(user, password if password is not None
                         else config["hms_txn.client.plain.password"] or "")
    elif principal or keytab or config.sasl_required():
        sasl = token_or_kerberos(config, principal, keytab)
    else:
        sasl = None
    return ClientOptions(
        sasl=sasl, timeout=timeout, tls=tls,
        framed=config["hive.metastore.thrift.framed.transport.enabled"],
        compact=config["hive.metastore.thrift.compact.protocol.enabled"])


def token_or_kerberos(config: Config, principal: str | None = None,
                      keytab: str | None = None) -> SaslDigest | SaslGssapi:
    """A delegation token of ``HADOOP_TOKEN_FILE_LOCATION`` when there is one (and no
    Kerberos identity is given), else Kerberos when configured; ConfigError otherwise."""
    principal = principal or config["hms_txn.client.kerberos.principal"]
    keytab = keytab or config["hms_txn.client.kerberos.keytab"]
    # Hive's client: SASL on and no token means Kerberos with hive.metastore.kerberos.principal
    kerberos = (bool(principal or keytab) or config.kerberos_required()
                or bool(config["hive.metastore.kerberos.principal"]))
    if os.environ.get(TOKEN_FILE_ENV) and not (principal or keytab):
        try:
            return token_sasl(config["hive.metastore.token.signature"])
        except ConfigError:
            if not kerberos:
                raise
    if not kerberos:
        return token_sasl(config["hive.metastore.token.signature"])
    service = config["hive.metastore.kerberos.principal"]
    if not service:
        raise ConfigError(f"{config.source}: Kerberos needs the metastore's principal: set "
                          f"hive.metastore.kerberos.principal (e.g. hive/_HOST@EXAMPLE.COM)")
    if keytab and not principal:
        raise ConfigError("a keytab needs the principal whose key it holds (--principal, "
                          "hms_txn.client.kerberos.principal)")
    return SaslGssapi(service, principal or None, keytab or None, config["hadoop.rpc.protection"])


def token_sasl(signature: str) -> SaslDigest:
    """SASL DIGEST-MD5 with the delegation token of ``HADOOP_TOKEN_FILE_LOCATION`` whose
    service is ``signature``."""
    path = os.environ.get(TOKEN_FILE_ENV)
    if not path:
        raise ConfigError(
            "the metastore requires SASL (hive.metastore.sasl.enabled=true): give a user and "
            "password (--user/--password-file, or hive.metastore.client.plain.username), a "
            f"delegation token file in {TOKEN_FILE_ENV} (hms-txn delegation-token), or a "
            "Kerberos identity (hadoop.security.authentication=kerberos and "
            "hive.metastore.kerberos.principal, with kinit or --principal/--keytab)")
    try:
        with open(path, "rb") as f:
            entries = read_credentials(f.read())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{TOKEN_FILE_ENV}={path}: cannot read the credentials file: "
                          f"{err}") from None
    for _alias, token in entries:
        if token.kind == KIND and token.service == signature:
            return SaslDigest(token.sasl_username, token.sasl_password)
    raise ConfigError(f"{TOKEN_FILE_ENV}={path} holds no {KIND} with service {signature!r} "
                      f"(hive.metastore.token.signature)")


def connect_configured(config: Config, uri: str | None = None, **kwargs) -> MetastoreClient:
    """A client of ``uri`` (or the configuration's metastore) connected as ``config``
    says; ``kwargs`` go to ``client_options``. Raises ConfigError, ValueError for a bad URI
    and ``wire.client.MetastoreUnreachable``."""
    return connect(metastore_uri(config, uri), options=client_options(config, **kwargs))
