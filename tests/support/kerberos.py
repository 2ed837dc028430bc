"""The suite's Kerberos realm: ``hms_bench.kdc`` (a throw-away MIT KDC on loopback, shared
with the handshake benchmark). tests/conftest.py's ``kdc`` fixture starts one realm per
session; every Kerberos test shares it."""

from __future__ import annotations

from hms_bench.kdc import PRINCIPALS, REALM, SERVICE, Realm, start_realm  # noqa: F401
