"""Scale curves: how a call's latency grows with the history a metastore holds (tables,
partitions, finished transactions), measured at checkpoints while the history is grown."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

from hms_bench.results import percentile
from hms_bench.servers import connect, rss_bytes
from hms_bench.workloads import Target, describe_error


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
    return {"p50_ms": percentile(lat, 0.5) * 1e3, "p99_ms": percentile(lat, 0.99) * 1e3}


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


