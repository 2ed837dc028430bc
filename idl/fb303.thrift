// fb303 base service, wire-compatible with the one Hive's metastore extends.
// Only the ids and types matter on the wire; this file is ours.
// Regenerate the Python code with scripts/regen_thrift.sh after any edit.

namespace py hms_txn.wire.thrift_gen.fb303

// Health of a service as reported by getStatus().
enum fb_status {
  DEAD = 0,
  STARTING = 1,
  ALIVE = 2,
  STOPPING = 3,
  STOPPED = 4,
  WARNING = 5,
}

service FacebookService {
  string getName()
  // pyiceberg looks at this to pick its metastore client flavour
  string getVersion()
  fb_status getStatus()
  string getStatusDetails()

  map<string, i64> getCounters()
  i64 getCounter(1: string key)

  void setOption(1: string key, 2: string value)
  string getOption(1: string key)
  map<string, string> getOptions()

  string getCpuProfile(1: i32 profileDurationInSec)

  // unix seconds at which the server came up
  i64 aliveSince()

  oneway void reinitialize()
  // sent by HiveMetaStoreClient.close(): no reply, and we never act on it
  oneway void shutdown()
}
