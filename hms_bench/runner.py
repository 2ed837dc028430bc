"""``hms-txn bench``: run the workloads against hms-txn and the Java metastore, side by side.

Measurement model
-----------------
* Every server is a separate process (ours: ``hms-txn serve``; Java: Hive Metastore 2.3 on
  embedded Derby). Clients are separate *processes* (multiprocessing, fork), each with one
  connection and the same generated Thrift client (TBinaryProtocolAccelerated over
  TBufferedTransport) for both servers.
* A cell = (workload, server, number of clients). All clients connect and do their own
  setup, then start together: a warm-up period, then ``rounds`` measuring rounds of equal
  length. An operation belongs to the round in which it started.
* Latency: per operation (an op may be several calls, see ``calls_per_op``), pooled over
  the rounds; p50/p90/p99.
* Throughput of a round: the sum over clients of (ops completed / time spent inside timed
  ops). For closed-loop clients without untimed work this is the wall-clock rate; for
  add_partitions it leaves out the untimed create_table between ops. The reported figure is
  the median over rounds.
* Server CPU (percent of one core) and machine CPU (percent of all cores) during the
  measured window tell what saturates.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import queue
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from array import array
from typing import Any

from thrift.transport.TTransport import TTransportException

from hms_txn.common.config import ConfigError, parse_overrides
from hms_bench.servers import (BenchPostgres, JavaServer, OurServer, ServerGroup, connect,
                               cpu_seconds, rss_bytes)
from hms_bench.prerequisites import missing_packages
from hms_bench.scale import scale_curve
from hms_bench.results import (ISSUE42_TARGETS, chart, percentile, evaluate_targets,
                               format_table, format_targets, issue31_targets, ratios)
from hms_bench.workload_set import ALL, SCALE, WORKLOADS
from hms_bench.workloads import Target, describe_error

# ------------------------------------------------------------------ schedules


class Schedule:
    def __init__(self, warmup: float, rounds: int, round_s: float):
        self.warmup, self.rounds, self.round_s = warmup, rounds, round_s

    def scaled(self, k: float) -> "Schedule":
        return Schedule(self.warmup * k, self.rounds, self.round_s * k)


FULL = Schedule(warmup=3.0, rounds=5, round_s=3.0)
FIRST_WARMUP = 10.0
OP_TIMEOUT_MS = 600_000   # a client gives up on a call after this (a wedged server)
QUICK = Schedule(warmup=0.3, rounds=2, round_s=0.6)


# ------------------------------------------------------------------ machine facts

def code_version() -> dict[str, Any]:
    """The hms-txn code that ran: its version, and the git commit when run from a checkout
    (``dirty`` when files differ from it), so a results file names what it measured."""
    from hms_txn import __version__
    info: dict[str, Any] = {"version": __version__}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=30)
        if head.returncode == 0:
            info["git_commit"] = head.stdout.strip()
            status = subprocess.run(["git", "-C", root, "status", "--porcelain",
                                     "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=30)
            info["dirty"] = bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {"nproc": os.cpu_count(), "python": platform.python_version(),
                            "platform": platform.platform()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["mem_total_gib"] = round(int(line.split()[1]) / 1024 ** 2, 1)
    except OSError:
        pass
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        info["java"] = (out.stderr or out.stdout).splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    try:
        import sqlite3
        info["sqlite"] = sqlite3.sqlite_version
    except ImportError:
        pass
    return info


def _loadavg() -> float | None:
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    total = sum(fields[:8])
    return total - idle, total


# ------------------------------------------------------------------ client processes

def _worker(port: int, wl_name: str, target: Target, worker: int, start_at, ready_q, result_q,
            sched: Schedule, quick: bool) -> None:
    wl = WORKLOADS[wl_name]
    try:
        client = connect(port, timeout_ms=OP_TIMEOUT_MS)
        state = wl.worker_setup(client, target, worker)
    except Exception as err:  # noqa: BLE001 - reported to the parent
        ready_q.put((worker, describe_error(err) + "\n" + traceback.format_exc()))
        return
    ready_q.put((worker, None))
    # The client's own garbage collector is not what we measure. Answers of generated Thrift
    # structs hold no reference cycles, so reference counting frees each one; the cyclic
    # collector would otherwise run dozens of times while one 1,000-partition answer is
    # decoded (~20,000 objects) and add 3-4 ms of client time to every such call, whichever
    # server answered it. A worker lives for one cell, so nothing builds up.
    gc.disable()
    while start_at.value == 0.0:
        time.sleep(0.002)
    start = start_at.value
    warm_end = start + sched.warmup
    end = warm_end + sched.rounds * sched.round_s
    lat = [array("d") for _ in range(sched.rounds)]
    busy = [0.0] * sched.rounds
    errors, first_error, i = 0, None, 0
    now = time.perf_counter()
    measured = 0
    # Slow operations (add_partitions of 1,000 on Java) can outlast a round: a client keeps
    # going past the end until it has ``min_ops`` measured ops, counted in the last round.
    while now < end or (measured < wl.min_ops and now < end + 300):
        try:
            if wl.has_prepare:
                wl.prepare(client, state, i)
            t0 = time.perf_counter()
            wl.run(client, state, i)
            t1 = time.perf_counter()
        except Exception as err:  # noqa: BLE001 - counted and reported
            errors += 1
            if first_error is None:
                first_error = describe_error(err)
            if isinstance(err, (TTransportException, OSError)):
                try:
                    client.close()
                except Exception:  # noqa: BLE001
                    pass
                try:
                    client = connect(port, timeout_ms=OP_TIMEOUT_MS)
                except Exception:  # noqa: BLE001
                    break
            if errors > 1000:
                break
            i += 1
            now = time.perf_counter()
            continue
        if t0 >= warm_end:
            r = min(int((t0 - warm_end) // sched.round_s), sched.rounds - 1)
            lat[r].append(t1 - t0)
            busy[r] += t1 - t0
            measured += 1
        i += 1
        now = t1
    try:
        client.close()
    except Exception:  # noqa: BLE001
        pass
    result_q.put({"worker": worker, "lat": [a.tobytes() for a in lat], "busy": busy,
                  "errors": errors, "first_error": first_error})


def run_cell(server, target: Target, wl_name: str, nclients: int, sched: Schedule,
             quick: bool, log) -> dict[str, Any]:
    wl = WORKLOADS[wl_name]
    ctx = mp.get_context("fork")
    start_at = ctx.Value("d", 0.0)
    ready_q, result_q = ctx.Queue(), ctx.Queue()
    # Several server processes (ServerGroup): client w talks to server w mod n.
    ports = getattr(server, "ports", [server.port])
    pids = getattr(server, "pids", [server.pid])
    procs = [ctx.Process(target=_worker, args=(ports[w % len(ports)], wl_name, target, w, start_at,
                                               ready_q, result_q, sched, quick), daemon=True)
             for w in range(nclients)]
    for p in procs:
        p.start()
    cell: dict[str, Any] = {"workload": wl_name, "server": target.name, "clients": nclients,
                            "calls_per_op": (3 if (target.java and wl_name == "writer")
                                             else wl.calls_per_op)}
    try:
        setup_errors = []
        for _ in procs:
            _w, err = ready_q.get(timeout=600)
            if err:
                setup_errors.append(err)
        if setup_errors:
            cell["error"] = "client setup failed: " + setup_errors[0]
            start_at.value = -1.0e18  # let any waiting workers fall through
            return cell
        start = time.perf_counter() + 0.05
        start_at.value = start
        warm_end = start + sched.warmup
        end = warm_end + sched.rounds * sched.round_s
        time.sleep(max(0.0, warm_end - time.perf_counter()))
        cpu0, mach0, w0 = _cpu_seconds(pids), _machine_busy(), time.perf_counter()
        time.sleep(max(0.0, end - time.perf_counter()))
        cpu1, mach1, w1 = _cpu_seconds(pids), _machine_busy(), time.perf_counter()
        results = []
        for _ in procs:
            try:
                results.append(result_q.get(timeout=max(60.0, end - time.perf_counter()) + 1000))
            except queue.Empty:
                break
        if len(results) < len(procs):
            cell["error"] = (f"{len(procs) - len(results)} of {len(procs)} clients did not finish "
                             f"(server wedged?)")
            return cell
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    lat_all: list[float] = []
    round_rates = []
    for r in range(sched.rounds):
        rate = 0.0
        for res in results:
            a = array("d")
            a.frombytes(res["lat"][r])
            lat_all.extend(a)
            if res["busy"][r] > 0:
                rate += len(a) / res["busy"][r]
        round_rates.append(rate)
    lat_all.sort()
    errors = sum(r["errors"] for r in results)
    first = next((r["first_error"] for r in results if r["first_error"]), None)
    rates = sorted(x for x in round_rates if x > 0)
    ops_s = rates[len(rates) // 2] if rates else 0.0
    cell.update({
        "ops": len(lat_all), "errors": errors, "first_error": first,
        "ops_per_s": ops_s, "ops_per_s_rounds": round_rates,
        "calls_per_s": ops_s * cell["calls_per_op"],
        "p50_ms": percentile(lat_all, 0.50) * 1e3, "p90_ms": percentile(lat_all, 0.90) * 1e3,
        "p99_ms": percentile(lat_all, 0.99) * 1e3,
        "mean_ms": (sum(lat_all) / len(lat_all) * 1e3) if lat_all else float("nan"),
        "max_ms": (lat_all[-1] * 1e3) if lat_all else float("nan"),
        "server_cpu_pct": (100.0 * (cpu1 - cpu0) / (w1 - w0)) if cpu0 is not None and cpu1 is not None else None,
        "machine_cpu_pct": 100.0 * (mach1[0] - mach0[0]) / max(1e-9, mach1[1] - mach0[1]),
        "server_rss_mb": max((rss_bytes(pid) or 0) for pid in pids) / 2 ** 20,
        "loadavg_1m": _loadavg(),
    })
    if not lat_all:
        cell["error"] = (f"every operation failed: {first}" if errors
                         else "no operation completed in the measuring window")
    log(f"  {wl_name:<20} {target.name:<22} {nclients:>2} clients: {ops_s:10.1f} ops/s  "
        f"p50 {cell['p50_ms']:8.3f} ms  p99 {cell['p99_ms']:8.3f} ms  "
        f"srv cpu {cell['server_cpu_pct'] or 0:4.0f}%  mach {cell['machine_cpu_pct']:3.0f}%  "
        f"load {cell['loadavg_1m'] or 0:4.1f}  errors {errors}"
        + (f"  ({first})" if first else ""))
    return cell


def _cpu_seconds(pids: list[int]) -> float | None:
    """CPU seconds used so far by the server processes ``pids`` together."""
    used = [cpu_seconds(pid) for pid in pids]
    return None if any(u is None for u in used) else sum(used)


# ------------------------------------------------------------------ orchestration


def run(args: argparse.Namespace) -> int:
    quick = args.quick
    sched = QUICK if quick else FULL
    if args.rounds:
        sched = Schedule(sched.warmup, args.rounds, sched.round_s)
    if args.round_seconds:
        sched = Schedule(sched.warmup, sched.rounds, args.round_seconds)
    wanted = [w.strip() for w in (args.workloads or ",".join(ALL)).split(",") if w.strip()]
    unknown = [w for w in wanted if w not in ALL]
    if unknown:
        print(f"hms-txn bench: unknown workload(s) {', '.join(unknown)}; known: {', '.join(ALL)}",
              file=sys.stderr)
        return 2
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if any(b not in ("sqlite", "postgres") for b in backends):
        print("hms-txn bench: --backends takes sqlite and/or postgres", file=sys.stderr)
        return 2
    try:
        extra_conf = parse_overrides(getattr(args, "hiveconf", None))
    except ConfigError as err:
        print(f"hms-txn bench: {err}", file=sys.stderr)
        return 2
    missing = missing_packages(java=not args.no_java, java_on_postgres=args.java_db == "postgres",
                               postgres="postgres" in backends or args.java_db == "postgres")
    if missing:
        print(f"hms-txn bench: {'; '.join(missing)}", file=sys.stderr)
        return 2
    # Stop cleanly (servers, PostgreSQL, temp dirs) on SIGTERM, and on SIGINT even when
    # started in the background (where the shell makes SIGINT ignored).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="hms-bench-")
    logf = open(os.path.join(out, "bench.log"), "a")

    def log(msg: str) -> None:
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    clients_override = ([int(x) for x in args.clients.split(",")] if args.clients else None)
    pg_servers = [int(x) for x in (args.pg_servers or "1").split(",")]
    results: dict[str, Any] = {
        "command": "hms-txn " + " ".join(sys.argv[1:]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine_info(),
        "code": code_version(),
        "server_conf": extra_conf,
        "schedule": {"warmup_s": sched.warmup, "rounds": sched.rounds, "round_s": sched.round_s},
        "workloads": {w: {"description": WORKLOADS[w].description,
                          "calls_per_op": WORKLOADS[w].calls_per_op,
                          "java_note": WORKLOADS[w].java_calls_note}
                      for w in wanted if w in WORKLOADS},
        "cells": [], "scale": [],
    }
    started: list[Any] = []
    pg = None
    max_rss = 0.0
    try:
        if "postgres" in backends:
            pg = BenchPostgres().start()
            results["postgres"] = pg.settings()
            log(f"postgres: {results['postgres']}")
        # servers: (server object factory, Target)
        targets: list[tuple[Target, Any]] = []

        def our_conf(backend: str, cache: bool) -> dict[str, str]:
            conf = dict(extra_conf)
            if any(w.startswith("rest_") for w in wanted):     # the Iceberg REST catalog
                conf.update({"metastore.catalog.servlet.port": "0",
                             "metastore.catalog.servlet.auth": "none"})
            conf["hms_txn.cache.enabled"] = "true" if cache else "false"
            if backend == "postgres":
                conf["javax.jdo.option.ConnectionURL"] = pg.create_database()
                conf["javax.jdo.option.ConnectionUserName"] = pg.user
            return conf

        def start_ours(name: str, backend: str, cache: bool, processes: int = 1):
            if processes > 1:
                srv = ServerGroup(name, os.path.join(work, name), our_conf(backend, cache),
                                  processes)
            else:
                srv = OurServer(name, os.path.join(work, name), our_conf(backend, cache))
            started.append(srv)
            log(f"started {name} (pids {getattr(srv, 'pids', [srv.pid])}, "
                f"ports {getattr(srv, 'ports', [srv.port])})")
            return srv

        java_on_pg = args.java_db == "postgres"
        if java_on_pg and pg is None:
            pg = BenchPostgres().start()
            results["postgres"] = pg.settings()
        java_name = "java-postgres" if java_on_pg else "java-derby"
        results["java_db"] = args.java_db

        def start_java(name: str):
            t0 = time.perf_counter()
            srv = JavaServer(name, os.path.join(work, name), postgres=pg if java_on_pg else None)
            started.append(srv)
            log(f"started {name} (pid {srv.pid}, port {srv.port}) in {time.perf_counter() - t0:.0f} s")
            return srv

        cell_workloads = [w for w in wanted if w in WORKLOADS]
        if cell_workloads:
            if not args.no_java:
                targets.append((Target(java_name, True, args.java_db), start_java(java_name)))
            for b in backends:
                # PostgreSQL: one target per number of server processes on one database.
                for k in (pg_servers if b == "postgres" else [1]):
                    name = f"hms-{b}" if k == 1 else f"hms-{b}-x{k}"
                    srv = start_ours(name, b, True, k)
                    targets.append((Target(name, False, b, True, rest=getattr(srv, "rest", None)),
                                    srv))
                    if "get_table" in cell_workloads:
                        targets.append((Target(f"{name}-nocache", False, b, False),
                                        start_ours(f"{name}-nocache", b, False, k)))
        for wl_name in cell_workloads:
            wl = WORKLOADS[wl_name]
            log(f"== {wl_name}: {wl.description}")
            counts = clients_override or (wl.quick_clients if quick else wl.clients)
            for target, srv in targets:
                if target.java and not wl.java:
                    continue
                if not target.cache and wl_name != "get_table":
                    continue
                try:
                    c = connect(srv.port)
                    wl.setup(c, target)
                    c.close()
                except Exception as err:  # noqa: BLE001
                    msg = describe_error(err)
                    log(f"  {wl_name:<20} {target.name:<22} setup failed: {msg}")
                    for n in counts:
                        results["cells"].append({"workload": wl_name, "server": target.name,
                                                 "clients": n, "error": f"setup failed: {msg}"})
                    continue
                for k, n in enumerate(counts):
                    cs = sched.scaled(wl.duration_scale)
                    if k == 0 and not quick:
                        # the first cell of a server on a workload also warms the JIT (Java)
                        # and the server's caches and statement cache (ours)
                        cs = Schedule(max(cs.warmup, FIRST_WARMUP * wl.duration_scale), cs.rounds, cs.round_s)
                    cell = run_cell(srv, target, wl_name, n, cs, quick, log)
                    results["cells"].append(cell)
                    if not target.java and cell.get("server_rss_mb"):
                        max_rss = max(max_rss, cell["server_rss_mb"])
        if SCALE in wanted:
            checkpoints = [int(x) for x in (args.scale_points or
                                            ("100,1000" if quick else "100,1000,10000,100000")).split(",")]
            java_cap = args.java_history_cap if args.java_history_cap is not None else (100 if quick else 1000)
            pg_cap = args.postgres_history_cap if args.postgres_history_cap is not None else (1000 if quick else 10000)
            results["scale_settings"] = {"checkpoints": checkpoints, "java_history_cap": java_cap,
                                         "postgres_history_cap": pg_cap,
                                         "samples": 50 if quick else 300}
            log(f"== scale: get_open_txns / get_valid_write_ids vs committed history {checkpoints}")
            scale_targets = [(Target(f"hms-{b}", False, b), b) for b in backends]
            if not args.no_java:
                scale_targets.insert(0, (Target(java_name, True, args.java_db), args.java_db))
            for target, b in scale_targets:
                name = f"scale-{target.name}"
                try:
                    srv = start_java(name) if target.java else start_ours(name, b, True)
                except Exception as err:  # noqa: BLE001
                    log(f"  scale {target.name}: server failed to start: {err}")
                    continue
                cap = java_cap if target.java else (pg_cap if b == "postgres" else None)
                points = [p for p in checkpoints if cap is None or p <= cap]
                try:
                    sc = scale_curve(srv, target, points, 50 if quick else 300,
                                     2 if quick else 4, log)
                    results["scale"].append(sc)
                    if not target.java:
                        max_rss = max([max_rss] + [p["rss_mb"] for p in sc["points"]])
                except Exception as err:  # noqa: BLE001
                    log(f"  scale {target.name} failed: {describe_error(err)}")
                    results["scale"].append({"server": target.name, "error": describe_error(err),
                                             "points": []})
                finally:
                    srv.stop()
                    started.remove(srv)
    finally:
        for srv in started:
            try:
                srv.stop()
            except Exception:  # noqa: BLE001
                pass
        if pg is not None:
            pg.stop()
        if sys.exc_info()[0] is not None and not getattr(args, "keep_workdir", False):
            shutil.rmtree(work, ignore_errors=True)  # failed run: clean up now
    ratios(results["cells"])
    results["targets"] = evaluate_targets(results["cells"], results["scale"],
                                          max_rss if max_rss else None)
    results["issue31_targets"] = issue31_targets(results["cells"])
    results["issue42_targets"] = issue31_targets(results["cells"], ISSUE42_TARGETS)
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    table = format_table(results["cells"])
    log("\n" + table)
    if results["targets"]:
        log("\nTargets (issue 8):\n" + format_targets(results["targets"]))
    if results["issue31_targets"]:
        log("\nTargets (issue 31, PostgreSQL):\n" + format_targets(results["issue31_targets"]))
    if results["issue42_targets"]:
        log("\nTargets (issue 42, PostgreSQL):\n" + format_targets(results["issue42_targets"]))
    try:
        chart(results, os.path.join(out, "bench.png"))
    except Exception as err:  # noqa: BLE001
        log(f"chart failed: {describe_error(err)}")
    log(f"\nwrote {os.path.join(out, 'results.json')} and {os.path.join(out, 'bench.png')}")
    if getattr(args, "keep_workdir", False):
        log(f"kept server directories and logs under {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)  # slow after add_partitions: many directories
    logf.close()
    return 0
