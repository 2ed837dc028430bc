"""A throw-away MIT Kerberos realm on loopback (PyPI's k5test drives Debian's krb5-kdc), for
the tests (tests/support/kerberos.py) and the handshake benchmark (``hms_bench.handshake``).

The KDC listens on 127.0.0.1 only, krb5.conf names it there, and host names are never
canonicalized through DNS. Principals, each with a keytab of its own under the realm's
directory:

* ``hive/localhost`` -- the metastores' service principal (ours and the Java one);
* ``hive/otherhost`` -- a real service principal of another host (the wrong-principal case);
* ``hive/stale`` -- a service whose key a test changes after exporting its keytab;
* ``alice``, ``bob`` -- users; ``oozie`` -- a service that may act for alice (proxy user);
* ``alice/admin`` -- a two-component user principal (auth_to_local rules).

Processes that use the realm get ``env`` (KRB5_CONFIG, a ticket cache of their own,
KRB5RCACHEDIR); a JVM gets ``java_options`` (``-Djava.security.krb5.conf``: Java ignores
KRB5_CONFIG).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
from dataclasses import dataclass, field

REALM = "HMSTXN.TEST"
SERVICE = f"hive/localhost@{REALM}"
PRINCIPALS = ("hive/localhost", "hive/otherhost", "hive/stale", "alice", "bob", "oozie",
              "alice/admin")


def _free_port_base() -> int:
    """A base port with the next 10 TCP and UDP ports free on loopback (k5test uses a few)."""
    for _ in range(200):
        base = random.randrange(20000, 60000, 10)
        ok = True
        for port in range(base, base + 10):
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                with socket.socket(socket.AF_INET, kind) as s:
                    try:
                        s.bind(("127.0.0.1", port))
                    except OSError:
                        ok = False
        if ok:
            return base
    raise RuntimeError("no free port range for the test KDC")


@dataclass
class Realm:
    k5: object
    tmpdir: str
    krb5_conf: str
    keytabs: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return REALM

    def principal(self, short: str) -> str:
        return f"{short}@{REALM}"

    def keytab(self, short: str) -> str:
        return self.keytabs[short]

    def env(self, ccache: str | None = None) -> dict[str, str]:
        """What a process using the realm needs (a ticket cache of its own: ``ccache``)."""
        out = {"KRB5_CONFIG": self.krb5_conf, "KRB5RCACHEDIR": self.tmpdir,
               "KRB5_KDC_PROFILE": os.path.join(self.tmpdir, "kdc.conf"),
               "KRB5CCNAME": f"FILE:{ccache or os.path.join(self.tmpdir, 'no-ticket')}"}
        return out

    def kinit(self, short: str, ccache: str) -> None:
        """A ticket for ``short`` from its keytab into the cache file ``ccache``."""
        subprocess.run(["kinit", "-k", "-t", self.keytab(short), self.principal(short)],
                       env={**os.environ, **self.env(ccache)}, check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)

    def java_options(self) -> list[str]:
        return [f"-Djava.security.krb5.conf={self.krb5_conf}",
                "-Dsun.security.krb5.disableReferrals=true"]

    def new_key(self, short: str) -> None:
        """Change the principal's key on the KDC (its keytab keeps the old one)."""
        self.k5.run_kadminl(["cpw", "-randkey", self.principal(short)])

    def stop(self) -> None:
        self.k5.stop()


def start_realm() -> Realm:
    import k5test

    loopback_krb5 = {
        "libdefaults": {"dns_canonicalize_hostname": "false", "rdns": "false",
                        "dns_lookup_realm": "false", "dns_lookup_kdc": "false",
                        "udp_preference_limit": "1", "default_realm": REALM},
        "realms": {"$realm": {"kdc": "127.0.0.1:$port0", "admin_server": "127.0.0.1:$port1",
                              "kpasswd_server": "127.0.0.1:$port2"}},
        "domain_realm": {"localhost": "$realm", "otherhost": "$realm"},
    }
    loopback_kdc = {"realms": {"$realm": {"kdc_ports": None, "kdc_tcp_ports": None,
                                          "kdc_listen": "127.0.0.1:$port0",
                                          "kdc_tcp_listen": "127.0.0.1:$port0"}}}
    k5 = k5test.K5Realm(realm=REALM, portbase=_free_port_base(), krb5_conf=loopback_krb5,
                        kdc_conf=loopback_kdc, create_user=False, create_host=False,
                        get_creds=False)
    realm = Realm(k5, k5.tmpdir, os.path.join(k5.tmpdir, "krb5.conf"))
    try:
        for short in PRINCIPALS:
            keytab = os.path.join(k5.tmpdir, short.replace("/", "_") + ".keytab")
            k5.addprinc(realm.principal(short))
            k5.extract_keytab(realm.principal(short), keytab)
            realm.keytabs[short] = keytab
    except BaseException:
        k5.stop()
        raise
    return realm
