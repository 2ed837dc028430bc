"""The configuration keys hms-txn honours: each declared once in ``KEYS`` with its
default, its parser, what it means, and its ``metastore.*`` alias (the names Hive 3's
standalone metastore uses in ``metastore-site.xml``); and the parsers of their values.
``Config`` (``config``) reads them."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from hms_txn.common.kerberos_names import parse_auth_to_local, parse_rpc_protection


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file or key."""


# ---------------------------------------------------------------------------- value parsers

_TIME_UNITS = {
    "ns": 1e-9, "nsec": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "us": 1e-6, "usec": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "msec": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
_TIME_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration(text: str, default_unit: str = "s") -> float:
    """Parse Hive's time values ("300", "300s", "5m", "1500ms") into seconds."""
    match = _TIME_RE.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 300s, 5m, 1500ms)")
    number, unit = match.groups()
    unit = (unit or default_unit).lower()
    if unit not in _TIME_UNITS:
        raise ValueError(f"unknown time unit {unit!r} in {text!r}")
    seconds = float(number) * _TIME_UNITS[unit]
    if seconds < 0:
        raise ValueError(f"negative duration: {text!r}")
    return seconds


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r} (use true or false)")


def parse_int(text: str) -> int:
    return int(text.strip())


def parse_nonneg_int(text: str) -> int:
    value = int(text.strip())
    if value < 0:
        raise ValueError(f"must not be negative: {text!r}")
    return value


def parse_positive_int(text: str) -> int:
    value = int(text.strip())
    if value <= 0:
        raise ValueError(f"must be positive: {text!r}")
    return value


def parse_port(text: str) -> int:
    value = int(text.strip())
    if not 0 <= value <= 65535:
        raise ValueError(f"not a TCP port: {text!r}")
    return value


def parse_float(text: str) -> float:
    return float(text.strip())


def parse_str(text: str) -> str:
    return text.strip()


AUTH_MODES = ("NOSASL", "NONE", "CONFIG", "KERBEROS", "LDAP", "CUSTOM")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """"" (no pinning) or CPU numbers and ranges: "0", "2,3", "0-3,6"."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            first = last = -1
        if first < 0 or last < first:
            raise ValueError(f"not a CPU number or range: {part!r} (use e.g. 0 or 2-3)")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def _choice(text: str, choices: tuple[str, ...]) -> str:
    value = text.strip().upper()
    if value not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}")
    return value


# ---------------------------------------------------------------------------- declared keys

@dataclass(frozen=True)
class Key:
    name: str
    default: Any
    parse: Callable[[str], Any]
    doc: str
    aliases: tuple[str, ...] = ()


def _seconds(default_unit: str = "s") -> Callable[[str], float]:
    return lambda text: parse_duration(text, default_unit)


KEYS: dict[str, Key] = {}


def _key(name: str, default: Any, parse: Callable[[str], Any], doc: str, *aliases: str) -> None:
    KEYS[name] = Key(name, default, parse, doc, tuple(aliases))


# Server
_key("hive.metastore.port", 9083, parse_port, "Port `hms-txn serve` listens on.",
     "metastore.thrift.port")
_key("hive.metastore.bind.host", "0.0.0.0", parse_str, "Address to listen on.",
     "metastore.thrift.bind.host")
_key("hive.metastore.warehouse.dir", None, parse_str,
     "Root of managed databases and tables (a local path or file:// URL).",
     "metastore.warehouse.dir")
_key("hive.metastore.thrift.framed.transport.enabled", False, parse_bool,
     "Use the framed transport instead of the plain socket stream.",
     "metastore.thrift.framed.transport.enabled")
_key("hive.metastore.thrift.compact.protocol.enabled", False, parse_bool,
     "Use the compact protocol instead of the binary protocol.",
     "metastore.thrift.compact.protocol.enabled")
_key("hive.metastore.server.max.threads", 1000, parse_positive_int,
     "Maximum number of concurrent client connections.", "metastore.server.max.threads")
_key("hive.metastore.client.socket.timeout", 600.0, _seconds("s"),
     "Idle time after which a silent client connection is closed.",
     "metastore.client.socket.timeout")
_key("hive.metastore.server.max.message.size", 100 * 1024 * 1024, parse_positive_int,
     "Largest Thrift message (bytes) a client may send; larger ones close that connection.",
     "metastore.server.max.message.size")
_key("hms_txn.connection.idle.timeout", 3600.0, _seconds("s"),
     "A client connection idle for this long is closed (0 = never); clients reconnect.")
_key("hms_txn.server.cpu.affinity", (), parse_cpu_list,
     "CPUs every thread of the server process is pinned to (e.g. 0 or 2-3; empty: no "
     "pinning). With a thread per connection, one CPU saves the cross-CPU wake-ups between "
     "connection threads (docs/benchmarks-history.md: +44% open+commit with 16 clients); the "
     "transaction loop (hms_txn.server.txn.loop) already runs the hot path on one thread.")
_key("hms_txn.server.txn.loop", True, parse_bool,
     "Serve client connections from one event-loop thread that runs the transaction calls "
     "ready at the same time as one batch (one SQLite transaction, one fsync) and hands "
     "other calls to a thread pool. Applies to the embedded SQLite database with the "
     "default unframed binary transport and no SASL; off: a thread per connection.")
_key("hms_txn.server.txn.loop.spin", 200e-6, _seconds("us"),
     "After serving a call, the transaction loop looks for the next one without sleeping "
     "for up to this long (default 200us; 0: sleep at once). Saves the kernel's wake-up of "
     "a sleeping thread, ~0.05-0.1 ms per call in a VM; costs at most this much CPU per "
     "burst of calls. Plain numbers are microseconds.")
# Authentication
_key("hive.metastore.sasl.enabled", False, parse_bool,
     "Require SASL before any call: PLAIN (configured users) or DIGEST-MD5 (Hive "
     "delegation tokens).", "metastore.sasl.enabled")
_key("hive.metastore.authentication", "NOSASL", lambda v: _choice(v, AUTH_MODES),
     "NOSASL, NONE, CONFIG (SASL PLAIN against configured users) or KERBEROS (SASL GSSAPI, "
     "with DIGEST-MD5 for delegation tokens). LDAP and CUSTOM are not supported.",
     "metastore.authentication")
# Kerberos (hms_txn.wire.sasl_gssapi; docs/security.md, "Kerberos")
_key("hive.metastore.kerberos.principal", None, parse_str,
     "Server: its Kerberos principal (hive/_HOST@REALM: _HOST becomes this host's canonical "
     "name). Clients: the metastore's principal (_HOST becomes the host of the URI).",
     "metastore.kerberos.principal")
_key("hive.metastore.kerberos.keytab.file", None, parse_str,
     "Server: the keytab holding the key of hive.metastore.kerberos.principal.",
     "metastore.kerberos.keytab.file")
_key("hadoop.security.authentication", "simple",
     lambda v: _choice(v, ("SIMPLE", "KERBEROS")).lower(),
     "kerberos: with hive.metastore.sasl.enabled the metastore authenticates clients with "
     "Kerberos (SASL GSSAPI), Hive 2.3's way of saying it (usually in core-site.xml).")
_key("hadoop.security.auth_to_local", "DEFAULT", parse_auth_to_local,
     "Rules mapping Kerberos principals to the short user names the metastore records and "
     "checks (Hadoop's syntax: DEFAULT, RULE:[n:fmt](regex)s/from/to/g/L).")
_key("hadoop.security.auth_to_local.mechanism", "hadoop",
     lambda v: _choice(v, ("HADOOP", "MIT")).lower(),
     "hadoop: a principal no rule maps is refused; mit: it is used as it is.")
_key("hadoop.rpc.protection", ("auth",), parse_rpc_protection,
     "SASL GSSAPI protection, a comma-separated list of authentication, integrity, "
     "privacy: the server offers each, a client chooses the first the server offers.")
_key("hms_txn.client.kerberos.principal", None, parse_str,
     "Clients (the hms-txn commands, hive_acid, the streaming client): authenticate with "
     "Kerberos as this principal, from hms_txn.client.kerberos.keytab (--principal).")
_key("hms_txn.client.kerberos.keytab", None, parse_str,
     "Clients: the keytab of hms_txn.client.kerberos.principal (--keytab); unset: the "
     "ticket cache (kinit).")
_key("hive.metastore.authentication.config.username", None, parse_str,
     "User accepted by CONFIG authentication.", "metastore.authentication.config.username")
_key("hive.metastore.authentication.config.password", None, lambda v: v,
     "Password of that user.", "metastore.authentication.config.password")
_key("hms_txn.authentication.users.file", None, parse_str,
     "File of `user:password` or `user:sha256:<hex>` lines accepted by SASL PLAIN.")
# Hive 2 reads these as plain milliseconds; Hive 3+ also accepts "1d", "7d", ...
_key("hive.cluster.delegation.token.renew-interval", 86400.0, _seconds("ms"),
     "A delegation token expires this long after it was issued or last renewed.",
     "metastore.cluster.delegation.token.renew-interval")
_key("hive.cluster.delegation.token.max-lifetime", 7 * 86400.0, _seconds("ms"),
     "No renewal keeps a delegation token valid longer than this after its issue.",
     "metastore.cluster.delegation.token.max-lifetime")
_key("hive.users.in.admin.role", "", parse_str,
     "Comma-separated users granted the admin role at start (Hive's addAdminUsers).",
     "metastore.users.in.admin.role")
# Observability
_key("hms_txn.metrics.enabled", False, parse_bool,
     "Serve /metrics (Prometheus) and /health over HTTP.")
_key("hms_txn.metrics.port", 9084, parse_port,
     "Port of the /metrics and /health endpoint (0 = any free port).")
_key("hms_txn.log.format", "text", lambda v: _choice(v, ("TEXT", "JSON")).lower(),
     "Server log lines as text or as one JSON object per line; either way each record of a "
     "transaction call carries its method, txnid, lockid and authenticated user.")
# Database
_key("javax.jdo.option.ConnectionURL", None, parse_str,
     "Backing database: jdbc:postgresql://, jdbc:sqlite:, or an SQLAlchemy URL of PostgreSQL or "
     "SQLite (MySQL/MariaDB and others are refused at start-up).",
     "metastore.jdo.option.ConnectionURL")
_key("javax.jdo.option.ConnectionUserName", None, parse_str, "Database user.")
_key("javax.jdo.option.ConnectionPassword", None, parse_str, "Database password.")
_key("hms_txn.sqlite.synchronous", "FULL", lambda v: _choice(v, ("FULL", "NORMAL")),
     "FULL: every acknowledged call survives a process, OS or power failure. NORMAL: it "
     "survives the process being killed (kill -9) but the last calls may be lost if the OS "
     "crashes or power fails; several times more writes per second.")
_key("hms_txn.db.pool.size", 10, parse_positive_int,
     "Connections kept open to a client/server database (PostgreSQL).")
_key("hms_txn.schema.auto.upgrade", True, parse_bool,
     "Upgrade an older metastore schema at start-up (false: refuse to start).")
# Transactions
_key("hive.txn.timeout", 300.0, _seconds("s"),
     "A transaction or txn-less lock not heartbeated for this long is aborted.",
     "metastore.txn.timeout")
_key("hive.timedout.txn.reaper.start", 100.0, _seconds("ms"),
     "Delay before the first timed-out transaction sweep.",
     "metastore.timedout.txn.reaper.start")
_key("hive.timedout.txn.reaper.interval", 180.0, _seconds("ms"),
     "Interval between timed-out transaction sweeps.",
     "metastore.timedout.txn.reaper.interval")
_key("hive.txn.max.open.batch", 1000, parse_positive_int,
     "Most transactions one open_txns call may open.", "metastore.txn.max.open.batch")
_key("hive.max.open.txns", 100000, parse_positive_int,
     "Open transactions allowed at once; new ones are refused until below 90%.",
     "metastore.max.open.txns")
_key("hms_txn.hive2.open.txns.as.set", False, parse_bool,
     "Answer get_open_txns in Hive 2.x's shape (open_txns as a set, no abortedBits), for "
     "servers whose transactional clients are Hive 2.3 (e.g. Spark's HiveMetaStoreClient).")
# Compaction (hms_txn.compactor): Hive's keys and defaults
_key("hive.compactor.initiator.on", False, parse_bool,
     "Run the Initiator in this server: find tables/partitions due for compaction.",
     "metastore.compactor.initiator.on")
_key("hive.compactor.cleaner.on", False, parse_bool,
     "Run the Cleaner in this server: delete compacted-away and aborted directories.",
     "metastore.compactor.cleaner.on")
_key("hive.compactor.worker.threads", 0, parse_nonneg_int,
     "Compaction worker threads in this server (0: this server runs no compactions).",
     "metastore.compactor.worker.threads")
_key("hive.compactor.worker.timeout", 86400.0, _seconds("s"),
     "A compaction still 'working' after this long is declared failed and re-queued.",
     "metastore.compactor.worker.timeout")
_key("hive.compactor.worker.pool.timeout", 43200.0, _seconds("s"),
     "A Hive Worker asking for requests of no pool (find_next_compact2) also gets those of "
     "any pool enqueued longer ago than this.",
     "metastore.compactor.worker.pool.timeout")
_key("hive.compactor.worker.sleep.time", 10.8, _seconds("ms"),
     "How long an idle worker waits before looking at the queue again.",
     "metastore.compactor.worker.sleep.time")
_key("hive.compactor.check.interval", 300.0, _seconds("s"),
     "Time between the Initiator's checks for tables/partitions needing compaction.",
     "metastore.compactor.check.interval")
_key("hive.compactor.cleaner.run.interval", 5.0, _seconds("ms"),
     "Time between runs of the Cleaner.", "metastore.compactor.cleaner.run.interval")
_key("hive.compactor.delta.num.threshold", 10, parse_nonneg_int,
     "More delta directories than this in a table/partition trigger a minor compaction.",
     "metastore.compactor.delta.num.threshold")
_key("hive.compactor.delta.pct.threshold", 0.1, parse_float,
     "Delta size / base size above this triggers a major compaction (0.1 = 10%).",
     "metastore.compactor.delta.pct.threshold")
_key("hive.compactor.abortedtxn.threshold", 1000, parse_nonneg_int,
     "More aborted transactions than this on a table/partition trigger a major compaction.",
     "metastore.compactor.abortedtxn.threshold")
_key("hive.compactor.initiator.failed.compacts.threshold", 2, parse_positive_int,
     "After this many consecutive failed compactions of a table/partition the Initiator "
     "stops scheduling it (manual requests still run; a success resumes it).",
     "metastore.compactor.initiator.failed.compacts.threshold")
_key("hive.compactor.history.retention.succeeded", 3, parse_nonneg_int,
     "Succeeded compactions kept in the history per table/partition.",
     "metastore.compactor.history.retention.succeeded")
_key("hive.compactor.history.retention.failed", 3, parse_nonneg_int,
     "Failed compactions kept in the history per table/partition.",
     "metastore.compactor.history.retention.failed")
_key("hive.compactor.history.retention.attempted", 2, parse_nonneg_int,
     "Attempted (check failed) entries kept in the history per table/partition.",
     "metastore.compactor.history.retention.attempted")
_key("hive.compactor.history.retention.did.not.initiate", 2, parse_nonneg_int,
     "'did not initiate' / 'refused' entries kept in the history per table/partition.",
     "metastore.compactor.history.retention.did.not.initiate")
_key("hive.compactor.history.reaper.interval", 120.0, _seconds("ms"),
     "Time between purges of the compaction history beyond the retention counts.",
     "metastore.compactor.history.reaper.interval")


_key("hms_txn.compactor.engine", "LOCAL", lambda text: _choice(text, ("LOCAL", "SPARK")),
     "Where workers run a compaction: LOCAL (in the worker thread, with orc_acid) or SPARK "
     "(a Spark application per claimed batch of requests, one task per partition and bucket "
     "id; hms_txn.service.compactor.spark_engine). SPARK needs spark.master.")
_key("spark.master", "", str,
     "engine=SPARK: the cluster the compaction applications run on (Spark's own key; every "
     "other spark.* key of hive-site.xml is passed to the application as well, as Hive on "
     "Spark does: spark.executor.memory, spark.executor.cores, spark.cores.max, ...).")
_key("hive.compactor.job.queue", "", str,
     "The queue compaction jobs run in (Hive's key): on YARN, the Spark application's "
     "spark.yarn.queue unless that is set.", "metastore.compactor.job.queue")
_key("hms_txn.compactor.spark.submit", "", str,
     "engine=SPARK: the spark-submit to run (default: $SPARK_HOME/bin/spark-submit, else the "
     "one of the installed pyspark).")
_key("hms_txn.compactor.spark.requests.per.application", 16, parse_positive_int,
     "engine=SPARK: a worker claims up to this many queued requests of one table and type "
     "together and runs them in one application (one Spark task per partition and bucket).")
_key("hms_txn.compactor.worker.test.pause", 0.0, _seconds("s"),
     "Test hook: a worker sleeps this long after writing the (invisible) output and before "
     "committing the compaction transaction (crash-safety tests).")
# Notifications
_key("hive.metastore.event.db.listener.timetolive", 86400.0, _seconds("s"),
     "Notification events older than this are purged.",
     "metastore.event.db.listener.timetolive")

# The notification message formats (NOTIFICATION_LOG.MESSAGE_FORMAT) and the encoder classes
# of hive.metastore.event.message.factory that write them: Hive 4's JSONMessageEncoder and
# GzipJSONMessageEncoder, and JSONMessageFactory, the same json-0.2 format's class in Hive
# 2.x/3.x site files.
JSON_MESSAGE_FORMAT = "json-0.2"
GZIP_MESSAGE_FORMAT = "gzip(json-2.0)"
JSON_MESSAGE_ENCODER = "org.apache.hadoop.hive.metastore.messaging.json.JSONMessageEncoder"
GZIP_MESSAGE_ENCODER = "org.apache.hadoop.hive.metastore.messaging.json.gzip.GzipJSONMessageEncoder"
MESSAGE_ENCODERS = {
    JSON_MESSAGE_ENCODER: JSON_MESSAGE_FORMAT,
    "org.apache.hadoop.hive.metastore.messaging.json.JSONMessageFactory": JSON_MESSAGE_FORMAT,
    GZIP_MESSAGE_ENCODER: GZIP_MESSAGE_FORMAT,
}


def _message_encoder(text: str) -> str:
    value = text.strip()
    if value not in MESSAGE_ENCODERS:
        raise ValueError(f"expected one of {', '.join(MESSAGE_ENCODERS)}")
    return value


_key("hive.metastore.event.message.factory", JSON_MESSAGE_ENCODER, _message_encoder,
     "Encoder of notification messages: JSONMessageEncoder writes json-0.2 (plain JSON, "
     "which every reader decodes: Hive 2.x/3.x, Spark's Hive 2.3 classes, Impala's "
     "apache-hive shims); GzipJSONMessageEncoder writes gzip(json-2.0) (base64 of gzipped "
     "JSON, Hive 4's default), which only Hive 4 readers and readers configured for it "
     "decode.", "metastore.event.message.factory")
_key("hive.metastore.dml.events", True, parse_bool,
     "Record the ACID writes a commit reports in writeEventInfos (Spark, streaming ingest) as "
     "write notifications, as a Hive deployment with this setting records HiveServer2's "
     "writes, and answer it to get_config_value (Impala's event processor starts only when "
     "it is true). Hive's default is false; ours is true, see the README.")
_key("hive.metastore.max.event.response", 1000000, parse_positive_int,
     "Most events get_next_notification returns (also when the request asks for more, or "
     "for no limit).", "metastore.max.event.response")
# Metadata cache (hms_txn.cache)
_key("hms_txn.cache.enabled", True, parse_bool,
     "Serve get_table/get_table_req/get_partitions_by_names from an in-memory cache kept "
     "current by tailing the notification log (false: every read goes to the database).")
_key("hms_txn.cache.tail.interval", 0.1, _seconds("s"),
     "How often the cache's log tailer polls the notification log for new events.")
_key("hms_txn.cache.max.entries", 10000, parse_positive_int,
     "Most tables the cache holds; least recently used tables are dropped beyond it.")
_key("hms_txn.cache.max.bytes", 256 * 1024 * 1024, parse_positive_int,
     "Estimated memory bound of the cache (tables and partitions, with their wire forms).")
_key("hms_txn.cache.strict.writeids", False, parse_bool,
     "Reject get_table_req on a transactional table that carries no validWriteIdList "
     "(the original design's rule); by default such reads are answered from the database.")
_key("hms_txn.cache.tailer.pausable", False, parse_bool,
     "Test hook: allow fb303 setOption('hms_txn.cache.tailer.paused', 'true'|'false') to "
     "pause and resume the cache's log tailer.")
# Client capabilities (hms_txn.domain.catalog.capabilities)
_key("hive.metastore.client.capability.check", True, parse_bool,
     "Hand ACID tables to clients that have not declared they understand them in the plain "
     "form (hms_txn.domain.catalog.plain_form: described, listed, dropped, never read or written): "
     "insert-only tables to clients without ClientCapability INSERT_ONLY_TABLES (Hive 3/4 "
     "refuse them), full-ACID tables to clients that declared no capability at all (Hive 2 "
     "clients such as Spark's built-in one, and every get_table call). false: such clients "
     "get the tables as stored and misread them.",
     "metastore.client.capability.check")
# Extension mode (hms_txn.upstream, hms_txn.extension; docs/extension-mode.md)
_key("hms_txn.upstream.uris", None, parse_str,
     "Comma-separated thrift://host:port URIs of an existing metastore (e.g. Hive 2.x): "
     "turns on extension mode (catalog calls forwarded there; transactions, write ids, "
     "locks, notifications and the cache served here).")
_key("hms_txn.upstream.sasl.enabled", False, parse_bool,
     "Authenticate to the upstream with SASL: PLAIN (thrift-sasl), or Kerberos when "
     "hms_txn.upstream.kerberos.principal is set.")
_key("hms_txn.upstream.kerberos.principal", None, parse_str,
     "The upstream metastore's Kerberos principal (hive/_HOST@REALM: _HOST becomes the "
     "upstream's host): authenticate to it with SASL GSSAPI, as hive.metastore.kerberos."
     "principal from its keytab (else the ticket cache).")
_key("hms_txn.upstream.sasl.user", None, parse_str, "SASL PLAIN user for the upstream.")
_key("hms_txn.upstream.sasl.password", None, lambda v: v, "SASL PLAIN password for the upstream.")
_key("hms_txn.upstream.framed", False, parse_bool,
     "Framed transport to the upstream (always framed with SASL).")
_key("hms_txn.upstream.use.SSL", False, parse_bool,
     "Connect to the upstream with TLS (hms_txn.wire.tls), verifying its certificate with "
     "hms_txn.upstream.truststore.path (PEM or JKS; default: the system's CAs).")
_key("hms_txn.upstream.truststore.path", None, parse_str,
     "CAs that verify the upstream's certificate (PEM, or a JKS truststore).")
_key("hms_txn.upstream.truststore.password", None, lambda v: v,
     "Password of a JKS upstream truststore (checks its integrity).")
_key("hms_txn.upstream.socket.timeout", 60.0, _seconds("s"),
     "Socket timeout of upstream connections (connect and each call).")
_key("hms_txn.upstream.retries", 2, parse_nonneg_int,
     "Extra attempts when the upstream cannot be reached (each tries every URI).")
_key("hms_txn.upstream.retry.delay", 0.2, _seconds("s"),
     "Pause between those attempts.")
_key("hms_txn.upstream.pool.size", 16, parse_positive_int,
     "Idle upstream connections kept open for re-use.")
_key("hms_txn.upstream.cache.ttl", 5.0, _seconds("s"),
     "Upstream tables in the metadata cache are re-read after this long (changes made "
     "directly on the upstream are seen within it; 0 = every read goes upstream).")
_key("hms_txn.upstream.cache.max.partitions", 10000, parse_nonneg_int,
     "Partition reads of an upstream table are answered from the cache when the table has "
     "at most this many partitions (all are read once per cache entry); larger tables are "
     "forwarded. 0 = always forward partition reads. At most 32766.")
_key("hms_txn.upstream.events.enabled", False, parse_bool,
     "Tail the upstream's own notification log (needs DbNotificationListener there) and "
     "evict tables it reports changed.")
_key("hms_txn.upstream.events.interval", 1.0, _seconds("s"),
     "How often the upstream's notification log is polled.")

# TLS (hms_txn.wire.tls; docs/security.md maps Hive's Java key stores to PEM files)
_key("hive.metastore.use.SSL", False, parse_bool,
     "Serve TLS only (server); connect with TLS (the hms-txn commands, hive_acid, the "
     "streaming client).", "metastore.use.SSL")
_key("hive.metastore.keystore.path", None, parse_str,
     "Server: PEM file with its certificate chain and (unless hms_txn.ssl.key.path) private "
     "key; Hive's is a JKS key store.", "metastore.keystore.path")
_key("hive.metastore.keystore.password", None, lambda v: v,
     "Server: password of an encrypted private key.", "metastore.keystore.password")
_key("hms_txn.ssl.key.path", None, parse_str,
     "Server: PEM private key, when it is not in hive.metastore.keystore.path.")
_key("hms_txn.ssl.client.ca.path", None, parse_str,
     "Server: require a client certificate signed by one of these CAs (PEM); unset: no "
     "client certificate is asked for.")
_key("hive.metastore.truststore.path", None, parse_str,
     "Clients: CAs that verify the server's certificate, as PEM or a JKS truststore "
     "(default: the system's CAs).", "metastore.truststore.path")
_key("hive.metastore.truststore.password", None, lambda v: v,
     "Clients: password of a JKS truststore (checks its integrity).",
     "metastore.truststore.password")
_key("hms_txn.ssl.client.certificate.path", None, parse_str,
     "Clients: PEM certificate (and key, unless hms_txn.ssl.client.key.path) presented to a "
     "server that requires one.")
_key("hms_txn.ssl.client.key.path", None, parse_str,
     "Clients: PEM private key of that certificate, when it is a separate file.")

# Clients of a metastore (the hms-txn commands, hive_acid, the streaming client)
_key("hive.metastore.uris", None, parse_str,
     "Clients: the metastore's thrift://host:port URIs (comma-separated, tried in order); "
     "the commands' default for --uri.", "metastore.thrift.uris")
_key("hive.metastore.token.signature", "", parse_str,
     "Clients with SASL and no user: the service of the delegation token to use from "
     "HADOOP_TOKEN_FILE_LOCATION (empty: the token written without --signature).",
     "metastore.token.signature")
_key("hive.metastore.client.plain.username", None, parse_str,
     "Clients: authenticate with SASL PLAIN as this user (Hive 4's key; the commands' --user "
     "wins).", "metastore.client.plain.username")
_key("hms_txn.client.plain.password", None, lambda v: v,
     "Clients: the password of that user (Hive 4 reads it from a Hadoop credential "
     "provider; the commands' --password-file wins).")

# The Iceberg REST catalog (hms_txn.rest; Hive 4.1's keys, README "Iceberg REST")
def _servlet_port(text: str) -> int:
    value = int(text.strip())
    if not -1 <= value <= 65535:
        raise ValueError(f"not a TCP port, 0 (any free port) or -1 (off): {text!r}")
    return value


def _servlet_auth(text: str) -> str:
    value = text.strip().lower()
    if value == "oauth2":
        raise ValueError("oauth2 is not supported by hms-txn; use jwt (with "
                         "metastore.authentication.jwt.jwks.url), simple or none")
    return _choice(value.upper(), ("NONE", "SIMPLE", "JWT")).lower()


_key("metastore.catalog.servlet.port", -1, _servlet_port,
     "Port of the Iceberg REST catalog inside `hms-txn serve`: -1 off, 0 any free port.",
     "hive.metastore.catalog.servlet.port")
_key("metastore.iceberg.catalog.servlet.path", "iceberg", parse_str,
     "Path of the Iceberg REST catalog: http(s)://host:port/<path>/v1/...",
     "hive.metastore.iceberg.catalog.servlet.path")
_key("metastore.catalog.servlet.auth", "jwt", _servlet_auth,
     "Authentication of the Iceberg REST catalog: jwt (a bearer token signed by a key of "
     "metastore.authentication.jwt.jwks.url; the user is its sub claim), simple (the user is "
     "the x-actor-username header) or none.", "hive.metastore.catalog.servlet.auth")
_key("metastore.authentication.jwt.jwks.url", None, parse_str,
     "URL(s) of the JSON Web Key Set(s) that sign the REST catalog's JWTs (comma-separated).",
     "hive.metastore.authentication.jwt.jwks.url")
_key("hms_txn.iceberg.lock.timeout", 180.0, _seconds("s"),
     "How long an Iceberg REST commit waits for its table's lock (held by another commit, "
     "through either door) before it fails with 409; Iceberg's own default is 3 minutes.")

# Keys handed out by get_config_value / getMetaConf even though the server itself does not
# act on them; clients read them to decide features.
PASSTHROUGH_DEFAULTS: dict[str, str] = {
    "hive.metastore.try.direct.sql": "true",
    "hive.metastore.try.direct.sql.ddl": "true",
    "hive.metastore.disallow.incompatible.col.type.changes": "true",
    "hive.support.concurrency": "true",
    "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
    "hive.metastore.batch.retrieve.max": "300",
    "hive.exec.default.partition.name": "__HIVE_DEFAULT_PARTITION__",
    # MetastoreConf CATALOG_DEFAULT: Impala's event processor requires "hive"
    "metastore.catalog.default": "hive",
}

ALIAS_TO_KEY = {alias: key.name for key in KEYS.values() for alias in key.aliases}


