"""Delegation token calls: get, renew and cancel (``hms_txn.delegation_tokens``).

Who may call them depends on how the connection authenticated (``session``): tokens are
issued over SASL PLAIN only, to the authenticated user; renew and cancel also work over a
DIGEST-MD5 (token) connection, for the token's renewer / owner. Refusals are MetaException.
"""

from __future__ import annotations

from typing import Any

from hms_txn.wire.session import authenticated_user, authentication_mechanism


class TokenCalls:
    ms: Any

    def get_delegation_token(self, token_owner, renewer_kerberos_principal_name):
        return self.ms.tokens.issue(token_owner, renewer_kerberos_principal_name,
                                    user=authenticated_user(), mechanism=authentication_mechanism())

    def renew_delegation_token(self, token_str_form):
        return self.ms.tokens.renew(token_str_form, user=authenticated_user(),
                                    mechanism=authentication_mechanism())

    def cancel_delegation_token(self, token_str_form):
        self.ms.tokens.cancel(token_str_form, user=authenticated_user(),
                              mechanism=authentication_mechanism())
