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
from hms_bench.servers import (BenchPostgres, JavaServer, OurServer, connect, cpu_seconds, rss_bytes)
from hms_bench.workloads import ALL, SCALE, WORKLOADS, Target, describe_error

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


def _percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = (len(sorted_vals) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def run_cell(server, target: Target, wl_name: str, nclients: int, sched: Schedule,
             quick: bool, log) -> dict[str, Any]:
    wl = WORKLOADS[wl_name]
    ctx = mp.get_context("fork")
    start_at = ctx.Value("d", 0.0)
    ready_q, result_q = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(server.port, wl_name, target, w, start_at, ready_q,
                                               result_q, sched, quick), daemon=True)
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
        cpu0, mach0, w0 = cpu_seconds(server.pid), _machine_busy(), time.perf_counter()
        time.sleep(max(0.0, end - time.perf_counter()))
        cpu1, mach1, w1 = cpu_seconds(server.pid), _machine_busy(), time.perf_counter()
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
        "p50_ms": _percentile(lat_all, 0.50) * 1e3, "p90_ms": _percentile(lat_all, 0.90) * 1e3,
        "p99_ms": _percentile(lat_all, 0.99) * 1e3,
        "mean_ms": (sum(lat_all) / len(lat_all) * 1e3) if lat_all else float("nan"),
        "max_ms": (lat_all[-1] * 1e3) if lat_all else float("nan"),
        "server_cpu_pct": (100.0 * (cpu1 - cpu0) / (w1 - w0)) if cpu0 is not None and cpu1 is not None else None,
        "machine_cpu_pct": 100.0 * (mach1[0] - mach0[0]) / max(1e-9, mach1[1] - mach0[1]),
        "server_rss_mb": (rss_bytes(server.pid) or 0) / 2 ** 20,
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


# ------------------------------------------------------------------ scale curves

def _fill_worker(port: int, count: int, java: bool, tables: list[str], db: str, batch: int,
                 out_q) -> None:
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
    from hms_bench.workloads import HOST, USER
    client = connect(port)
    done = 0
    try:
        while done < count:
            n = min(batch, count - done)
            txns = list(client.open_txns(t.OpenTxnRequest(num_txns=n, user=USER, hostname=HOST)).txn_ids)
            if not java:  # every txn writes one of the tables (one batched call per table)
                for k, table in enumerate(tables):
                    mine = [x for x in txns if x % len(tables) == k]
                    if mine:
                        client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                            dbName=db, tableName=table, txnIds=mine))
            for txn in txns:
                client.commit_txn(t.CommitTxnRequest(txnid=txn))
            done += n
        out_q.put((done, None))
    except Exception as err:  # noqa: BLE001
        out_q.put((done, describe_error(err)))
    finally:
        client.close()


def _grow_history(port: int, count: int, java: bool, db: str, tables: list[str],
                  nproc: int) -> None:
    if count <= 0:
        return
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    share = [count // nproc + (1 if k < count % nproc else 0) for k in range(nproc)]
    procs = [ctx.Process(target=_fill_worker, args=(port, c, java, tables, db, 100, q), daemon=True)
             for c in share if c > 0]
    for p in procs:
        p.start()
    errs = [q.get(timeout=7200)[1] for _ in procs]
    for p in procs:
        p.join()
    bad = [e for e in errs if e]
    if bad:
        raise RuntimeError(f"growing history failed: {bad[0]}")


def _time_calls(fn, n: int) -> dict[str, float]:
    fn()  # warm
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - t0)
    lat.sort()
    return {"p50_ms": _percentile(lat, 0.5) * 1e3, "p99_ms": _percentile(lat, 0.99) * 1e3}


def scale_curve(server, target: Target, checkpoints: list[int], samples: int, nfill: int,
                log) -> dict[str, Any]:
    """Latency of get_open_txns / get_valid_write_ids as committed history grows."""
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
    from hms_bench.workloads import (HOST, USER, ensure_database, ensure_table, make_table, valid_txn_list)
    db = "bench_scale"
    tables = [f"t{i}" for i in range(10)]
    full = [f"{db}.{x}" for x in tables]
    client = connect(server.port)
    ensure_database(client, db)
    for x in tables:
        ensure_table(client, make_table(db, x, transactional=True))
    committed = 0
    points = []
    started = time.perf_counter()
    for target_n in checkpoints:
        t0 = time.perf_counter()
        _grow_history(server.port, target_n - committed, target.java, db, tables, nfill)
        grow_s = time.perf_counter() - t0
        grown = max(0, target_n - committed)
        committed = max(committed, target_n)
        point: dict[str, Any] = {"committed": committed,
                                 "fill_txn_per_s": grown / grow_s if grow_s > 0 and grown else None}

        def measure(tag: str) -> None:
            point[f"get_open_txns{tag}"] = _time_calls(client.get_open_txns, samples)
            if not target.java:
                snap = valid_txn_list(client)
                req = t.GetValidWriteIdsRequest(fullTableNames=full, validTxnList=snap)
                point[f"get_valid_write_ids{tag}"] = _time_calls(
                    lambda: client.get_valid_write_ids(req), samples)

        measure("")
        # 1,000 open transactions (each with a write id on t0 for ours), then commit them.
        opened = list(client.open_txns(t.OpenTxnRequest(num_txns=1000, user=USER,
                                                        hostname=HOST)).txn_ids)
        if not target.java:
            client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                dbName=db, tableName=tables[0], txnIds=opened))
        measure("_1000_open")
        for txn in opened:
            client.commit_txn(t.CommitTxnRequest(txnid=txn))
        committed += len(opened)
        point["rss_mb"] = (rss_bytes(server.pid) or 0) / 2 ** 20
        points.append(point)
        msg = (f"  scale {target.name:<16} history {point['committed']:>7}: get_open_txns p50 "
               f"{point['get_open_txns']['p50_ms']:.3f} ms ({point['get_open_txns_1000_open']['p50_ms']:.3f} "
               f"with 1e3 open)")
        if not target.java:
            msg += (f"; get_valid_write_ids(10) p50 {point['get_valid_write_ids']['p50_ms']:.3f} ms "
                    f"({point['get_valid_write_ids_1000_open']['p50_ms']:.3f})")
        fill = point["fill_txn_per_s"]
        log(msg + f"; rss {point['rss_mb']:.0f} MB" + (f"; filled at {fill:.0f} txn/s" if fill else ""))
    client.close()
    return {"server": target.name, "points": points,
            "seconds": time.perf_counter() - started}


# ------------------------------------------------------------------ report


def ratios(cells: list[dict[str, Any]]) -> None:
    """Annotate each of our cells with ratios against the Java cell of the same workload/clients."""
    java = {(c["workload"], c["clients"]): c for c in cells
            if c["server"].startswith("java") and not c.get("error")}
    for c in cells:
        ref = java.get((c["workload"], c["clients"]))
        if c["server"].startswith("java") or not ref or c.get("error"):
            continue
        c["vs_java"] = {
            "throughput": c["ops_per_s"] / ref["ops_per_s"] if ref["ops_per_s"] else None,
            "p50": ref["p50_ms"] / c["p50_ms"] if c["p50_ms"] else None,
            "p99": ref["p99_ms"] / c["p99_ms"] if c["p99_ms"] else None,
        }


def _cell(cells, workload, server, clients):
    for c in cells:
        if c["workload"] == workload and c["server"] == server and c["clients"] == clients \
                and not c.get("error"):
            return c
    return None


def evaluate_targets(cells: list[dict[str, Any]], scale: list[dict[str, Any]],
                     max_rss_mb: float | None) -> list[dict[str, Any]]:
    """Issue 8's targets, on the embedded default (SQLite) and on PostgreSQL when measured."""
    out = []
    servers = sorted({c["server"] for c in cells if c["server"].startswith("hms-")
                      and not c["server"].endswith("-nocache")})

    def add(name, server, measured, goal, detail):
        out.append({"target": name, "server": server, "measured": measured, "goal": goal,
                    "met": (measured is not None and measured >= goal), "detail": detail})

    for s in servers:
        for wl, goal in (("open_commit", 20.0), ("writer", 10.0)):
            for n in (1, 16):
                c = _cell(cells, wl, s, n)
                if c and "vs_java" in c:
                    add(f"{wl} throughput x Java, {n} client(s)", s, c["vs_java"]["throughput"], goal,
                        f"{c['ops_per_s']:.0f} vs {_cell(cells, wl, 'java-derby', n)['ops_per_s']:.0f} ops/s")
        c = _cell(cells, "get_table", s, 1)
        if c and "vs_java" in c:
            add("get_table cached p50 x Java, 1 client", s, c["vs_java"]["p50"], 5.0,
                f"{c['p50_ms']:.3f} vs {_cell(cells, 'get_table', 'java-derby', 1)['p50_ms']:.3f} ms")
        for n in (8, 16):
            c = _cell(cells, "get_table", s, n)
            if c and "vs_java" in c:
                add(f"get_table cached throughput x Java, {n} clients", s, c["vs_java"]["throughput"],
                    5.0, f"{c['ops_per_s']:.0f} vs {_cell(cells, 'get_table', 'java-derby', n)['ops_per_s']:.0f} ops/s")
        c, nc = _cell(cells, "get_table", s, 1), _cell(cells, "get_table", s + "-nocache", 1)
        if c and nc:
            add("get_table cached p50 x our uncached (issue 4)", s, nc["p50_ms"] / c["p50_ms"], 3.0,
                f"{c['p50_ms']:.3f} vs {nc['p50_ms']:.3f} ms")
        for wl in ("partitions_by_names", "add_partitions"):
            c = _cell(cells, wl, s, 1)
            if c and "vs_java" in c:
                add(f"{wl}(1000) p50 x Java, 1 client", s, c["vs_java"]["p50"], 3.0,
                    f"{c['p50_ms']:.1f} vs {_cell(cells, wl, 'java-derby', 1)['p50_ms']:.1f} ms")
            many = max((c["clients"] for c in cells if c["workload"] == wl and c["server"] == s
                        and not c.get("error")), default=1)
            c = _cell(cells, wl, s, many) if many > 1 else None
            if c and "vs_java" in c:
                add(f"{wl}(1000) throughput x Java, {many} clients", s, c["vs_java"]["throughput"], 3.0,
                    f"{c['ops_per_s']:.2f} vs {_cell(cells, wl, 'java-derby', many)['ops_per_s']:.2f} ops/s")
    # The memory target is about transaction history: RSS of our scale-curve servers.
    for sc in scale:
        if sc["server"].startswith("hms-") and sc.get("points"):
            top = max(p["rss_mb"] for p in sc["points"])
            txns = max(p["committed"] for p in sc["points"])
            short = "" if txns >= 1_000_000 else " (the target says 1e6; not measured that far)"
            out.append({"target": "server RSS < 300 MB through txn history", "server": sc["server"],
                        "measured": top, "goal": 300.0, "met": top < 300.0 and not short,
                        "detail": f"peak RSS along the scale curve up to {txns} committed txns"
                                  + short})
    if max_rss_mb is not None:
        out.append({"target": "server RSS < 300 MB, whole run (info)", "server": "hms-*",
                    "measured": max_rss_mb, "goal": 300.0, "met": max_rss_mb < 300.0,
                    "detail": "peak RSS of any of our servers in any cell, catalog workloads "
                              "included (concurrent add_partitions of 1,000 peak highest)"})
    return out


def format_table(cells: list[dict[str, Any]]) -> str:
    head = (f"{'workload':<20} {'server':<20} {'cl':>3} {'ops/s':>10} {'calls/s':>10} "
            f"{'p50 ms':>9} {'p99 ms':>9} {'srv cpu':>7} {'x java tput':>11} {'x java p50':>10}")
    lines = [head, "-" * len(head)]
    for c in cells:
        if c.get("error"):
            lines.append(f"{c['workload']:<20} {c['server']:<20} {c['clients']:>3}  ERROR: "
                         f"{c['error'].splitlines()[0][:120]}")
            continue
        vj = c.get("vs_java") or {}
        tp = f"{vj['throughput']:.1f}x" if vj.get("throughput") else "-"
        p50 = f"{vj['p50']:.1f}x" if vj.get("p50") else "-"
        cpu = f"{c['server_cpu_pct']:.0f}%" if c.get("server_cpu_pct") is not None else "-"
        lines.append(f"{c['workload']:<20} {c['server']:<20} {c['clients']:>3} {c['ops_per_s']:>10.1f} "
                     f"{c['calls_per_s']:>10.1f} {c['p50_ms']:>9.3f} {c['p99_ms']:>9.3f} {cpu:>7} "
                     f"{tp:>11} {p50:>10}")
    return "\n".join(lines)


def format_targets(targets: list[dict[str, Any]]) -> str:
    lines = []
    for tg in targets:
        m = tg["measured"]
        shown = "n/a" if m is None else (f"{m:.0f} MB" if "RSS" in tg["target"] else f"{m:.1f}x")
        goal = f"< {tg['goal']:.0f} MB" if "RSS" in tg["target"] else f">= {tg['goal']:.0f}x"
        lines.append(f"{'MET ' if tg['met'] else 'MISS'} {tg['target']:<48} {tg['server']:<16} "
                     f"{shown:>9} (goal {goal}; {tg['detail']})")
    return "\n".join(lines)


def chart(results: dict[str, Any], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [c for c in results["cells"] if not c.get("error")]
    workloads = list(dict.fromkeys(c["workload"] for c in cells))
    servers = list(dict.fromkeys(c["server"] for c in cells))
    scale = results.get("scale") or []
    nrows = 3 if scale else 2
    fig, axes = plt.subplots(nrows, 1, figsize=(14, 5 * nrows))
    width = 0.8 / max(1, len(servers))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    ax = axes[0]
    for k, s in enumerate(servers):
        xs, p50, p99 = [], [], []
        for i, w in enumerate(workloads):
            c = _cell(cells, w, s, 1)
            if c:
                xs.append(i + k * width)
                p50.append(c["p50_ms"])
                p99.append(c["p99_ms"])
        ax.bar(xs, p50, width, label=f"{s} p50", color=colors[k % len(colors)])
        ax.scatter(xs, p99, marker="_", s=200, color="black", zorder=3,
                   label="p99" if k == 0 else None)
    if any(_cell(cells, w, s, 1) for w in workloads for s in servers):
        ax.set_yscale("log")    # (a log axis with no data at all cannot be drawn)
    else:
        ax.text(0.5, 0.5, "no 1-client cells in this run", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_ylabel("latency per op, ms (log)")
    ax.set_title("Latency, 1 client (bar = p50, tick = p99)")
    ax.set_xticks([i + width * (len(servers) - 1) / 2 for i in range(len(workloads))])
    ax.set_xticklabels(workloads, rotation=15)
    if servers:   # a scale-only run has no cells to label
        ax.legend(fontsize=8, ncol=3)

    ax = axes[1]
    clients = sorted({c["clients"] for c in cells})
    labels = [(w, n) for w in workloads for n in clients
              if any(c["workload"] == w and c["clients"] == n for c in cells)]
    for k, s in enumerate(servers):
        xs, ys = [], []
        for i, (w, n) in enumerate(labels):
            c = _cell(cells, w, s, n)
            if c:
                xs.append(i + k * width)
                ys.append(c["ops_per_s"])
        ax.bar(xs, ys, width, label=s, color=colors[k % len(colors)])
    ax.set_yscale("log")
    ax.set_ylabel("ops/s (log)")
    ax.set_title("Throughput by number of client processes")
    ax.set_xticks([i + width * (len(servers) - 1) / 2 for i in range(len(labels))])
    ax.set_xticklabels([f"{w}\n{n} cl" for w, n in labels], fontsize=7, rotation=30)
    if servers:
        ax.legend(fontsize=8)

    if scale:
        ax = axes[2]
        for k, sc in enumerate(scale):
            pts = sc["points"]
            xs = [p["committed"] for p in pts]
            if not pts:
                continue
            for j, (key, style) in enumerate((("get_open_txns", "-o"), ("get_open_txns_1000_open", "--o"),
                                              ("get_valid_write_ids", "-s"),
                                              ("get_valid_write_ids_1000_open", "--s"))):
                if key in pts[0]:
                    ax.plot(xs, [p[key]["p50_ms"] for p in pts], style, label=f"{sc['server']} {key}",
                            color=plt.cm.tab20((4 * k + j) % 20))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("committed transactions in history")
        ax.set_ylabel("p50 latency, ms (log)")
        ax.set_title("Scale curves (dashed: with 1,000 open transactions)")
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


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
            conf["hms_txn.cache.enabled"] = "true" if cache else "false"
            if backend == "postgres":
                conf["javax.jdo.option.ConnectionURL"] = pg.create_database()
                conf["javax.jdo.option.ConnectionUserName"] = pg.user
            return conf

        def start_ours(name: str, backend: str, cache: bool):
            srv = OurServer(name, os.path.join(work, name), our_conf(backend, cache))
            started.append(srv)
            log(f"started {name} (pid {srv.pid}, port {srv.port})")
            return srv

        def start_java(name: str):
            t0 = time.perf_counter()
            srv = JavaServer(name, os.path.join(work, name))
            started.append(srv)
            log(f"started {name} (pid {srv.pid}, port {srv.port}) in {time.perf_counter() - t0:.0f} s")
            return srv

        cell_workloads = [w for w in wanted if w in WORKLOADS]
        if cell_workloads:
            if not args.no_java:
                targets.append((Target("java-derby", True, "derby"), start_java("java-derby")))
            for b in backends:
                targets.append((Target(f"hms-{b}", False, b, True), start_ours(f"hms-{b}", b, True)))
                if "get_table" in cell_workloads:
                    targets.append((Target(f"hms-{b}-nocache", False, b, False),
                                    start_ours(f"hms-{b}-nocache", b, False)))
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
                scale_targets.insert(0, (Target("java-derby", True, "derby"), "derby"))
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
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    table = format_table(results["cells"])
    log("\n" + table)
    if results["targets"]:
        log("\nTargets (issue 8):\n" + format_targets(results["targets"]))
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
