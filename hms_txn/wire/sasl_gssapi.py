"""SASL GSSAPI (Kerberos V5, RFC 4752) for the metastore's Thrift connections: the server's
acceptor, the client's initiator, and the security layer both sides use afterwards.

The exchange, as Java's ``GssKrb5Server`` / ``GssKrb5Client`` run it inside Thrift's SASL
handshake (Hive's ``HadoopThriftAuthBridge``):

1. the client sends its Kerberos AP-REQ as the initial response; the server answers with
   the AP-REP (mutual authentication) and the client with an empty token;
2. the server sends a *wrapped* 4-byte offer: a bit mask of the protections it accepts
   (1 ``auth``, 2 ``auth-int``, 4 ``auth-conf``: Hadoop's ``hadoop.rpc.protection``
   authentication / integrity / privacy) and the largest message it takes (3 bytes);
3. the client answers, wrapped, with the one protection it chose (its own preference
   order), its largest message and, optionally, an authorization id, which must be the
   authenticated principal itself (impersonation goes through proxy users instead).

With ``auth`` Thrift messages then travel in plain 4-byte length-prefixed frames; with
``auth-int`` / ``auth-conf`` each frame holds one GSS-wrapped message (signed, or signed
and encrypted): ``SecurityLayer``. python-gssapi (MIT krb5) does the Kerberos work.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any

from hms_txn.common.config_keys import ConfigError

AUTH, AUTH_INT, AUTH_CONF = "auth", "auth-int", "auth-conf"
QOP_BITS = {AUTH: 1, AUTH_INT: 2, AUTH_CONF: 4}
_BY_STRENGTH = (AUTH_CONF, AUTH_INT, AUTH)
# The largest wrapped message we accept, in the 3 bytes the offer has for it.
MAX_BUFFER = 0xFFFFFF


class KerberosFailure(Exception):
    """A Kerberos step failed; the message is one line naming the cause."""


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError as err:       # pragma: no cover - a dependency of the package
        raise KerberosFailure(f"Kerberos needs python-gssapi: pip install 'hms-txn[kerberos]' "
                              f"(it builds against Debian's libkrb5-dev) ({err})") from None
    return gssapi


def qop_names(mask: int) -> str:
    names = [q for q in (AUTH, AUTH_INT, AUTH_CONF) if mask & QOP_BITS[q]]
    return ",".join(names) or "none"


def mask_of(qops: tuple[str, ...]) -> int:
    mask = 0
    for q in qops:
        mask |= QOP_BITS[q]
    return mask


# ----------------------------------------------------------------------------- errors

# MIT krb5's error codes (krb5_err.et) behind the GSS minor status of the failures a user
# can act on.
_KRB5 = 2529638912       # ERROR_TABLE_BASE_krb5 as an unsigned minor status
_S_PRINCIPAL_UNKNOWN, _TKT_EXPIRED, _REPEAT, _NOT_US, _SKEW = (
    _KRB5 + 7, _KRB5 + 32, _KRB5 + 34, _KRB5 + 35, _KRB5 + 37)
_BAD_INTEGRITY, _BADKEYVER, _MODIFIED = _KRB5 + 31, _KRB5 + 44, _KRB5 + 41


def describe(err: Exception, *, server_principal: str | None = None) -> str:
    """One line for a GSSError: what went wrong in Kerberos terms and what to change.
    ``server_principal``: this server's own principal (acceptor side)."""
    gss_message = getattr(err, "gen_message", None)
    detail = (gss_message() if gss_message else str(err)).replace("\n", " ")
    minor_text = detail
    if "Minor (" in detail:          # MIT's own words for the failure
        minor_text = detail.split("Minor (", 1)[-1].split("): ", 1)[-1]
    minor = getattr(err, "min_code", None)
    if minor == _SKEW or "Clock skew too great" in detail:
        return ("Kerberos: clock skew too great between the client and the server (Kerberos "
                "allows 5 minutes by default, krb5.conf clockskew): synchronize the clocks "
                "(NTP)")
    if minor == _NOT_US or "Cannot decrypt ticket for" in minor_text:
        found = re.search(r"ticket for (\S+)", minor_text)
        ticket = found.group(1) if found else "another principal"
        return (f"Kerberos: the client's service ticket is for {ticket}, not for this "
                f"metastore's principal {server_principal or '(unknown)'}: the client's "
                f"hive.metastore.kerberos.principal must name this server (_HOST becomes the "
                f"host name in the client's metastore URI) ({minor_text})")
    if minor == _S_PRINCIPAL_UNKNOWN:
        return (f"Kerberos: the KDC does not know the metastore's service principal: check "
                f"hive.metastore.kerberos.principal and the host name _HOST became "
                f"({minor_text})")
    if minor in (_BAD_INTEGRITY, _BADKEYVER, _MODIFIED):
        return (f"Kerberos: the ticket does not decrypt with the key of "
                f"{server_principal or 'the service'} in its keytab: the keytab is out of date "
                f"(export it again after the principal's key changed) ({minor_text})")
    if minor == _TKT_EXPIRED:
        return f"Kerberos: the client's ticket has expired: kinit again ({minor_text})"
    if minor == _REPEAT:
        return f"Kerberos: a replayed authenticator was refused ({minor_text})"
    if "No Kerberos credentials available" in detail or "No credentials cache found" in detail:
        return (f"Kerberos: no ticket: run kinit, or give a principal and keytab "
                f"(--principal/--keytab, hms_txn.client.kerberos.principal/.keytab) "
                f"({minor_text})")
    if "Cannot contact any KDC" in detail:
        return f"Kerberos: no KDC answers: check krb5.conf (KRB5_CONFIG) ({minor_text})"
    return f"Kerberos: {minor_text}"


# ----------------------------------------------------------------------- the security layer

class SecurityLayer:
    """Wraps and unwraps the Thrift messages of a connection that negotiated ``auth-int``
    (integrity) or ``auth-conf`` (integrity and confidentiality)."""

    def __init__(self, context: Any, qop: str):
        self.context = context
        self.qop = qop
        self.encrypt = qop == AUTH_CONF
        self._gss = _gssapi()

    def wrap(self, data: bytes) -> bytes:
        try:
            return self.context.wrap(data, self.encrypt).message
        except self._gss.exceptions.GSSError as err:
            raise KerberosFailure(f"SASL {self.qop}: cannot wrap a message: "
                                  f"{describe(err)}") from None

    def unwrap(self, data: bytes) -> bytes:
        try:
            result = self.context.unwrap(data)
        except self._gss.exceptions.GSSError as err:
            raise KerberosFailure(f"SASL {self.qop}: a message failed its integrity check "
                                  f"({describe(err)})") from None
        if self.encrypt and not result.encrypted:
            raise KerberosFailure("SASL auth-conf: the peer sent a message that is not "
                                  "encrypted")
        return result.message


def _offer(context: Any, mask: int, max_buffer: int) -> bytes:
    return context.wrap(bytes([mask]) + max_buffer.to_bytes(3, "big"), False).message


# ----------------------------------------------------------------------------- the server

@dataclass(frozen=True)
class GssapiOutcome:
    principal: str                   # the client's full principal, e.g. alice@EXAMPLE.COM
    qop: str
    layer: SecurityLayer | None      # None for auth


class Acceptor:
    """The server's Kerberos identity: acceptor credentials of ``principal`` from
    ``keytab``, acquired once (ConfigError naming the key when they cannot be)."""

    def __init__(self, principal: str, keytab: str, qops: tuple[str, ...]):
        try:
            gssapi = _gssapi()
        except KerberosFailure as err:
            raise ConfigError(str(err)) from None
        if not keytab:
            raise ConfigError("Kerberos is on but no keytab is given: set "
                              "hive.metastore.kerberos.keytab.file")
        if not principal:
            raise ConfigError("Kerberos is on but no principal is given: set "
                              "hive.metastore.kerberos.principal (e.g. hive/_HOST@EXAMPLE.COM)")
        if not os.access(keytab, os.R_OK):
            why = "does not exist" if not os.path.exists(keytab) else "is not readable"
            raise ConfigError(f"hive.metastore.kerberos.keytab.file: {keytab} {why}")
        self.principal = principal
        self.keytab = keytab
        self.qops = qops
        self.mask = mask_of(qops)
        try:
            self.credentials = gssapi.Credentials(
                name=gssapi.Name(principal, gssapi.NameType.kerberos_principal),
                usage="accept", store={"keytab": keytab})
        except gssapi.exceptions.GSSError as err:
            raise ConfigError(f"hive.metastore.kerberos.keytab.file: {keytab} cannot serve "
                              f"{principal} (hive.metastore.kerberos.principal): "
                              f"{describe(err)}") from None
        self.default_realm = default_realm() or principal.rpartition("@")[2]

    def negotiation(self) -> "ServerNegotiation":
        return ServerNegotiation(self)


class ServerNegotiation:
    """The server side of one GSSAPI exchange: ``respond(token)`` to each client message
    until ``outcome`` is set. Raises KerberosFailure with the reason to log and tell."""

    def __init__(self, acceptor: Acceptor):
        self.acceptor = acceptor
        self._gss = _gssapi()
        self.context = self._gss.SecurityContext(creds=acceptor.credentials, usage="accept")
        self._stage = 0
        self.principal: str | None = None
        self.outcome: GssapiOutcome | None = None

    @property
    def offered(self) -> str:
        return qop_names(self.acceptor.mask)

    def respond(self, token: bytes) -> bytes:
        try:
            return self._respond(token)
        except self._gss.exceptions.GSSError as err:
            raise KerberosFailure(describe(err, server_principal=self.acceptor.principal)) from None

    def _respond(self, token: bytes) -> bytes:
        if self._stage == 0:
            reply = self.context.step(token)
            if not self.context.complete:
                return reply or b""
            self.principal = str(self.context.initiator_name)
            self._stage = 1
            if reply:              # the AP-REP; the client answers with an empty token
                return reply
            token = b""
        if self._stage == 1:
            if token:
                raise KerberosFailure("SASL GSSAPI: the client sent data where an empty "
                                      "response belongs")
            self._stage = 2
            return _offer(self.context, self.acceptor.mask, MAX_BUFFER)
        data = self.context.unwrap(token).message
        if len(data) < 4:
            raise KerberosFailure("SASL GSSAPI: the client's choice of protection is too short")
        chosen = data[0] & self.acceptor.mask
        if not chosen:
            raise KerberosFailure(
                f"SASL GSSAPI: the client chose protection {qop_names(data[0])}, which this "
                f"metastore does not accept (it offers {self.offered}: hadoop.rpc.protection)")
        qop = next(q for q in _BY_STRENGTH if chosen & QOP_BITS[q])
        authzid = data[4:].decode("utf-8", "replace")
        if authzid and authzid != self.principal:
            raise KerberosFailure(
                f"SASL GSSAPI: {self.principal} asked to act as {authzid!r}; the authorization "
                f"id must be the authenticated principal (a proxy user obtains a delegation "
                f"token for the other user instead)")
        layer = SecurityLayer(self.context, qop) if qop != AUTH else None
        self.outcome = GssapiOutcome(self.principal, qop, layer)
        return b""


def default_realm() -> str | None:
    """krb5.conf's default realm (what Hadoop's DEFAULT auth_to_local rule compares
    with): the realm MIT appends to a principal name given without one."""
    gssapi = _gssapi()
    try:
        name = gssapi.Name("hms-txn", gssapi.NameType.kerberos_principal)
        text = str(name.canonicalize(gssapi.MechType.kerberos))
    except gssapi.exceptions.GSSError:
        return None
    return text.rpartition("@")[2] or None


# ----------------------------------------------------------------------------- the client

_credentials: dict[tuple[str | None, str | None], Any] = {}
_credentials_lock = threading.Lock()


def client_credentials(principal: str | None = None, keytab: str | None = None) -> Any:
    """Initiator credentials: from ``keytab`` (a ticket obtained for ``principal``, kept in
    a memory cache of this process and renewed from the keytab by krb5 when it expires),
    else the ticket cache (KRB5CCNAME, kinit's). Cached per (principal, keytab)."""
    gssapi = _gssapi()
    if keytab and not os.access(keytab, os.R_OK):
        why = "does not exist" if not os.path.exists(keytab) else "is not readable"
        raise KerberosFailure(f"Kerberos: the keytab {keytab} {why}")
    key = (principal, keytab)
    with _credentials_lock:
        found = _credentials.get(key)
        if found is not None:
            return found
        name = gssapi.Name(principal, gssapi.NameType.kerberos_principal) if principal else None
        try:
            if keytab:
                creds = gssapi.Credentials(
                    name=name, usage="initiate",
                    store={"client_keytab": keytab,
                           "ccache": f"MEMORY:hms-txn-{os.getpid()}-{len(_credentials)}"})
            else:
                creds = gssapi.Credentials(name=name, usage="initiate")
        except gssapi.exceptions.GSSError as err:
            raise KerberosFailure(describe(err)) from None
        if keytab:               # ticket-cache credentials are looked up at each use
            _credentials[key] = creds
        return creds


def ticket_principal() -> str:
    """The principal of the ticket cache's ticket (KRB5CCNAME, kinit's)."""
    gssapi = _gssapi()
    try:
        return str(gssapi.Credentials(usage="initiate").name)
    except gssapi.exceptions.GSSError as err:
        raise KerberosFailure(describe(err)) from None


class ClientNegotiation:
    """The client side of one GSSAPI exchange with ``service`` (a full principal),
    choosing the first of ``qops`` the server offers."""

    def __init__(self, service: str, credentials: Any, qops: tuple[str, ...] = (AUTH,)):
        self._gss = gssapi = _gssapi()
        flags = (gssapi.RequirementFlag.mutual_authentication
                 | gssapi.RequirementFlag.out_of_sequence_detection
                 | gssapi.RequirementFlag.integrity | gssapi.RequirementFlag.confidentiality)
        self.service = service
        self.qops = qops
        self.context = gssapi.SecurityContext(
            name=gssapi.Name(service, gssapi.NameType.kerberos_principal), creds=credentials,
            usage="initiate", flags=flags)
        self.layer: SecurityLayer | None = None
        self.qop: str | None = None
        self.complete = False

    def initial(self) -> bytes:
        return self._guarded(lambda: self.context.step() or b"")

    def step(self, challenge: bytes) -> bytes:
        return self._guarded(lambda: self._step(challenge))

    def _guarded(self, action: Any) -> bytes:
        try:
            return action()
        except self._gss.exceptions.GSSError as err:
            raise KerberosFailure(describe(err)) from None

    def _step(self, challenge: bytes) -> bytes:
        if not self.context.complete:
            return self.context.step(challenge) or b""
        data = self.context.unwrap(challenge).message
        if len(data) != 4:
            raise KerberosFailure("SASL GSSAPI: the server's offer of protection is malformed")
        offered = data[0]
        chosen = next((q for q in self.qops if offered & QOP_BITS[q]), None)
        if chosen is None:
            raise KerberosFailure(
                f"SASL GSSAPI: no common protection: the metastore offers {qop_names(offered)}, "
                f"this client accepts {','.join(self.qops)} (hadoop.rpc.protection must share "
                f"a level on both sides)")
        self.qop = chosen
        self.layer = SecurityLayer(self.context, chosen) if chosen != AUTH else None
        self.complete = True
        size = MAX_BUFFER if chosen != AUTH else 0
        return self.context.wrap(bytes([QOP_BITS[chosen]]) + size.to_bytes(3, "big"),
                                 False).message
