"""Fixtures of the hive_acid tests: ONE metastore server and ONE local Spark session for the
whole test session (Spark's start-up is the expensive part).

The server runs with a short ``hive.txn.timeout`` (6 s, reaper every second) so that the
heartbeat and timeout behaviour is exercised by real jobs without long waits.
"""

from __future__ import annotations

import itertools
import os
import tempfile

import pytest

from tests.support.requirements import require_module

ACID_TXN_TIMEOUT_S = 6


@pytest.fixture(scope="session")
def acid_hms():
    from tests.support.servers import InProcessServer
    root = tempfile.mkdtemp(prefix="hive-acid-hms-")
    server = InProcessServer(os.path.join(root, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{root}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(root, "warehouse"),
        "hive.txn.timeout": f"{ACID_TXN_TIMEOUT_S}s",
        "hive.timedout.txn.reaper.start": "1s",
        "hive.timedout.txn.reaper.interval": "1s",
    })
    server.root = root
    yield server
    server.stop()


@pytest.fixture(scope="session")
def acid_spark(acid_hms):
    require_module("pyspark.sql.datasource")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from spark import hive_acid
    spark = (SparkSession.builder.master("local[2]").appName("hive-acid-tests")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.driver.memory", "1g")
             .config("spark.sql.warehouse.dir", os.path.join(acid_hms.root, "spark-wh"))
             .config("spark.hadoop.hive.metastore.uris", acid_hms.uri)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    hive_acid.register(spark)
    yield spark
    hive_acid.shutdown()
    spark.stop()


@pytest.fixture
def ms(acid_hms):
    """A metastore client of the hive_acid helpers (``hms_txn.clients.acid.metastore``) on the server."""
    from hms_txn.clients.acid import metastore as M
    m = M.MetastoreConnection(acid_hms.uri)
    yield m
    m.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Spark standalone cluster for the module: a master and two workers with one core
    each, in network namespaces of their own, and an S3 server on the bridge
    (``tests/support/cluster.py``)."""
    from tests.support.cluster import start_cluster
    c = start_cluster(str(tmp_path_factory.mktemp("cluster")))
    yield c
    assert c.stop() == []


_table_numbers = itertools.count(1)


@pytest.fixture
def tname(request):
    """A fresh table name, unique in this session (prefixed by the test module's name)."""
    module = request.module.__name__.rsplit(".", 1)[-1].replace("test_hive_acid_", "")
    return f"default.{module}{next(_table_numbers)}_{os.getpid()}"
