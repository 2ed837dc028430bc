"""PostgreSQL's transaction functions (hms_txn.store.pg_functions): every transaction call is
one statement, in autocommit (no BEGIN, SET LOCAL or COMMIT); the functions are installed,
replaced and refused by version with the schema; the messages the database completes are
the text Hive 4's builders (hms_txn.domain.events.event_messages) make for the same values.

That the calls answer as the Python path does is tests/hms_txn/test_txn_equivalence.py's
(random call sequences on both backends) and the transaction suites', which run on both.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import event

from hms_txn.common.config import GZIP_MESSAGE_FORMAT, JSON_MESSAGE_FORMAT, Config
from hms_txn.common.errors import TxnAborted
from hms_txn.domain.txn import compaction_queue
from hms_txn.domain.events.event_messages import formats, transactions as tm
from hms_txn.domain.events.event_messages.base import MessageContext
from hms_txn.domain.events.event_messages.templates import Templates
from hms_txn.server.metastore import Metastore
from hms_txn.service.compactor.external_compactor import ExternalCompactorService
from hms_txn.store import Store, ensure_schema, pg_functions
from hms_txn.store.migrations import SchemaError
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_ms(tmp_path, postgres):
    ms = Metastore(Config({"hive.metastore.warehouse.dir": str(tmp_path / "wh"),
                           "javax.jdo.option.ConnectionURL": postgres.create_database()}),
                   data_dir=str(tmp_path))
    ms.start()
    yield ms
    ms.close()


class _Sent:
    """What this thread sends on the store's engine: each statement with whether its
    connection was in autocommit, and the transactions begun and committed."""

    def __init__(self, engine):
        self.statements: list[tuple[str, bool]] = []
        self.transactions = 0
        self._me = threading.get_ident()
        self._engine = engine
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)

    def _statement(self, conn, cursor, statement, *_args) -> None:
        if threading.get_ident() == self._me:
            self.statements.append((statement, conn.connection.driver_connection.autocommit))

    def _commit(self, conn) -> None:
        if (threading.get_ident() == self._me
                and not conn.connection.driver_connection.autocommit):
            self.transactions += 1

    def one(self, call, *args):
        """Run ``call(*args)``; assert it sent one statement in autocommit and began no
        transaction; that statement's SQL."""
        self.statements.clear()
        self.transactions = 0
        try:
            call(*args)
        finally:
            sent, self.statements = self.statements, []
        assert len(sent) == 1 and sent[0][1], sent
        assert self.transactions == 0
        return sent[0][0]


def _lock_request(txn: int, ltype=t.LockType.SHARED_WRITE, op=t.DataOperationType.INSERT,
                  table="t"):
    return t.LockRequest(component=[t.LockComponent(
        type=ltype, level=t.LockLevel.TABLE, dbname="db", tablename=table, operationType=op,
        isTransactional=True)], txnid=txn, user="u", hostname="h")


def test_each_transaction_call_is_one_statement(pg_ms):
    """Issue 42's calls, each one round trip: the statement calls its function."""
    ms = pg_ms
    txn, locks = ms.txn_service, ms.lock_service
    compactor = ExternalCompactorService(ms.config, ms.units)
    sent = _Sent(ms.store.engine)
    answers = {}

    def call(name, fn, *args):
        sql = sent.one(lambda: answers.__setitem__(name, fn(*args)))
        assert sql.startswith("SELECT * FROM hms_"), sql

    call("open", txn.open_txns, t.OpenTxnRequest(num_txns=3, user="u", hostname="h"))
    a, b, c = answers["open"].txn_ids
    call("alloc", txn.allocate_table_write_ids,
         t.AllocateTableWriteIdsRequest(dbName="db", tableName="t", txnIds=[a]))
    call("lock", locks.lock, _lock_request(a))
    assert answers["lock"].state == t.LockState.ACQUIRED
    call("wait", locks.lock, _lock_request(b, t.LockType.EXCLUSIVE, t.DataOperationType.UPDATE))
    assert answers["wait"].state == t.LockState.WAITING
    call("check", locks.check_lock, t.CheckLockRequest(lockid=answers["wait"].lockid))
    call("heartbeat", txn.heartbeat, t.HeartbeatRequest(txnid=c))
    call("range", txn.heartbeat_txn_range, t.HeartbeatTxnRangeRequest(min=a, max=c + 5))
    call("open_txns", txn.get_open_txns)
    call("open_txns_req", txn.get_open_txns_req, t.GetOpenTxnsRequest(excludeTxnTypes=[]))
    call("info", txn.get_open_txns_info)
    call("valid", txn.get_valid_write_ids, t.GetValidWriteIdsRequest(fullTableNames=["db.t"]))
    call("commit", txn.commit_txn, t.CommitTxnRequest(txnid=a))
    call("abort", txn.abort_txn, t.AbortTxnRequest(txnid=b))
    call("aborts", txn.abort_txns, t.AbortTxnsRequest(txn_ids=[c, c + 1]))
    ms.units.write(lambda conn: compaction_queue.compact(conn, "db", "t", None,
                                                         compaction_queue.CompactionType.MAJOR))
    call("claim", compactor.find_next_compact2, t.FindNextCompactRequest(workerId="w-1"))
    assert answers["claim"].ci.tablename == "t"
    # a refused call too: the function raised, nothing else was sent
    with pytest.raises(TxnAborted):
        call("refused", txn.commit_txn, t.CommitTxnRequest(txnid=b))
    # with the reader's snapshot (what HiveServer2, Trino and Impala send) too
    call("valid_given", txn.get_valid_write_ids, t.GetValidWriteIdsRequest(
        fullTableNames=["db.t"], validTxnList=f"{c}:{9**18}::{b}"))
    assert answers["valid"].tblValidWriteIds[0].writeIdHighWaterMark == 1
    assert answers["valid_given"].tblValidWriteIds[0].writeIdHighWaterMark == 1


def _ctx(message_format: str) -> MessageContext:
    return MessageContext(lambda kind, doc: "{}", server="thrift://a:9083,thrift://b:9083",
                          service_principal="hive/_HOST@EX\u00c4MPLE",
                          clock=lambda: 1764340000.0, message_format=message_format)


# names a client may send, JSON-escaped alike by Python and PostgreSQL or not
_NAMES = ["plain", 'quo"te\\back/slash', "tab\tnew\nline\x01ctl", "\u00fcn\u00efc\u00f8de \u2603"]


@pytest.mark.parametrize("message_format", [JSON_MESSAGE_FORMAT, GZIP_MESSAGE_FORMAT])
def test_messages_the_database_completes_are_the_builders_text(postgres, message_format):
    """Each template, filled and encoded by the database, decodes to the JSON text of the
    Hive 4 builder for the same values (and for json-0.2 is that text, byte for byte)."""
    ctx = _ctx(message_format)
    templates = Templates(ctx)
    store = Store(postgres.create_database())
    try:
        ensure_schema(store)
        cases = [(templates.open_txns(), ["7", "9"], tm.open_txns(ctx, 7, 9)),
                 (templates.commit_txn(), ["12"], tm.commit_txn(ctx, 12)),
                 (templates.abort_txn(), ["13"], tm.abort_txn(ctx, 13))]
        for name in _NAMES:
            cases.append((templates.alloc_write_ids(name, name + "2"), ["[4,5]", "[1,2]"],
                          tm.alloc_write_ids(ctx, name, name + "2", [(4, 1), (5, 2)])))
            for part in (name, None):
                cases.append((templates.commit_compaction(), None,
                              tm.commit_compaction(ctx, 21, 3, "MINOR", name, name, part)))
        with store.write() as conn:
            for parts, values, entry in cases:
                if values is None:      # string holes: filled by the database's JSON
                    message = entry.message
                    values = conn.exec_driver_sql(
                        "SELECT ARRAY['21', '3', hms_json_text(%(t)s), hms_json_text(%(d)s), "
                        "hms_json_text(%(n)s), hms_json_text(%(p)s)]",
                        {"t": "MINOR", "d": message["dbname"], "n": message["tableName"],
                         "p": message["partName"]}).scalar()
                stored = conn.exec_driver_sql(
                    "SELECT hms_encode(hms_fill(%(parts)s, %(vals)s), %(fmt)s)",
                    {"parts": parts, "vals": values, "fmt": message_format}).scalar()
                expected = formats.to_json(entry.message)
                assert formats.decode_text(stored, message_format) == expected
                if message_format == JSON_MESSAGE_FORMAT:
                    assert stored == formats.encode(entry.message, message_format)
    finally:
        store.dispose()


def test_functions_are_installed_replaced_by_version_and_newer_ones_refused(postgres):
    store = Store(postgres.create_database())
    try:
        ensure_schema(store)
        with store.write() as conn:
            assert pg_functions.installed_version(conn) == pg_functions.FUNCTIONS_VERSION
            # an older version, with a function it had and this one has not
            conn.exec_driver_sql("CREATE OR REPLACE FUNCTION hms_functions_version() "
                                 "RETURNS int LANGUAGE sql AS $$ SELECT 0 $$")
            conn.exec_driver_sql("CREATE FUNCTION hms_obsolete() RETURNS int "
                                 "LANGUAGE sql AS $$ SELECT 1 $$")
        with pytest.raises(SchemaError, match="upgrade-schema"):
            ensure_schema(store, auto_upgrade=False)
        ensure_schema(store)
        with store.write() as conn:
            assert pg_functions.installed_version(conn) == pg_functions.FUNCTIONS_VERSION
            names = set(conn.exec_driver_sql(
                "SELECT proname FROM pg_proc WHERE proname LIKE 'hms\\_%%'").scalars())
            assert "hms_obsolete" not in names and "hms_open_txns" in names
            conn.exec_driver_sql(
                f"CREATE OR REPLACE FUNCTION hms_functions_version() RETURNS int LANGUAGE sql "
                f"AS $$ SELECT {pg_functions.FUNCTIONS_VERSION + 1} $$")
        with pytest.raises(SchemaError, match="newer"):
            ensure_schema(store)
    finally:
        store.dispose()
