"""Spark's part, in a real Spark: everyday Spark SQL statements through Spark 4's built-in
Hive 2.3 client against hms-txn (``spark_statements.py``, one local Spark session per
backend): CREATE/DROP DATABASE and TABLE, INSERT into a table and a static partition,
SELECT with partition pruning, DESCRIBE FORMATTED (table, column, partition), ANALYZE
TABLE ... COMPUTE STATISTICS [FOR COLUMNS] (table and partition), CREATE/DROP FUNCTION
and using the function, TRUNCATE. Every statement must succeed with the rows Spark shows
against Hive's metastore, and the server's call counts show the path Spark took
(the calls of each statement: ``test_spark_hive23.py``).
"""

from __future__ import annotations

import os

import pytest

from tests.engines.spark_statements import DB
from tests.support.recorder import CallRecorder
from tests.support.spark import run_scenario

pytestmark = pytest.mark.spark

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark_statements.py")


def _rows(results: list[dict], sql: str) -> list | None:
    for item in results:
        if item["sql"] == sql:
            return item.get("rows")
    raise KeyError(sql)


def _described(rows: list | None) -> dict:
    """DESCRIBE FORMATTED's rows as {first column: second column}."""
    return {r[0].strip(): (r[1] or "").strip() for r in rows or [] if r and r[0]}


# The rows Spark shows for these statements when the metastore answers as Hive's does.
EXPECTED = {
    f"SELECT id, name FROM {DB}.events WHERE dt = '2024-01-02'": lambda rows: rows == [[3, "c"]],
    f"DESCRIBE FORMATTED {DB}.plain id": lambda rows: (
        _described(rows).get("min") == "1" and _described(rows).get("max") == "3"
        and _described(rows).get("distinct_count") == "3"),
    f"DESCRIBE FORMATTED {DB}.events PARTITION (dt='2024-01-01')": lambda rows: (
        "2 rows" in _described(rows).get("Partition Statistics", "")),
    f"SELECT {DB}.upper2(name) FROM {DB}.plain ORDER BY id": lambda rows: (
        rows == [["A"], ["BB"], ["CCC"]]),
    f"SHOW USER FUNCTIONS FROM {DB}": lambda rows: [f"spark_catalog.{DB}.upper2"] in rows,
    f"SELECT count(*) FROM {DB}.plain": lambda rows: rows == [[0]],
    "SHOW DATABASES": lambda rows: rows == [["default"]],
}


def test_everyday_statements_in_spark(hms, client, tmp_path):
    workdir = str(tmp_path / "spark")
    with CallRecorder(hms.server.dispatcher) as recorder:
        results = run_scenario(hms.uri, workdir, script=SCRIPT, timeout=600)

    problems = [f"{r['sql']}\n    failed: {r['error']}" for r in results if "error" in r]
    for sql, holds in EXPECTED.items():
        rows = _rows(results, sql)
        if rows is not None and not holds(rows):
            problems.append(f"{sql}\n    unexpected rows: {rows}")
    calls = recorder.calls
    # the pruning happened in the metastore (Shim_v2_0.getPartitionsByFilter), and the
    # function went through the function calls
    for method, least in (("get_partitions_by_filter", 1), ("create_function", 1),
                          ("drop_function", 1), ("alter_table_with_environment_context", 1),
                          ("alter_partitions", 1)):
        if calls[method] < least:
            problems.append(f"the server ran {method} {calls[method]} time(s), expected "
                            f"at least {least}")
    if problems:
        pytest.fail(f"{len(problems)} problem(s) running Spark SQL against hms-txn:\n"
                    + "\n".join(problems), pytrace=False)
    assert client.get_all_databases() == ["default"]
