// hms-txn: alternative shapes of a few Hive Metastore calls, for the server side only.
//
// Each service below declares a method of hive_metastore.thrift again, with the same
// name, argument ids, declared exceptions and the same field ids and types in its structs,
// so on the wire it is that method. What differs is only what the generated Python code
// does with it; the server dispatches the method to these processors instead of the main
// ones (hms_txn/wire/dispatch.py):
//
// * FieldPresence: two optional booleans whose IDL defaults would hide whether a client
//   sent them. Hive's server tells "not sent" from "sent with the default value" and old
//   clients rely on it (LockComponent.isTransactional: not sent means a pre-3 client whose
//   write components must be recorded; CommitTxnRequest.exclWriteEnabled: not sent means
//   a 3.x client, which expects the write-write conflict check). Python's generated
//   constructors fill in IDL defaults, so these copies declare no default: a field that
//   was not sent reads as None.
// * Hive2OpenTxns: get_open_txns answered in Hive 2.x's shape (open_txns as a set<i64>,
//   no abortedBits), for servers whose transactional clients are all Hive 2.x
//   (hms_txn.hive2.open.txns.as.set).

include "hive_metastore.thrift"

namespace py hms_txn.wire.thrift_gen.wire_variants

struct LockComponentPresence {
  1: required hive_metastore.LockType type,
  2: required hive_metastore.LockLevel level,
  3: required string dbname,
  4: optional string tablename,
  5: optional string partitionname,
  6: optional hive_metastore.DataOperationType operationType = hive_metastore.DataOperationType.UNSET,
  7: optional bool isTransactional,
  8: optional bool isDynamicPartitionWrite = false,
}

struct LockRequestPresence {
  1: required list<LockComponentPresence> component,
  2: optional i64 txnid,
  3: required string user,
  4: required string hostname,
  5: optional string agentInfo = "Unknown",
  6: optional bool zeroWaitReadEnabled = false,
  7: optional bool exclusiveCTAS = false,
  8: optional bool locklessReadsEnabled = false,
}

struct CommitTxnRequestPresence {
  1: required i64 txnid,
  2: optional string replPolicy,
  3: optional list<hive_metastore.WriteEventInfo> writeEventInfos,
  4: optional hive_metastore.ReplLastIdInfo replLastIdInfo,
  5: optional hive_metastore.CommitTxnKeyValue keyValue,
  6: optional bool exclWriteEnabled,
  7: optional hive_metastore.TxnType txn_type,
}

service FieldPresence {
  hive_metastore.LockResponse lock(1: LockRequestPresence rqst)
      throws (1: hive_metastore.NoSuchTxnException o1, 2: hive_metastore.TxnAbortedException o2)
  void commit_txn(1: CommitTxnRequestPresence rqst)
      throws (1: hive_metastore.NoSuchTxnException o1, 2: hive_metastore.TxnAbortedException o2)
}

struct GetOpenTxnsResponseHive2 {
  1: required i64 txn_high_water_mark,
  2: required set<i64> open_txns,
  3: optional i64 min_open_txn,
}

service Hive2OpenTxns {
  GetOpenTxnsResponseHive2 get_open_txns()
}
