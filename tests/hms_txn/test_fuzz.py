"""Hostile input: malformed, truncated and oversized Thrift messages.

The server must answer or drop each bad connection without dying, keep serving a
well-behaved client throughout, and leave a consistent database behind.
"""

from __future__ import annotations

import random
import socket
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sqlalchemy import text
from thrift.protocol import TBinaryProtocol
from thrift.transport import TTransport

from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table

RAW_MESSAGES = 9000
HYPOTHESIS_MESSAGES = 1200


def encoded_calls() -> list[bytes]:
    """Well-formed calls, the raw material for mutations."""
    out = []

    def capture(fn):
        buf = TTransport.TMemoryBuffer()
        client = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(buf))
        fn(client)
        out.append(buf.getvalue())

    capture(lambda c: c.send_get_all_databases())
    capture(lambda c: c.send_get_table("default", "t"))
    capture(lambda c: c.send_create_database(t.Database(name="fz", parameters={"a": "b"})))
    capture(lambda c: c.send_create_table(make_table("default", "fz", keys=[("ds", "string")])))
    capture(lambda c: c.send_add_partitions([t.Partition(values=["1"], dbName="default", tableName="fz")]))
    capture(lambda c: c.send_get_partitions_by_filter("default", "fz", "ds = '1'", -1))
    capture(lambda c: c.send_open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")))
    capture(lambda c: c.send_lock(t.LockRequest(component=[t.LockComponent(
        type=1, level=2, dbname="default", tablename="fz")], user="u", hostname="h")))
    capture(lambda c: c.send_get_valid_write_ids(t.GetValidWriteIdsRequest(["default.fz"], "1:1::")))
    capture(lambda c: c.send_get_next_notification(t.NotificationEventRequest(lastEvent=0)))
    return out


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    base = bytearray(rng.choice(seeds))
    kind = rng.randrange(7)
    if kind == 0:  # truncated
        return bytes(base[:rng.randrange(len(base))])
    if kind == 1:  # random byte flips
        for _ in range(rng.randint(1, 8)):
            base[rng.randrange(len(base))] = rng.randrange(256)
        return bytes(base)
    if kind == 2:  # a huge length where the method name length is
        return bytes(base[:4]) + struct.pack(">i", rng.choice([2**31 - 1, -5, 2**30])) + bytes(base[8:])
    if kind == 3:  # random garbage
        return rng.randbytes(rng.randint(1, 300))
    if kind == 4:  # a valid header followed by garbage
        return bytes(base[:rng.randint(8, 24)]) + rng.randbytes(rng.randint(0, 200))
    if kind == 5:  # a huge list/map count inside a struct
        pos = rng.randrange(8, len(base)) if len(base) > 8 else 0
        return bytes(base[:pos]) + bytes([15, 11]) + struct.pack(">i", 2**31 - 1) + bytes(base[pos:])
    return bytes(base) * rng.randint(2, 5)  # repeated calls glued (some valid, some cut)


def send(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except OSError:
            pass  # the server may drop us mid-way: that is an acceptable answer


def check_integrity(hms) -> None:
    store = hms.ms.store
    with store.read() as conn:
        if store.is_sqlite:
            assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"
            assert conn.execute(text("PRAGMA foreign_key_check")).fetchall() == []
        orphans = conn.execute(text(
            "SELECT count(*) FROM partitions p LEFT JOIN tbls t ON p.tbl_id = t.tbl_id "
            "WHERE t.tbl_id IS NULL")).scalar()
        assert orphans == 0


def test_raw_malformed_messages(hms, client):
    seeds = encoded_calls()
    rng = random.Random(20261122)
    payloads = [mutate(rng, seeds) for _ in range(RAW_MESSAGES)]
    errors: list[BaseException] = []

    def worker(chunk: list[bytes]) -> None:
        try:
            for i, payload in enumerate(chunk):
                send(hms.port, payload)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(payloads[i::4],)) for i in range(4)]
    for th in threads:
        th.start()
    while any(th.is_alive() for th in threads):
        # a well-behaved client keeps being served throughout
        assert "default" in client.get_all_databases()
        for th in threads:
            th.join(0.05)
    assert not errors
    assert "default" in client.get_all_databases()
    check_integrity(hms)


@settings(max_examples=HYPOTHESIS_MESSAGES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_hypothesis_messages(hms_sqlite_shared, data):
    hms, client = hms_sqlite_shared
    seeds = encoded_calls()
    seed = data.draw(st.sampled_from(seeds))
    cut = data.draw(st.integers(0, len(seed)))
    noise = data.draw(st.binary(max_size=64))
    payload = seed[:cut] + noise + seed[cut + len(noise):]
    send(hms.port, payload)
    assert "default" in client.get_all_databases()


@pytest.fixture(scope="module")
def hms_sqlite_shared(tmp_path_factory):
    from tests.support.servers import InProcessServer
    root = tmp_path_factory.mktemp("fuzz")
    server = InProcessServer(str(root / "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{root}/m.sqlite",
        "hive.metastore.warehouse.dir": str(root / "wh")})
    client = server.client()
    yield server, client
    client.close()
    check_integrity(server)
    server.stop()
