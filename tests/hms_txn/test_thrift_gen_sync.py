"""The committed Thrift bindings match idl/, and idl/ matches the Hive wire format.

* ``test_generated_code_is_in_sync`` regenerates hms_txn/wire/thrift_gen/ into a temp dir
  with scripts/regen_thrift.sh and compares it byte for byte with the committed copy.
* The other tests pin ids, types, requiredness and defaults that Hive clients rely
  on (see shared/spec/hms-wire-facts.md), so a mis-edit of the IDL is caught even
  when the generated code was regenerated along with it.
"""

from __future__ import annotations

import filecmp
import importlib
import inspect
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.requirements import require
from thrift.protocol import TBinaryProtocol
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TType
from thrift.transport import TTransport

from hms_txn.wire.thrift_gen.fb303 import FacebookService
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore as svc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as tt

ROOT = Path(__file__).resolve().parents[2]
GEN_DIR = ROOT / "hms_txn" / "wire" / "thrift_gen"
SCRIPT = ROOT / "scripts" / "regen_thrift.sh"


def _tree(base: Path) -> set[str]:
    return {
        p.relative_to(base).as_posix()
        for p in base.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_generated_code_is_in_sync(tmp_path):
    require(shutil.which("thrift") is not None,
            "the thrift compiler is not installed (CI installs Debian's thrift-compiler)")
    out = tmp_path / "thrift_gen"
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr

    generated, committed = _tree(out), _tree(GEN_DIR)
    assert generated == committed, (
        f"file sets differ: only generated {sorted(generated - committed)}, "
        f"only committed {sorted(committed - generated)}; run scripts/regen_thrift.sh"
    )
    stale = [
        rel for rel in sorted(generated)
        if not filecmp.cmp(out / rel, GEN_DIR / rel, shallow=False)
    ]
    version = subprocess.run(["thrift", "--version"], capture_output=True, text=True).stdout
    assert not stale, (
        f"hms_txn/wire/thrift_gen is out of date with idl/ for {stale}: run "
        f"scripts/regen_thrift.sh (compiler here: {version.strip()}; the committed "
        f"files name the version they were made with in their header)"
    )


# ------------------------------------------------------------ import surface

def test_client_and_processor_import():
    assert issubclass(svc.Iface, FacebookService.Iface)
    assert issubclass(svc.Client, FacebookService.Client)
    assert issubclass(svc.Processor, FacebookService.Processor)
    for name in ("get_all_databases", "open_txns", "get_valid_write_ids", "lock",
                 "check_lock", "commit_txn", "get_table_req", "getVersion", "shutdown"):
        assert hasattr(svc.Client, name), name
    # fb303 shutdown is oneway: no result struct, the client never waits
    assert not hasattr(FacebookService, "shutdown_result")
    assert not hasattr(FacebookService, "reinitialize_result")
    assert hasattr(FacebookService, "getVersion_result")


def test_in_memory_round_trip_through_processor():
    class Handler:
        def get_all_databases(self):
            return ["default", "sales"]

        def get_table(self, dbname, tbl_name):
            raise tt.NoSuchObjectException(message=f"{dbname}.{tbl_name} not found")

    def call(send, recv):
        req = TTransport.TMemoryBuffer()
        client = svc.Client(TBinaryProtocol.TBinaryProtocol(req))
        send(client)
        resp = TTransport.TMemoryBuffer()
        svc.Processor(Handler()).process(
            TBinaryProtocol.TBinaryProtocol(TTransport.TMemoryBuffer(req.getvalue())),
            TBinaryProtocol.TBinaryProtocol(resp),
        )
        client._iprot = TBinaryProtocol.TBinaryProtocol(TTransport.TMemoryBuffer(resp.getvalue()))
        return recv(client)

    assert call(lambda c: c.send_get_all_databases(),
                lambda c: c.recv_get_all_databases()) == ["default", "sales"]
    with pytest.raises(tt.NoSuchObjectException, match="db.t not found"):
        call(lambda c: c.send_get_table("db", "t"), lambda c: c.recv_get_table())


# ------------------------------------------------------------- struct fields

def _field(cls, fid):
    spec = cls.thrift_spec
    entry = spec[fid] if fid < len(spec) else None
    assert entry is not None, f"{cls.__name__} has no field {fid}"
    return entry


def _assert_required(cls, **kwargs):
    """validate() must reject the struct with every other field set."""
    for missing in kwargs:
        obj = cls(**{k: v for k, v in kwargs.items() if k != missing})
        with pytest.raises(TProtocolException, match=missing):
            obj.validate()
    cls(**kwargs).validate()


def test_get_open_txns_response_fields():
    assert _field(tt.GetOpenTxnsResponse, 1)[:3] == (1, TType.I64, "txn_high_water_mark")
    assert _field(tt.GetOpenTxnsResponse, 2)[:3] == (2, TType.LIST, "open_txns")
    assert _field(tt.GetOpenTxnsResponse, 3)[:3] == (3, TType.I64, "min_open_txn")
    assert _field(tt.GetOpenTxnsResponse, 4)[:4] == (4, TType.STRING, "abortedBits", "BINARY")
    _assert_required(tt.GetOpenTxnsResponse, txn_high_water_mark=1, open_txns=[],
                     abortedBits=b"")


def test_table_valid_write_ids_fields():
    assert _field(tt.TableValidWriteIds, 4)[:3] == (4, TType.I64, "minOpenWriteId")
    assert _field(tt.TableValidWriteIds, 5)[:4] == (5, TType.STRING, "abortedBits", "BINARY")
    _assert_required(tt.TableValidWriteIds, fullTableName="d.t", writeIdHighWaterMark=0,
                     invalidWriteIds=[], abortedBits=b"")


def test_get_table_request_fields():
    assert tt.GetTableRequest.thrift_spec[5] is None  # id 5 is unused upstream
    assert _field(tt.GetTableRequest, 6)[:3] == (6, TType.STRING, "validWriteIdList")
    assert _field(tt.GetTableRequest, 11)[:3] == (11, TType.I64, "id")
    assert tt.GetTableRequest().id == -1


def test_lock_component_fields():
    assert _field(tt.LockComponent, 6) == (6, TType.I32, "operationType", None, 5)
    assert tt.LockComponent().operationType == tt.DataOperationType.UNSET == 5
    assert _field(tt.LockComponent, 7)[:3] == (7, TType.BOOL, "isTransactional")
    assert _field(tt.LockComponent, 8)[:3] == (8, TType.BOOL, "isDynamicPartitionWrite")


def test_txn_structs_requiredness_and_defaults():
    _assert_required(tt.TxnInfo, id=1, state=tt.TxnState.OPEN, user="u", hostname="h")
    assert tt.TxnInfo().agentInfo == "Unknown"
    _assert_required(tt.HeartbeatTxnRangeResponse, aborted=set(), nosuch=set())
    assert _field(tt.HeartbeatTxnRangeResponse, 1)[1] == TType.SET
    assert tt.OpenTxnRequest().txn_type == tt.TxnType.DEFAULT
    assert _field(tt.OpenTxnRequest, 7)[:3] == (7, TType.I32, "txn_type")
    assert tt.CommitTxnRequest().exclWriteEnabled is True
    assert _field(tt.AddDynamicPartitions, 2)[:3] == (2, TType.I64, "writeid")
    assert _field(tt.GetValidWriteIdsRequest, 3)[:3] == (3, TType.I64, "writeId")
    assert tt.ShowCompactResponseElement().hadoopJobId == "None"
    assert _field(tt.NotificationEvent, 2)[:3] == (2, TType.I32, "eventTime")
    assert _field(tt.Table, 19) == (19, TType.I64, "writeId", None, -1)
    assert _field(tt.Table, 18) == (18, TType.I32, "ownerType", None, tt.PrincipalType.USER)


def test_hive4_request_fields_clients_send():
    """Fields of request structs that Hive 4, Trino and Impala fill in."""
    S, L, B, I64 = TType.STRING, TType.LIST, TType.BOOL, TType.I64
    # the processor capabilities Hive 4 sends with every table read
    assert [_field(tt.GetTableRequest, i)[:3] for i in (8, 9, 10)] == [
        (8, L, "processorCapabilities"), (9, S, "processorIdentifier"), (10, S, "engine")]
    assert _field(tt.GetTableRequest, 8)[3] == (S, "UTF8", False)
    assert tt.GetTableRequest().engine is None  # 4.0.x: no default (newer Hive: "hive")

    assert [_field(tt.GetPartitionsByNamesRequest, i)[:3] for i in range(1, 14)] == [
        (1, S, "db_name"), (2, S, "tbl_name"), (3, L, "names"), (4, B, "get_col_stats"),
        (5, L, "processorCapabilities"), (6, S, "processorIdentifier"), (7, S, "engine"),
        (8, S, "validWriteIdList"), (9, B, "getFileMetadata"), (10, I64, "id"),
        (11, B, "skipColumnSchemaForPartition"), (12, S, "includeParamKeyPattern"),
        (13, S, "excludeParamKeyPattern")]
    assert tt.GetPartitionsByNamesRequest().id == -1
    _assert_required(tt.GetPartitionsByNamesRequest, db_name="d", tbl_name="t")

    # event filters: 3 is 4.0.x, 4-6 newer (server-side filtering)
    assert [_field(tt.NotificationEventRequest, i)[:3] for i in range(3, 7)] == [
        (3, L, "eventTypeSkipList"), (4, S, "catName"), (5, S, "dbName"), (6, L, "tableNames")]
    assert _field(tt.NotificationEventsCountRequest, 6)[:3] == (6, L, "tableNames")

    assert [_field(tt.TruncateTableRequest, i)[:3] for i in range(1, 7)] == [
        (1, S, "dbName"), (2, S, "tableName"), (3, L, "partNames"), (4, I64, "writeId"),
        (5, S, "validWriteIdList"), (6, TType.STRUCT, "environmentContext")]
    assert tt.TruncateTableRequest().writeId == -1
    _assert_required(tt.TruncateTableRequest, dbName="d", tableName="t")

    assert [_field(tt.SetPartitionsStatsRequest, i)[:3] for i in range(1, 6)] == [
        (1, L, "colStats"), (2, B, "needMerge"), (3, I64, "writeId"),
        (4, S, "validWriteIdList"), (5, S, "engine")]
    assert tt.SetPartitionsStatsRequest().writeId == -1
    _assert_required(tt.SetPartitionsStatsRequest, colStats=[], engine="hive")

    assert [_field(tt.WriteNotificationLogBatchRequest, i)[:3] for i in range(1, 5)] == [
        (1, S, "catalog"), (2, S, "db"), (3, S, "table"), (4, L, "requestList")]
    _assert_required(tt.WriteNotificationLogBatchRequest, catalog="hive", db="d", table="t",
                     requestList=[])

    assert _field(tt.AddPartitionsRequest, 10)[:3] == (10, TType.STRUCT, "environmentContext")
    assert _field(tt.CreateDatabaseRequest, 11)[:3] == (11, S, "type")  # 4.0.x: a string
    assert _field(tt.AlterISchemaRequest, 3)[:3] == (3, TType.STRUCT, "newSchema")
    assert tt.AlterISchemaRequest.thrift_spec[2] is None


def test_hive4_replies_clients_validate():
    """Required fields a Java client checks when it reads our reply."""
    _assert_required(tt.GetFileMetadataResult, metadata={}, isSupported=False)
    _assert_required(tt.GetFileMetadataByExprResult, metadata={}, isSupported=False)
    _assert_required(tt.CacheFileMetadataResult, isSupported=False)
    _assert_required(tt.WMFullResourcePlan, plan=tt.WMResourcePlan(name="p"), pools=[])
    _assert_required(tt.ReplicationMetricList, replicationMetricList=[])
    _assert_required(tt.CompactionMetricsDataStruct, dbname="d", tblname="t",
                     type=tt.CompactionMetricsMetricType.NUM_DELTAS, metricvalue=1,
                     version=0, threshold=1)
    assert _field(tt.WMNullableResourcePlan, 4)[:3] == (4, TType.I32, "queryParallelism")
    assert tt.WMNullableResourcePlan.thrift_spec[3] is None


def test_enum_values():
    assert tt.LockType.EXCL_WRITE == 4
    assert tt.LockState.NOT_ACQUIRED == 4
    assert tt.CompactionType.REBALANCE == 3
    assert (tt.DataOperationType.UNSET, tt.DataOperationType.NO_TXN) == (5, 6)
    assert tt.TxnType.DEFAULT == 0 and tt.TxnType.REBALANCE_COMPACTION == 6
    assert tt.TxnState._VALUES_TO_NAMES == {1: "COMMITTED", 2: "ABORTED", 3: "OPEN"}
    assert tt.CompactionType.ABORT_TXN_CLEANUP == 4
    # declared without values: they count from 0
    assert tt.CompactionMetricsMetricType._VALUES_TO_NAMES == {
        0: "NUM_OBSOLETE_DELTAS", 1: "NUM_DELTAS", 2: "NUM_SMALL_DELTAS"}
    assert tt.SchemaVersionState.DELETED == 8 and tt.WMResourcePlanStatus.DISABLED == 3
    assert tt.FileMetadataExprType.ORC_SARG == 1


# ------------------------------------------------------------ method shapes

def _ids(cls):
    return [(e[0], e[2], e[3][0].__name__ if e[1] == TType.STRUCT else e[1])
            for e in cls.thrift_spec if e is not None]


def test_method_arguments_and_exceptions():
    assert _ids(svc.get_table_args) == [(1, "dbname", TType.STRING), (2, "tbl_name", TType.STRING)]
    assert _ids(svc.get_partitions_result)[1:] == [
        (1, "o1", "NoSuchObjectException"), (2, "o2", "MetaException")]
    assert _ids(svc.get_partitions_by_names_result)[1:] == [
        (1, "o1", "MetaException"), (2, "o2", "NoSuchObjectException")]
    assert _ids(svc.commit_txn_result) == [
        (1, "o1", "NoSuchTxnException"), (2, "o2", "TxnAbortedException")]
    assert _ids(svc.allocate_table_write_ids_result)[1:] == [
        (1, "o1", "NoSuchTxnException"), (2, "o2", "TxnAbortedException"),
        (3, "o3", "MetaException")]
    assert _ids(svc.check_lock_result)[1:] == [
        (1, "o1", "NoSuchTxnException"), (2, "o2", "TxnAbortedException"),
        (3, "o3", "NoSuchLockException")]
    assert _ids(svc.unlock_result) == [
        (1, "o1", "NoSuchLockException"), (2, "o2", "TxnOpenException")]
    assert _ids(svc.heartbeat_result) == [
        (1, "o1", "NoSuchLockException"), (2, "o2", "NoSuchTxnException"),
        (3, "o3", "TxnAbortedException")]
    assert _ids(svc.drop_table_with_environment_context_args)[3] == (
        4, "environment_context", "EnvironmentContext")
    assert _ids(svc.drop_table_result) == [
        (1, "o1", "NoSuchObjectException"), (2, "o3", "MetaException")]
    assert _ids(svc.get_config_value_result)[1:] == [(1, "o1", "ConfigValSecurityException")]
    assert _ids(svc.get_partitions_args)[2] == (3, "max_parts", TType.I16)
    assert svc.get_partitions_args().max_parts == -1
    assert _ids(svc.get_open_txns_args) == []
    assert _ids(svc.get_table_objects_by_name_result) == [(0, "success", TType.LIST)]
    # 4.0.x numbers them 2 and 3 (pyiceberg's older binding sends ids -1 and -2)
    assert _ids(svc.drop_dataconnector_args) == [
        (1, "name", TType.STRING), (2, "ifNotExists", TType.BOOL),
        (3, "checkReferences", TType.BOOL)]
    assert _ids(svc.drop_table_req_result) == [
        (1, "o1", "NoSuchObjectException"), (2, "o3", "MetaException")]
    assert _ids(svc.get_properties_result)[1:] == [
        (1, "e1", "MetaException"), (2, "e2", "NoSuchObjectException")]
    assert _ids(svc.get_active_resource_plan_result)[1:] == [(1, "o2", "MetaException")]
    assert _ids(svc.submit_for_cleanup_args) == [
        (1, "o1", "CompactionRequest"), (2, "o2", TType.I64), (3, "o3", TType.I64)]
    # declare no exceptions: only a success field
    for method in ("find_columns_with_stats", "get_file_metadata", "cache_file_metadata"):
        assert [e[1] for e in _ids(getattr(svc, f"{method}_result"))] == ["success"], method
    assert _ids(svc.set_hadoop_jobid_result) == []
    assert _ids(svc.get_partitions_by_names_req_result)[1:] == [
        (1, "o1", "MetaException"), (2, "o2", "NoSuchObjectException")]


# ------------------------------------- cross-check with an independent binding

def _norm(args):
    if isinstance(args, (list, tuple)) and len(args) == 2 and isinstance(args[0], type):
        return args[0].__name__
    if isinstance(args, (list, tuple)):
        return tuple(_norm(a) for a in args if not isinstance(a, bool))
    return None if args in ("UTF8", "BINARY") else args


def _fields(cls):
    return {e[0]: (e[1], e[2], _norm(e[3]), e[4])
            for e in (cls.thrift_spec or ()) if e is not None}


def _required(cls) -> set[str]:
    """Names of the fields the generated validate() insists on."""
    validate = getattr(cls, "validate", None)
    if validate is None:
        return set()
    return set(re.findall(r"Required field (\w+) is unset", inspect.getsource(validate)))


def _hive4_bindings():
    try:
        their_tt = importlib.import_module("hive_metastore.ttypes")
        their_svc = importlib.import_module("hive_metastore.ThriftHiveMetastore")
    except ImportError:
        their_tt = their_svc = None
    require(their_svc is not None, "pyiceberg's hive_metastore bindings are not installed")
    require(hasattr(their_svc, "get_open_txns_req_args"), "installed hive_metastore bindings are not Hive 4")
    return their_tt, their_svc


def test_matches_pyiceberg_hive4_binding():
    """pyiceberg bundles bindings generated from upstream Hive 4: every struct, method
    argument list and result it declares, we declare too, with the same field ids, names,
    types, defaults and requiredness."""
    their_tt, their_svc = _hive4_bindings()
    mismatches = []
    compared = 0
    for mod_ours, mod_theirs in ((tt, their_tt), (svc, their_svc)):
        for name in dir(mod_theirs):
            theirs, ours = getattr(mod_theirs, name), getattr(mod_ours, name, None)
            if not isinstance(theirs, type) or not hasattr(theirs, "thrift_spec"):
                continue
            if ours is None:
                mismatches.append((name, "not declared by us"))
                continue
            compared += 1
            a, b = _fields(ours), _fields(theirs)
            # a field they have and we lack would silently drop data
            mismatches += [(name, fid, a.get(fid), b[fid]) for fid in sorted(b)
                           if a.get(fid) != b[fid]]
            if _required(ours) != _required(theirs):
                mismatches.append((name, "required", _required(ours), _required(theirs)))
    assert not mismatches, mismatches
    assert compared > 800  # structs and every method's args and result
    theirs_methods = {m for m in vars(their_svc.Iface) if not m.startswith("_")}
    assert theirs_methods <= set(vars(svc.Iface)), theirs_methods - set(vars(svc.Iface))


def test_declares_hive4_methods_newer_than_pyiceberg():
    """4.0.x methods that pyiceberg's older binding lacks, and the newer request-style
    methods the IDL declares on purpose (see its header)."""
    for method in ("abort_Compactions", "add_write_ids_to_min_history", "get_properties",
                   "set_properties", "submit_for_cleanup",
                   "alter_database_req", "alter_dataconnector_req", "append_partition_req",
                   "create_database_req", "create_dataconnector_req", "drop_dataconnector_req",
                   "drop_partition_req", "drop_table_req", "fetch_partition_names_req",
                   "get_partitions_by_filter_req"):
        assert hasattr(svc.Iface, method), method
        assert hasattr(svc, f"{method}_args"), method
