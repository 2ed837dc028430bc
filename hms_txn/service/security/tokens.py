"""Delegation token calls: get, renew and cancel
(``hms_txn.domain.security.delegation_tokens``), and the DIGEST-MD5 credential look-up the
SASL server is given.

Who may call them depends on how the connection authenticated (``hms_txn.wire.session``):
tokens are issued over Kerberos (SASL GSSAPI) or SASL PLAIN, to the authenticated user or,
for a proxy user, to the user it may act for; renew and cancel also work over a DIGEST-MD5
(token) connection, for the token's renewer / owner. Refusals are
MetaException.
"""

from __future__ import annotations

import logging

from hms_txn.domain.security.delegation_tokens import DelegationTokenError, DelegationTokens
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.sasl import CredentialRefused, DigestCredential
from hms_txn.wire.session import (authenticated_principal, authenticated_user,
                                  authentication_mechanism, remote_address)

# The logger these messages always had (before the service layer, the token manager logged
# them itself): logging configurations that name it keep working.
log = logging.getLogger("hms_txn.domain.security.delegation_tokens")


class TokenService:
    """``get_delegation_token``, ``renew_delegation_token``, ``cancel_delegation_token``."""

    def __init__(self, units: UnitOfWork, tokens: DelegationTokens):
        self.units = units
        self.tokens = tokens

    # -- the calls, as the connection's authenticated user -------------------------------------

    def get_delegation_token(self, token_owner, renewer_kerberos_principal_name):
        return self.issue(token_owner, renewer_kerberos_principal_name,
                          user=authenticated_user(), mechanism=authentication_mechanism(),
                          address=remote_address(), principal=authenticated_principal())

    def renew_delegation_token(self, token_str_form):
        return self.renew(token_str_form, user=authenticated_user(),
                          mechanism=authentication_mechanism())

    def cancel_delegation_token(self, token_str_form):
        self.cancel(token_str_form, user=authenticated_user(),
                    mechanism=authentication_mechanism())

    # -- the same for a given user --------------------------------------------------------------

    def issue(self, owner: str | None, renewer: str | None, *, user: str | None,
              mechanism: str | None, address: str | None = None,
              principal: str | None = None) -> str:
        """A new token of ``user`` (or of ``owner``, for a proxy user), as its URL string."""
        request = self.tokens.check_issue(owner, renewer, user=user, mechanism=mechanism,
                                          address=address, principal=principal)
        token = self.units.write(lambda conn: self.tokens.issue(conn, request))
        log.info("issued delegation token %d to %s (renewer %r%s)",
                 token.decode_identifier().sequence_number, request.owner, request.renewer,
                 f", asked by proxy user {request.real_user}" if request.real_user else "")
        return token.encode_url_string()

    def renew(self, token_str: str, *, user: str | None, mechanism: str | None) -> int:
        """The token's new expiry (ms since the epoch)."""
        use = self.tokens.check_use("renew_delegation_token", token_str, user=user)
        expiry = self.units.write(lambda conn: self.tokens.renew(conn, use))
        log.info("%s renewed delegation token %d of %s until %d", use.caller,
                 use.ident.sequence_number, use.ident.owner, expiry)
        return expiry

    def cancel(self, token_str: str, *, user: str | None, mechanism: str | None) -> None:
        use = self.tokens.check_use("cancel_delegation_token", token_str, user=user)
        self.units.write(lambda conn: self.tokens.cancel(conn, use))
        log.info("%s cancelled delegation token %d of %s", use.caller,
                 use.ident.sequence_number, use.ident.owner)

    # -- DIGEST-MD5 --------------------------------------------------------------------------------

    def digest_credential(self, username: str) -> DigestCredential:
        """The credential of the token whose base64 identifier is ``username``; raises
        ``InvalidToken`` when the token is not one of ours, was cancelled or has expired."""
        found = self.units.read(lambda conn: self.tokens.token_secret(conn, username))
        return DigestCredential(user=found.owner, secret=found.secret,
                                label=f"delegation token {found.sequence_number}")

    def sasl_credential(self, username: str) -> DigestCredential:
        """``digest_credential`` as ``hms_txn.wire.sasl.SaslServer`` looks credentials up: a
        refused token is a ``CredentialRefused`` with the reason."""
        try:
            return self.digest_credential(username)
        except DelegationTokenError as err:
            raise CredentialRefused(err.message) from None
