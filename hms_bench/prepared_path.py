"""What hms_txn.store.prepared saves: open_txns + commit_txn in-process on SQLite with its
direct driver path, against SQLAlchemy's public execution API.

    python -m hms_bench.prepared_path prepared      # the product as it is
    python -m hms_bench.prepared_path driver_sql    # SQL compiled once, conn.exec_driver_sql
    python -m hms_bench.prepared_path execute       # conn.execute(stmt) (compiled cache on)
    python -m hms_bench.prepared_path --statement   # one statement, every route

Each variant runs in its own process (it replaces ``Prepared.execute``); compare them on
the same machine at the same time. Prints the best of the rounds, wall and process CPU
time per open+commit pair (CPU includes the server's background threads).
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time

from hms_txn.store.prepared import Prepared

_direct_execute = Prepared.execute


def _use_conn_execute() -> None:
    def execute(self, conn, params=None):
        return conn.execute(self.stmt, params)
    Prepared.execute = execute
    Prepared.rows = lambda self, conn, params=None: conn.execute(self.stmt, params).all()


def _use_exec_driver_sql() -> None:
    """The statement compiled once with ``stmt.compile(dialect=...)`` and run with
    ``conn.exec_driver_sql`` and its parameters in ``compiled.positiontup`` order (defaults
    from ``compiled.params``), when the direct path would have taken it."""
    compiled_of: dict = {}

    def execute(self, conn, params=None):
        many = isinstance(params, (list, tuple))
        first = params[0] if many and params else params
        keys = tuple(first) if self.stmt.is_insert and first else None
        if not (conn.in_transaction() and (params or not many)
                and self.runs_on_driver(conn.dialect, keys)):
            return conn.execute(self.stmt, params)
        entry = compiled_of.get((id(self), keys))
        if entry is None:
            compiled = self.stmt.compile(dialect=conn.dialect, column_keys=list(keys or ()) or None)
            entry = compiled_of[(id(self), keys)] = (compiled.string, tuple(compiled.positiontup),
                                                     compiled.params)
        sql, order, defaults = entry

        def args(p):
            p = p or {}
            return tuple(p[n] if n in p else defaults[n] for n in order)
        return conn.exec_driver_sql(sql, [args(p) for p in params] if many else args(params))
    Prepared.execute = execute
    Prepared.rows = lambda self, conn, params=None: execute(self, conn, params).all()


def pairs(variant: str, count: int, rounds: int) -> tuple[float, float]:
    """(wall, CPU) microseconds per open_txns + commit_txn pair, best of ``rounds``."""
    from hms_txn.common.config import Config
    from hms_txn.server.metastore import Metastore
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
    {"prepared": lambda: None, "execute": _use_conn_execute,
     "driver_sql": _use_exec_driver_sql}[variant]()
    data = tempfile.mkdtemp(prefix="hms-prepared-")
    ms = Metastore(Config({"hive.metastore.warehouse.dir": data + "/wh"}), data_dir=data)
    ms.start()
    txn = ms.txn_service

    def pair():
        [txn_id] = txn.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids
        txn.commit_txn(t.CommitTxnRequest(txnid=txn_id))

    try:
        for _ in range(500):
            pair()
        gc.collect()
        best_wall = best_cpu = float("inf")
        for _ in range(rounds):
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(count):
                pair()
            best_wall = min(best_wall, (time.perf_counter() - w0) / count * 1e6)
            best_cpu = min(best_cpu, (time.process_time() - c0) / count * 1e6)
    finally:
        ms.close()
    return best_wall, best_cpu


def _routes(conn, stmt, params) -> dict:
    """Ways to run ``stmt`` with ``params(i)`` and take its rows (or its row count)."""
    compiled = stmt.compile(dialect=conn.dialect)
    sql, order = compiled.string, compiled.positiontup
    prepared = Prepared(stmt)
    driver = conn.connection.driver_connection
    take = (lambda r: r.all()) if stmt.is_select else (lambda r: r.rowcount)
    raw = (lambda c: c.fetchall()) if stmt.is_select else (lambda c: c.rowcount)
    return {
        "conn.execute(stmt)": lambda i: take(conn.execute(stmt, params(i))),
        "conn.exec_driver_sql(compiled once)": lambda i: take(conn.exec_driver_sql(
            sql, tuple(params(i)[n] for n in order))),
        "Prepared (direct path)": lambda i: take(_direct_execute(prepared, conn, params(i))),
        "sqlite3 alone": lambda i: raw(driver.execute(sql, [params(i)[n] for n in order])),
    }


def statements(count: int = 20000) -> None:
    """One one-row SELECT by key and one one-row UPDATE, in one transaction, every route."""
    from sqlalchemy import bindparam, create_engine, insert, select, update

    from hms_txn.store.schema import metadata, txns
    engine = create_engine("sqlite://")
    metadata.create_all(engine)
    sel = select(txns).where(txns.c.txn_id == bindparam("p_txn"))
    upd = (update(txns).where(txns.c.txn_id == bindparam("p_txn"))
           .values(last_heartbeat_ms=bindparam("p_now")))
    with engine.begin() as conn:
        conn.execute(insert(txns), [dict(txn_id=i, state="o", txn_type=0, started_ms=0,
                                         last_heartbeat_ms=0, heartbeat_count=0, user_name="u",
                                         host="h") for i in range(10)])
        cases = (("SELECT one row", sel, lambda i: {"p_txn": i % 10}),
                 ("UPDATE one row", upd, lambda i: {"p_txn": i % 10, "p_now": i}))
        for name, stmt, params in cases:
            print(name)
            for route, run in _routes(conn, stmt, params).items():
                best = float("inf")
                for _ in range(5):
                    t0 = time.perf_counter()
                    for i in range(count):
                        run(i)
                    best = min(best, time.perf_counter() - t0)
                print(f"  {route:38s} {best / count * 1e6:7.2f} us/statement")
    engine.dispose()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m hms_bench.prepared_path",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("variant", nargs="?", default="prepared",
                        choices=["prepared", "driver_sql", "execute"])
    parser.add_argument("--pairs", type=int, default=2000, help="pairs per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--statement", action="store_true",
                        help="time single statements on every route instead")
    args = parser.parse_args(argv)
    if args.statement:
        statements()
        return
    wall, cpu = pairs(args.variant, args.pairs, args.rounds)
    print(f"{args.variant:10s} best of {args.rounds}x{args.pairs}: "
          f"wall {wall:7.1f} us/pair  cpu {cpu:7.1f} us/pair")


if __name__ == "__main__":
    main()
