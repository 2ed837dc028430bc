"""Kerberos principal names as Hadoop treats them: parsing, the ``_HOST`` placeholder of
service principals, and ``hadoop.security.auth_to_local`` (principal -> short user name).

Every user name the metastore records or checks is a *short name*: ``alice@EXAMPLE.COM``
and ``alice/admin@EXAMPLE.COM`` become ``alice`` under the default rule. Hadoop's rules
(``KerberosName`` in hadoop-auth) are reproduced exactly, so a cluster's existing
``auth_to_local`` setting gives the same names here as in its Java services:

* ``DEFAULT``: a principal of the default realm (krb5.conf's ``default_realm``) maps to its
  first component; a principal of another realm matches no rule.
* ``RULE:[n:format](regex)s/pattern/replacement/g`` (then optionally ``/L``): applies to
  principals with ``n`` components; ``format`` builds a string from ``$0`` (the realm),
  ``$1``, ``$2`` (the components); the rule applies when ``regex`` matches that whole
  string; ``s/.../.../`` then rewrites it (``g``: every match), ``/L`` lower-cases it.
* The first rule that applies wins. With ``hadoop.security.auth_to_local.mechanism=hadoop``
  (the default) no applicable rule, or a result that still holds ``/`` or ``@``, is an
  error; with ``mit`` the principal itself is the answer then.

``server_principal`` replaces ``_HOST`` in ``service/_HOST@REALM`` as Hadoop's
``SecurityUtil.getServerPrincipal`` does: with the host a client connects to, or, for a
server's own principal, this machine's canonical host name; lower-cased.
``parse_rpc_protection`` reads ``hadoop.rpc.protection`` (a list, as Hadoop takes it).
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

HOST_PATTERN = "_HOST"
MECHANISMS = ("hadoop", "mit")


class KerberosNameError(ValueError):
    """A malformed principal or rule, or a principal no rule maps to a short name."""


@dataclass(frozen=True)
class KerberosName:
    """``service[/host][@realm]`` (Hadoop accepts at most two components)."""

    service: str
    host: str | None = None
    realm: str | None = None

    @classmethod
    def parse(cls, name: str) -> "KerberosName":
        match = _NAME.fullmatch(name)
        if match is None:
            if "@" in name:
                raise KerberosNameError(f"malformed Kerberos name: {name!r}")
            return cls(name)     # Hadoop: a name without realm is kept as it is
        return cls(match.group(1), match.group(3), match.group(5))

    def __str__(self) -> str:
        text = self.service
        if self.host is not None:
            text += "/" + self.host
        if self.realm is not None:
            text += "@" + self.realm
        return text


_NAME = re.compile(r"([^/@]+)(/([^/@]+))?(@([^/@]+))?")
# \s*( DEFAULT | RULE:[n:format](regex)?(s/from/to/(g)?)? ) /?(L)?
_RULE = re.compile(r"\s*((DEFAULT)|(RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?"
                   r"(s/([^/]*)/([^/]*)/(g)?)?))/?(L)?")
_PARAMETER = re.compile(r"([^$]*)(\$(\d*))?")
_NON_SIMPLE = re.compile(r"[/@]")


def _java_replacement(text: str) -> str:
    """A ``java.util.regex.Matcher.replaceAll`` replacement (``$1`` groups, ``\\x``
    escapes) as a Python ``re.sub`` template."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$":
            digits = re.match(r"\d+", text[i + 1:])
            if digits is None:
                raise KerberosNameError(f"illegal group reference in {text!r}")
            out.append(f"\\g<{digits.group()}>")
            i += 1 + len(digits.group())
        else:
            out.append("\\\\" if c == "\\" else c)
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class Rule:
    default: bool
    components: int = 0
    fmt: str = ""
    match: re.Pattern | None = None
    pattern: re.Pattern | None = None
    replacement: str = ""
    repeat: bool = False
    lower: bool = False
    text: str = ""

    def apply(self, params: list[str], mechanism: str, default_realm: str | None) -> str | None:
        """The short name of ``params`` ([realm, component, ...]) under this rule, or None
        when it does not apply."""
        result = None
        if self.default:
            if default_realm is not None and params[0] == default_realm:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = _format(self.fmt, params, self.text)
            if self.match is None or self.match.fullmatch(base):
                if self.pattern is None:
                    result = base
                else:
                    result = self.pattern.sub(self.replacement, base,
                                              count=0 if self.repeat else 1)
        if result is not None and mechanism == "hadoop" and _NON_SIMPLE.search(result):
            raise KerberosNameError(f"non-simple name {result!r} after auth_to_local rule "
                                    f"{self.text}")
        if result is not None and self.lower:
            result = result.lower()
        return result


def _format(fmt: str, params: list[str], rule: str) -> str:
    out = []
    for match in _PARAMETER.finditer(fmt):
        out.append(match.group(1))
        if match.group(3) is not None:
            try:
                index = int(match.group(3))
            except ValueError:
                raise KerberosNameError(f"bad format in auth_to_local rule {rule}") from None
            if index >= len(params):
                raise KerberosNameError(f"index {index} of format {fmt!r} is out of range "
                                        f"in auth_to_local rule {rule}")
            out.append(params[index])
        if match.end() == len(fmt):
            break
    return "".join(out)


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Hadoop's ``hadoop.security.auth_to_local`` value; KerberosNameError naming the
    first part that is not a rule."""
    rules, remaining = [], text.strip()
    while remaining:
        match = _RULE.match(remaining)
        if match is None or match.end() == 0:
            raise KerberosNameError(f"invalid auth_to_local rule: {remaining.splitlines()[0]!r}")
        lower = match.group(12) == "L"
        shown = match.group(0).strip()
        if match.group(2):
            rules.append(Rule(True, lower=lower, text=shown))
        else:
            try:
                rules.append(Rule(
                    False, components=int(match.group(4) or 0), fmt=match.group(5),
                    match=re.compile(match.group(7)) if match.group(7) is not None else None,
                    pattern=re.compile(match.group(9)) if match.group(9) is not None else None,
                    replacement=_java_replacement(match.group(10) or ""),
                    repeat=match.group(11) == "g", lower=lower, text=shown))
            except re.error as err:
                raise KerberosNameError(f"invalid regular expression in auth_to_local rule "
                                        f"{shown}: {err}") from None
        remaining = remaining[match.end():].lstrip()
    return tuple(rules)


class AuthToLocal:
    """Principal -> short name, under the rules of ``hadoop.security.auth_to_local``."""

    def __init__(self, rules: str = "DEFAULT", *, default_realm: str | None = None,
                 mechanism: str = "hadoop"):
        mechanism = mechanism.strip().lower()
        if mechanism not in MECHANISMS:
            raise KerberosNameError(f"auth_to_local mechanism must be hadoop or mit, not "
                                    f"{mechanism!r}")
        self.rules = parse_rules(rules or "DEFAULT")
        self.default_realm = default_realm
        self.mechanism = mechanism

    def short_name(self, principal: str) -> str:
        """The user name of ``principal``; KerberosNameError when no rule maps it (the
        message names the principal and the setting to change)."""
        name = KerberosName.parse(principal)
        if name.realm is None and name.host is None:
            return name.service
        params = [name.realm or "", name.service] + ([name.host] if name.host is not None else [])
        for rule in self.rules:
            result = rule.apply(params, self.mechanism, self.default_realm)
            if result is not None:
                return result
        if self.mechanism == "hadoop":
            raise KerberosNameError(
                f"no auth_to_local rule applies to {principal} (hadoop.security.auth_to_local; "
                f"the DEFAULT rule maps principals of the default realm "
                f"{self.default_realm or '(unknown)'} only)")
        return str(name)


def server_principal(principal: str, host: str | None = None) -> str:
    """``principal`` with ``_HOST`` replaced by ``host`` (lower-cased), or by this
    machine's canonical host name when ``host`` is empty or ``0.0.0.0``. Principals that
    are not ``service/_HOST@REALM`` come back unchanged."""
    parts = re.split(r"[/@]", principal)
    if len(parts) != 3 or parts[1] != HOST_PATTERN:
        return principal
    if not host or host == "0.0.0.0":
        host = socket.getfqdn()
    return f"{parts[0]}/{host.lower()}@{parts[2]}"


# hadoop.rpc.protection's names (Hadoop's SaslRpcServer.QualityOfProtection) -> SASL's qop
RPC_PROTECTION = {"authentication": "auth", "integrity": "auth-int", "privacy": "auth-conf"}


def parse_rpc_protection(text: str) -> tuple[str, ...]:
    """Hadoop's comma-separated ``hadoop.rpc.protection`` as SASL qop names, in order
    (a client prefers the first the server offers)."""
    out: list[str] = []
    for part in filter(None, (p.strip().lower() for p in text.split(","))):
        if part not in RPC_PROTECTION:
            raise ValueError(f"{part!r} is not one of {', '.join(RPC_PROTECTION)}")
        if RPC_PROTECTION[part] not in out:
            out.append(RPC_PROTECTION[part])
    if not out:
        raise ValueError(f"expected one or more of {', '.join(RPC_PROTECTION)}")
    return tuple(out)


def parse_auth_to_local(text: str) -> str:
    """``hadoop.security.auth_to_local`` rules, checked (the text is kept)."""
    parse_rules(text)
    return text.strip() or "DEFAULT"
