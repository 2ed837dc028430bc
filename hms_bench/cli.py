"""The ``hms-txn bench`` subcommand's arguments (kept light: the runner loads on use)."""

from __future__ import annotations

WORKLOAD_NAMES = ("open_commit", "writer", "valid_write_ids", "get_table", "partitions_by_names",
                  "add_partitions", "spark_planning", "locks", "rest_load_table", "rest_append",
                  "scale")


def _run(args) -> int:
    from hms_bench.runner import run
    return run(args)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "bench", help="benchmark hms-txn against the Java metastore (side by side)",
        description="Start hms-txn (one server process per backend) and the reference Java "
                    "metastore, run each workload with warm-up and repeated rounds from separate "
                    "client processes, print a table with ratios against Java, and write "
                    "results.json and bench.png into --out. See docs/benchmarks.md.")
    p.add_argument("--quick", action="store_true", help="tiny schedule (seconds), for tests")
    p.add_argument("--workloads", help=f"comma-separated subset of: {', '.join(WORKLOAD_NAMES)} "
                                       "(default all)")
    p.add_argument("--out", default="bench-results", help="output directory (default ./bench-results)")
    p.add_argument("--no-java", action="store_true", help="do not start the Java metastore")
    p.add_argument("--backends", default="sqlite,postgres",
                   help="our backends to measure: sqlite,postgres (default both)")
    p.add_argument("--clients", help="client counts, overriding each workload's own (e.g. 1,16)")
    p.add_argument("--rounds", type=int, help="measuring rounds per cell (default 5; quick 2)")
    p.add_argument("--round-seconds", type=float, help="length of one round (default 4 s; quick 0.6 s)")
    p.add_argument("--scale-points",
                   help="committed-history checkpoints (default 100,1000,10000,100000; quick 100,1000)")
    p.add_argument("--java-history-cap", type=int,
                   help="largest history checkpoint measured on Java (default 1000; quick 100): "
                        "Java commits ~60 txn/s at best")
    p.add_argument("--postgres-history-cap", type=int,
                   help="largest history checkpoint measured on our PostgreSQL backend "
                        "(default 10000; quick 1000): fsync-bound commits")
    p.add_argument("--hiveconf", action="append", default=[], metavar="KEY=VALUE",
                   help="a configuration key for our servers (repeatable), e.g. "
                        "hms_txn.server.cpu.affinity=0; recorded in results.json")
    p.add_argument("--pg-servers", default="1",
                   help="numbers of our server processes on one PostgreSQL database, one target "
                        "each (e.g. 1,2,4: hms-postgres, hms-postgres-x2, hms-postgres-x4); a "
                        "cell's clients are spread over a target's processes")
    p.add_argument("--java-db", choices=("derby", "postgres"), default="derby",
                   help="the Java metastore's database: embedded Derby (default) or a database "
                        "on the benchmark's PostgreSQL (JDBC driver: Debian's "
                        "libpostgresql-jdbc-java)")
    p.add_argument("--keep-workdir", action="store_true",
                   help="keep the servers' data directories and logs (for inspection)")
    p.set_defaults(func=_run)
