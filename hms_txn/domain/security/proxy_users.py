"""Hadoop proxy users: who may act for whom, from where (``hadoop.proxyuser.*``).

A service that holds its own Kerberos identity (Oozie, HiveServer2, a job scheduler) obtains
delegation tokens for the users it runs work for: ``get_delegation_token(owner=alice)``
called by ``oozie``. Hive allows it when Hadoop's ``DefaultImpersonationProvider`` does,
with the real user's short name ``R``:

* ``hadoop.proxyuser.R.users``: users R may act for (comma-separated, ``*``: anyone);
* ``hadoop.proxyuser.R.groups``: or users in one of these groups (``*``: anyone), the
  groups being the operating system's (Hadoop's default ``ShellBasedUnixGroupsMapping``);
* ``hadoop.proxyuser.R.hosts``: and only from these addresses (IPs, CIDR ranges, host
  names; ``*``: anywhere). No ``hosts`` key: from nowhere.

The refusals carry Hadoop's words (``User: R is not allowed to impersonate U``,
``Unauthorized connection for super-user: R from IP A``).
"""

from __future__ import annotations

import grp
import ipaddress
import os
import pwd
import socket
from dataclasses import dataclass
from typing import Callable, Mapping

PREFIX = "hadoop.proxyuser."
WILDCARD = "*"


class ImpersonationRefused(Exception):
    """The real user may not act for that user, or not from that address."""


def unix_groups(user: str) -> set[str]:
    """The operating system's groups of ``user`` (none for an unknown user)."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return set()
    names = set()
    for gid in os.getgrouplist(user, entry.pw_gid):
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return names


def _items(text: str | None) -> set[str]:
    return {part.strip() for part in (text or "").split(",") if part.strip()}


@dataclass(frozen=True)
class _Rule:
    users: set[str]
    groups: set[str]
    hosts: set[str] | None        # None: no hosts key (no address allowed)


class ProxyUsers:
    def __init__(self, rules: dict[str, _Rule],
                 groups_of: Callable[[str], set[str]] = unix_groups):
        self.rules = rules
        self.groups_of = groups_of

    @classmethod
    def from_config(cls, raw: Mapping[str, str], **kwargs) -> "ProxyUsers":
        """The ``hadoop.proxyuser.<user>.users/groups/hosts`` keys of a raw configuration."""
        found: dict[str, dict[str, str]] = {}
        for key, value in raw.items():
            if not key.startswith(PREFIX):
                continue
            user, _, kind = key[len(PREFIX):].rpartition(".")
            if user and kind in ("users", "groups", "hosts"):
                found.setdefault(user, {})[kind] = value
        rules = {user: _Rule(_items(keys.get("users")), _items(keys.get("groups")),
                             _items(keys["hosts"]) if "hosts" in keys else None)
                 for user, keys in found.items()}
        return cls(rules, **kwargs)

    def authorize(self, real_user: str, user: str, address: str | None, *,
                  real_name: str | None = None) -> None:
        """Allow ``real_user`` (a short name; ``real_name``: its principal, for the message)
        to act for ``user`` from ``address``, or raise ImpersonationRefused."""
        shown = real_name or real_user
        rule = self.rules.get(real_user)
        if rule is None or not self._user_allowed(rule, user):
            raise ImpersonationRefused(f"User: {shown} is not allowed to impersonate {user}")
        if rule.hosts is None or not _host_allowed(rule.hosts, address):
            raise ImpersonationRefused(f"Unauthorized connection for super-user: {shown} from "
                                       f"IP {address}")

    def _user_allowed(self, rule: _Rule, user: str) -> bool:
        if WILDCARD in rule.users or WILDCARD in rule.groups or user in rule.users:
            return True
        return bool(rule.groups and rule.groups & self.groups_of(user))


def _host_allowed(hosts: set[str], address: str | None) -> bool:
    if WILDCARD in hosts:
        return True
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address in hosts
    for entry in hosts:
        try:
            if ip in ipaddress.ip_network(entry, strict=False):
                return True
            continue
        except ValueError:
            pass
        try:                     # a host name: any of its addresses
            infos = socket.getaddrinfo(entry, None)
        except OSError:
            continue
        if any(ipaddress.ip_address(info[4][0]) == ip for info in infos):
            return True
    return False
