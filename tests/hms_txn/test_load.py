"""Load: 256 concurrent connections for 60 seconds, no errors, latency reported."""

from __future__ import annotations

import random
import statistics
import threading
import time

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.support.servers import ServerProcess, client_for, connect

CONNECTIONS = 256
DURATION_S = 60


def test_256_connections_for_60_seconds(tmp_path, capsys):
    server = ServerProcess(str(tmp_path / "srv"), {"hive.metastore.warehouse.dir": str(tmp_path / "wh")})
    try:
        with client_for(server.port) as c:
            c.create_table(make_table("default", "hot", keys=[("ds", "string")],
                                      params={"transactional": "true"}))
            c.add_partitions([t.Partition(values=[str(i)], dbName="default", tableName="hot")
                              for i in range(20)])
        latencies: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()
        start_line = threading.Barrier(CONNECTIONS + 1)
        end_at: list[float] = []

        def client_loop(seed: int) -> None:
            rng = random.Random(seed)
            mine: list[float] = []
            try:
                client = connect(server.port, timeout_ms=120000)
            except Exception as err:
                with lock:
                    errors.append(f"connect: {err}")
                start_line.wait()
                return
            start_line.wait()
            try:
                while time.monotonic() < end_at[0]:
                    kind = rng.random()
                    began = time.perf_counter()
                    try:
                        if kind < 0.5:
                            client.get_table_acid_aware("default", "hot")
                        elif kind < 0.7:
                            client.get_partitions_by_names("default", "hot", [f"ds={rng.randrange(20)}"])
                        elif kind < 0.8:
                            client.get_all_databases()
                        else:
                            txn = client.open_txns(t.OpenTxnRequest(1, "load", "test")).txn_ids[0]
                            client.commit_txn(t.CommitTxnRequest(txnid=txn))
                    except Exception as err:
                        with lock:
                            errors.append(f"{type(err).__name__}: {err}")
                        continue
                    mine.append(time.perf_counter() - began)
            finally:
                client.close()
                with lock:
                    latencies.extend(mine)

        threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(CONNECTIONS)]
        for th in threads:
            th.start()
        end_at.append(time.monotonic() + DURATION_S)
        start_line.wait()
        for th in threads:
            th.join(DURATION_S + 120)
        assert not any(th.is_alive() for th in threads)
        assert errors == [], errors[:5]
        assert len(latencies) > CONNECTIONS
        ordered = sorted(latencies)
        p50 = statistics.median(ordered) * 1000
        p99 = ordered[int(len(ordered) * 0.99) - 1] * 1000
        with capsys.disabled():
            print(f"\nload: {CONNECTIONS} connections x {DURATION_S}s: {len(ordered)} calls, "
                  f"{len(ordered) / DURATION_S:.0f} calls/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms, 0 errors")
    finally:
        server.stop()
