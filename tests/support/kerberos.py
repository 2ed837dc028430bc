"""The suite's Kerberos realm: ``hms_bench.kdc`` (a throw-away MIT KDC on loopback, shared
with the handshake benchmark). tests/conftest.py's ``kdc`` fixture starts one realm per
session; every Kerberos test shares it."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

from hms_bench.kdc import PRINCIPALS, REALM, SERVICE, Realm, start_realm  # noqa: F401


@contextmanager
def realm_environment(realm: Realm) -> Iterator[Realm]:
    """This process uses ``realm`` (MIT reads KRB5_CONFIG at each use; no ticket cache
    unless a test names one) until the block ends; the environment is restored after."""
    saved = {k: os.environ.get(k) for k in realm.env()}
    os.environ.update(realm.env())
    try:
        yield realm
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
