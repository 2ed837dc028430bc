"""Which ``Driver`` a Spark session uses: registration, lookup and shutdown.

One ``Driver`` (``_driver``) per process and metastore URI, created on first use and kept
until :func:`shutdown`. ``register(session)`` installs the data source on the session with
the driver's coordinator address and key, and remembers the session's metastore URI; every
``hive_acid`` call on a session that was not registered registers it first.
"""

from __future__ import annotations

import threading
from typing import Dict, Optional

from pyspark.sql import SparkSession

from orc_acid.fs import hadoop_options

from ._coordinator import coordinator_hosts, coordinator_ports
from ._datasource import HiveAcidDataSource
from ._driver import Driver
from ._errors import HiveAcidError

_drivers: Dict[str, Driver] = {}
_drivers_mu = threading.Lock()

ARROW_MAX_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
_NO_BYTE_LIMIT = "2147483647"     # Int.MaxValue: Spark's "batches bounded by rows only"


def _session_uri(session: SparkSession, uri: Optional[str] = None) -> str:
    if uri:
        return uri
    for key in ("spark.hadoop.hive.metastore.uris", "spark.hive.metastore.uris"):
        try:
            v = session.conf.get(key, None)
        except Exception:
            v = None
        if v:
            return v
        v = session.sparkContext.getConf().get(key, None)
        if v:
            return v
    raise HiveAcidError("no metastore: pass uri=... or set spark.hadoop.hive.metastore.uris")


HADOOP_PREFIX = "spark.hadoop."


# Spark's Kerberos identity (spark-submit --principal/--keytab) -> our clients' keys
SPARK_KERBEROS = {"spark.kerberos.principal": "hms_txn.client.kerberos.principal",
                  "spark.kerberos.keytab": "hms_txn.client.kerberos.keytab"}


def connection_options(session: SparkSession):
    """How the driver connects to the metastore: the hive-site keys the session gives
    Spark's own Hive client (``spark.hadoop.<key>``: ``hive.metastore.use.SSL``,
    ``hive.metastore.truststore.path``, ``hive.metastore.sasl.enabled``,
    ``hive.metastore.kerberos.principal``, the framed and compact keys, ...) over the
    Hadoop keys of ``$HADOOP_CONF_DIR/core-site.xml`` (``hadoop.security.authentication``,
    ``hadoop.rpc.protection``), with Spark's Kerberos identity (``spark.kerberos.principal``
    / ``.keytab``; else the ticket cache), read by the one mapping every client of the
    project uses (``hms_txn.clients.connection.client_options``)."""
    from hms_txn.clients.connection import client_options
    from hms_txn.common.config import Config, ConfigError, core_site_files, read_site_xml

    conf = session.sparkContext.getConf().getAll()
    raw: Dict[str, str] = {}
    try:
        for path in core_site_files():
            raw.update(read_site_xml(path))
    except ConfigError as err:
        raise HiveAcidError(f"cannot connect to the metastore: {err}") from None
    raw.update({k[len(HADOOP_PREFIX):]: v for k, v in conf if k.startswith(HADOOP_PREFIX)})
    raw.update({SPARK_KERBEROS[k]: v for k, v in conf if k in SPARK_KERBEROS and v})
    try:
        return client_options(Config(raw, source="the Spark session's spark.hadoop.* keys"))
    except ConfigError as err:
        raise HiveAcidError(f"cannot connect to the metastore: {err}") from None


def is_connect_session(session) -> bool:
    """Is ``session`` a Spark Connect client (``SparkSession.builder.remote("sc://...")``)?
    (By its class's module: importing Connect's classes needs grpc, which a classic
    installation may lack.)"""
    return type(session).__module__.startswith("pyspark.sql.connect.")


def refuse_connect(session) -> None:
    """hive_acid needs a classic session; a Connect client gets this ``HiveAcidError``.

    Tried on the test cluster (tests/spark/test_cluster_hive_acid.py): the data source's
    side works through Connect (the server's Python workers and the executors call the
    coordinator wherever it listens), but the coordinator -- the transactions, their
    heartbeats, the task-attempt bookkeeping -- has to live in a long-lived process that
    every executor can reach. With Spark Connect the only such Python process is the
    client, and the cluster connecting back to a client is what Connect is meant to do
    without (clients connect out over gRPC, from notebooks and laptops outside the
    cluster's network); the server offers no long-lived Python process to run it in. So
    we refuse, saying what works."""
    if is_connect_session(session):
        raise HiveAcidError(
            "hive_acid needs a classic Spark session, not a Spark Connect client (sc://): "
            "its transactions are kept, heartbeated and committed by a coordinator in the "
            "Spark driver's own Python process, which the executors call, and a Connect "
            "client is not that process. Run this code as a PySpark application on the "
            "cluster instead: spark-submit --master <the cluster's master> app.py, or "
            "SparkSession.builder.master(...).getOrCreate() in a process the executors can "
            "reach (see docs/spark.md, 'Spark Connect')")


def driver_for(session: SparkSession, uri: Optional[str] = None, *,
               refresh: bool = False) -> Driver:
    """The driver of ``uri`` (default: the session's metastore), started on first use;
    ``refresh``: read the session's file-system keys again (``register`` does)."""
    refuse_connect(session)
    uri = _session_uri(session, uri)
    with _drivers_mu:
        d = _drivers.get(uri)
        if d is None:
            conf = session.sparkContext.getConf()
            bind, advertised = coordinator_hosts(conf)
            d = _drivers[uri] = Driver(uri, bind_host=bind, advertised_host=advertised,
                                       options=connection_options(session),
                                       ports=coordinator_ports(conf))
            refresh = True
        if refresh:
            d.ms.fs_options = session_fs_options(session)
        return d


def session_fs_options(session: SparkSession) -> Dict[str, str]:
    """Table locations on s3a://, abfs://...: the Hadoop keys of the Spark conf
    (``spark.hadoop.fs.s3a.endpoint``, ...; set at start or on the session before
    ``register``, which reads them: reading them takes one py4j call per setting of the
    session) configure ``orc_acid.fs`` as they configure Hadoop's file systems in the JVM."""
    conf = dict(session.sparkContext.getConf().getAll())
    conf.update(session.conf.getAll)
    return hadoop_options(conf, prefix="spark.hadoop.")


def register(session: SparkSession, uri: Optional[str] = None) -> None:
    """Register the ``hive_acid`` data source on ``session`` (metastore: ``uri`` or the
    session's ``spark.hadoop.hive.metastore.uris``)."""
    d = driver_for(session, uri, refresh=True)
    cls = type("HiveAcidDataSource", (HiveAcidDataSource,), {
        "_defaults": {"metastore.uris": d.uri, "coordinator": d.address,
                      "authkey": d.authkey, "speculation": speculation_on(session)},
        "__module__": HiveAcidDataSource.__module__,
    })
    session.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    _lift_arrow_byte_limit(session)
    session.dataSource.register(cls)
    session.__dict__["_hive_acid_uri"] = d.uri


def registered_driver(session: SparkSession) -> Driver:
    """The driver of the session's registered metastore (registering the session first)."""
    refuse_connect(session)
    uri = session.__dict__.get("_hive_acid_uri")
    if uri is None:
        register(session)
        uri = session.__dict__["_hive_acid_uri"]
    return driver_for(session, uri)


def shutdown() -> None:
    """Abort this process's open hive_acid transactions, release its read locks and stop its
    background threads (also fine to skip: the metastore times them out)."""
    with _drivers_mu:
        drivers = list(_drivers.values())
        _drivers.clear()
    for d in drivers:
        d.close()


def speculation_on(session: SparkSession) -> bool:
    """Is ``spark.speculation`` on? (A SparkContext setting: fixed for the session's life.)"""
    refuse_connect(session)
    return str(session.sparkContext.getConf().get("spark.speculation", "false")).strip() \
        .lower() == "true"


def _lift_arrow_byte_limit(session: SparkSession) -> None:
    """Spark 4.1+ caps the Arrow batches it sends to Python workers (the rows a
    ``df.write.format("hive_acid")`` task or a ``mapInArrow`` receives) at
    ``spark.sql.execution.arrow.maxBytesPerBatch`` by measuring the batch being built after
    *every row*; with the struct-wrapped input of these operators that measurement was most of
    the JVM's time in an append (about half the append's wall time). Unless the session sets
    the key itself, set it to Int.MaxValue, the value for which Spark skips the check, so
    batches are bounded by ``spark.sql.execution.arrow.maxRecordsPerBatch`` (10,000 rows by
    default) only, as before Spark 4.1."""
    try:
        if session.conf.get(ARROW_MAX_BYTES, None) is None:
            session.conf.set(ARROW_MAX_BYTES, _NO_BYTE_LIMIT)
    except Exception:     # a Spark without the key: nothing to lift
        pass
