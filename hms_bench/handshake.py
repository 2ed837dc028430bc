"""What authentication costs a connection: connections per second with no SASL, SASL PLAIN
and SASL GSSAPI (Kerberos, ``auth`` and ``auth-conf``), ours beside the Java metastore 2.3.

    python -m hms_bench.handshake [--out DIR] [--clients 1,4] [--rounds 3] [--round-seconds 3]

Starts a throw-away KDC on loopback (``hms_bench.kdc``), two ``hms-txn serve`` processes
(no SASL; Kerberos with PLAIN beside it) and two Java metastores (no SASL; Kerberos), all
offering ``hadoop.rpc.protection=authentication,privacy``. Each client process loops
connect -> ``get_database("default")`` -> close; Kerberos clients hold a ticket from a
keytab (the KDC is asked once per process, as a long-running client would), so a
connection costs the AP-REQ/AP-REP exchange and the security-layer negotiation. Reported
per cell: connections per second (median of the rounds) and the server's CPU time per
connection (``/proc/<pid>/stat``, less sensitive to a loaded machine than the rate), after
a warm-up run per cell.
Writes ``handshake.json`` into ``--out``. Needs the test extra (k5test, gssapi), Debian's
krb5-kdc, Java 17 and pyspark's jars (the Java metastore).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from hms_bench.kdc import SERVICE, Realm, start_realm
from hms_bench.servers import OurServer, cpu_seconds, free_port

PROTECTION = "authentication,privacy"
# (cell, target, SASL: None | "plain" | QOP)
CELLS = [("none", "ours-none", None), ("plain", "ours-sasl", "plain"),
         ("gssapi-auth", "ours-sasl", "auth"), ("gssapi-auth-conf", "ours-sasl", "auth-conf"),
         ("none", "java-none", None), ("gssapi-auth", "java-krb", "auth"),
         ("gssapi-auth-conf", "java-krb", "auth-conf")]


def _options(realm: dict[str, str], sasl: str | None):
    from hms_txn.wire.client import ClientOptions, SaslGssapi, SaslPlain
    if sasl is None:
        return ClientOptions(timeout=60)
    if sasl == "plain":
        return ClientOptions(timeout=60, sasl=SaslPlain("carol", "pw"))
    return ClientOptions(timeout=60, sasl=SaslGssapi(SERVICE, realm["principal"],
                                                     realm["keytab"], (sasl,)))


def _client(port: int, realm: dict[str, str], sasl: str | None, seconds: float, ready: Any,
            go: Any, out: Any) -> None:
    os.environ.update(realm["env"])
    from hms_txn.wire.client import connect
    options = _options(realm, sasl)
    uri = f"thrift://localhost:{port}"
    with connect(uri, options=options) as c:        # the ticket, before the clock starts
        c.get_database("default")
    ready.put(os.getpid())
    go.wait()
    stop_at = time.monotonic() + seconds
    done = errors = 0
    while time.monotonic() < stop_at:
        try:
            with connect(uri, options=options) as c:
                c.get_database("default")
            done += 1
        except Exception:          # counted; a benchmark must not stop on one refusal
            errors += 1
    out.put((done, errors))


def run_cell(pid: int, port: int, realm: dict[str, str], sasl: str | None, clients: int,
             rounds: int, seconds: float) -> dict[str, Any]:
    """``rounds`` runs of ``clients`` processes started together once each is connected,
    after one run that is not counted (the JVM's JIT, the server's caches)."""
    ctx = mp.get_context("spawn")
    rates, cpu_per_conn, errors = [], [], 0
    for number in range(rounds + 1):
        ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=_client, args=(port, realm, sasl, seconds, ready, go, out))
                 for _ in range(clients)]
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=300)
        cpu_before = cpu_seconds(pid)
        go.set()
        results = [out.get(timeout=seconds + 300) for _ in procs]
        cpu_after = cpu_seconds(pid)
        for p in procs:
            p.join(30)
        done = sum(r[0] for r in results)
        if number == 0:
            continue            # the warm-up run
        errors += sum(r[1] for r in results)
        rates.append(done / seconds)
        if cpu_before is not None and cpu_after is not None and done:
            cpu_per_conn.append((cpu_after - cpu_before) * 1000.0 / done)
    return {"conn_per_s": statistics.median(rates), "rounds": rates,
            "server_cpu_ms_per_conn": statistics.median(cpu_per_conn) if cpu_per_conn else None,
            "errors": errors}


def start_servers(realm: Realm, work: str) -> dict[str, Any]:
    from hms_bench.javahms import start_java_metastore
    kerberos = {"hive.metastore.sasl.enabled": "true",
                "hive.metastore.kerberos.principal": SERVICE,
                "hive.metastore.kerberos.keytab.file": realm.keytab("hive/localhost")}
    servers: dict[str, Any] = {}
    servers["ours-none"] = OurServer("ours-none", os.path.join(work, "ours-none"), {})
    servers["ours-sasl"] = OurServer("ours-sasl", os.path.join(work, "ours-sasl"), {
        **kerberos, "hadoop.security.authentication": "kerberos",
        "hadoop.rpc.protection": PROTECTION,
        "hive.metastore.authentication.config.username": "carol",
        "hive.metastore.authentication.config.password": "pw"})
    servers["java-none"] = start_java_metastore(free_port(), os.path.join(work, "java-none"))
    servers["java-krb"] = start_java_metastore(
        free_port(), os.path.join(work, "java-krb"), extra_conf=kerberos,
        core_site={"hadoop.security.authentication": "kerberos",
                   "hadoop.rpc.protection": PROTECTION},
        jvm_options=tuple(realm.java_options()))
    return servers


def _pid(server: Any) -> int:
    return server.pid if hasattr(server, "pid") else server.process.pid


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hms_bench.handshake", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="bench-handshake")
    p.add_argument("--clients", default="1,4", help="client processes per cell (default 1,4)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--round-seconds", type=float, default=3.0)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    realm = start_realm()
    work = tempfile.mkdtemp(prefix="hms-handshake-")
    os.environ.update(realm.env())             # our servers (child processes) use the realm
    servers: dict[str, Any] = {}
    results: list[dict[str, Any]] = []
    try:
        servers = start_servers(realm, work)
        client_realm = {"env": realm.env(), "principal": realm.principal("alice"),
                        "keytab": realm.keytab("alice")}
        for clients in (int(c) for c in args.clients.split(",")):
            for cell, target, sasl in CELLS:
                server = servers[target]
                row = {"target": target, "cell": cell, "clients": clients,
                       **run_cell(_pid(server), server.port, client_realm, sasl, clients,
                                  args.rounds, args.round_seconds)}
                results.append(row)
                cpu = row["server_cpu_ms_per_conn"]
                print(f"{target:10} {cell:17} {clients:2} clients: {row['conn_per_s']:8.1f} "
                      f"conn/s  server CPU {cpu if cpu is None else round(cpu, 3)} ms/conn"
                      f"{'  errors ' + str(row['errors']) if row['errors'] else ''}",
                      flush=True)
    finally:
        for server in servers.values():
            server.stop()
        realm.stop()
    with open(os.path.join(args.out, "handshake.json"), "w") as f:
        json.dump({"protection": PROTECTION, "load": os.getloadavg(), "cells": results}, f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
