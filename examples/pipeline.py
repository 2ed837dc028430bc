"""An end-to-end data pipeline on Hive ACID tables with PySpark and hms-txn.

It plays the seed's use cases on two tables:

* ``customers`` -- a dimension table kept current by an hourly batch of upserts (MERGE);
* ``orders`` -- an append-only fact table partitioned by day (hourly appends);
* a daily regulatory delete (right to erasure) that removes a customer's rows from both
  tables in ONE transaction;
* a reporting reader that keeps one consistent snapshot while the writers commit.

Run it against a running metastore, or let it start a temporary one::

    python examples/pipeline.py                        # starts `hms-txn serve` on a free port
    python examples/pipeline.py --metastore thrift://127.0.0.1:9083

(The local Spark session and the temporary metastore come from
``hms_bench.spark_scan.local_spark``, which the Spark benchmark runs in too.)

The checks at the end of each step (assertions) compare the tables with what a plain Spark
computation over the same inputs gives; ``run()`` returns a summary.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

CUSTOMERS = "id INT, name STRING, tier STRING, updated_hour INT"
ORDERS = "order_id BIGINT, customer_id INT, amount DECIMAL(10,2), day STRING"


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


def hourly_upserts(spark, hour: int, rnd: random.Random, n_customers: int):
    """This hour's changes to the dimension: new customers and tier changes."""
    changed = rnd.sample(range(n_customers + 5), 8)
    rows = [(c, f"customer-{c}", rnd.choice(["bronze", "silver", "gold"]), hour)
            for c in sorted(changed)]
    return spark.createDataFrame(rows, CUSTOMERS)


def hourly_orders(spark, hour: int, rnd: random.Random, n_customers: int, start_id: int):
    day = f"2024-01-0{1 + hour // 24}"
    rows = [(start_id + i, rnd.randrange(n_customers), round(rnd.uniform(1, 500), 2), day)
            for i in range(50)]
    from decimal import Decimal
    rows = [(a, b, Decimal(f"{c:.2f}"), d) for a, b, c, d in rows]
    return spark.createDataFrame(rows, ORDERS)


def run(spark, db: str = "pipeline", hours: int = 3, seed: int = 1) -> dict:
    from pyspark.sql import functions as F
    from spark import hive_acid

    hive_acid.register(spark)
    rnd = random.Random(seed)
    hive_acid.create_database(spark, db)
    customers, orders = f"{db}.customers", f"{db}.orders"
    hive_acid.create_table(spark, customers, CUSTOMERS, if_not_exists=True)
    hive_acid.create_table(spark, orders, ORDERS, partition_by=["day"], if_not_exists=True)

    # initial dimension load
    n = 20
    initial = spark.createDataFrame([(c, f"customer-{c}", "bronze", 0) for c in range(n)],
                                    CUSTOMERS)
    initial.write.format("hive_acid").mode("overwrite").save(customers)
    expect_dim = {r[0]: tuple(r) for r in initial.collect()}
    expect_orders = []
    next_order = 1

    for hour in range(1, hours + 1):
        # 1. hourly upserts into the dimension (SQL MERGE)
        batch = hourly_upserts(spark, hour, rnd, n)
        batch.createOrReplaceTempView("customer_updates")
        hive_acid.sql(spark, f"""
            MERGE INTO {customers} AS c USING customer_updates AS u ON c.id = u.id
            WHEN MATCHED THEN UPDATE SET tier = u.tier, updated_hour = u.updated_hour
            WHEN NOT MATCHED THEN INSERT *""")
        for r in batch.collect():
            expect_dim[r[0]] = tuple(r)
        n = max(expect_dim) + 1
        # 2. append-only fact load (partitioned by day)
        facts = hourly_orders(spark, hour, rnd, n, next_order)
        facts.write.format("hive_acid").mode("append").save(orders)
        expect_orders += [tuple(r) for r in facts.collect()]
        next_order += facts.count()
        assert _rows(hive_acid.read(spark, customers)) == sorted(
            expect_dim.values())

    # 3. daily regulatory delete: one transaction over both tables
    erased = sorted(rnd.sample(sorted(expect_dim), 3))
    ids = ", ".join(map(str, erased))
    with hive_acid.transaction(spark) as tx:
        tx.delete(customers, f"id IN ({ids})")
        tx.delete(orders, f"customer_id IN ({ids})")
    expect_dim = {k: v for k, v in expect_dim.items() if k not in erased}
    expect_orders = [o for o in expect_orders if o[1] not in erased]
    assert _rows(hive_acid.read(spark, customers)) == sorted(expect_dim.values())
    assert _rows(hive_acid.read(spark, orders)) == sorted(expect_orders)

    # 4. a report that keeps one snapshot while a writer commits
    def report(tx):
        o, c = tx.read(orders), tx.read(customers)
        return _rows(o.join(c, o.customer_id == c.id).groupBy("tier")
                     .agg(F.count("*").alias("n"), F.sum("amount").alias("total")))

    writer_done = threading.Event()

    def late_writer():
        late = hourly_orders(spark, hours + 1, rnd, n, next_order)
        late.write.format("hive_acid").mode("append").save(orders)
        writer_done.set()

    with hive_acid.transaction(spark) as tx:
        before = report(tx)
        t = threading.Thread(target=late_writer)
        t.start()
        t.join()
        assert writer_done.is_set()
        after = report(tx)           # the same snapshot: the late commit is not seen
    assert before == after, (before, after)
    total_now = hive_acid.read(spark, orders).count()
    assert total_now == len(expect_orders) + 50   # a new snapshot sees it
    return {"customers": len(expect_dim), "orders": total_now, "erased": erased,
            "report": before}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--metastore", help="thrift://host:port (default: start one)")
    ap.add_argument("--hours", type=int, default=3)
    args = ap.parse_args(argv)
    from hms_bench.spark_scan import local_spark
    with local_spark("hive-acid-pipeline", args.metastore,
                     {"spark.sql.shuffle.partitions": "4"}) as (spark, _):
        summary = run(spark, hours=args.hours)
        print(f"pipeline ok: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
