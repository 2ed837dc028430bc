// hms-txn: the Hive Metastore Thrift interface, written for this project.
//
// Wire compatibility is the only goal: every method name, argument id and type,
// result type, declared exception id, struct field id, type, requiredness and
// default below matches the Apache Hive 4.x metastore interface (Hive 3.1 where
// 4.x differs in a way old clients depend on, noted inline).  Anything Hive
// declares that this project does not serve is simply left out: callers get
// TApplicationException(UNKNOWN_METHOD) for those.
//
// Do not renumber or re-type anything. Regenerate the Python code with
// scripts/regen_thrift.sh after every edit; tests/hms_txn/test_thrift_gen_sync.py
// fails when hms_txn/thrift_gen/ is out of date.

include "fb303.thrift"

namespace py hms_txn.wire.thrift_gen.hive_metastore

// ---------------------------------------------------------------- constants

const string DDL_TIME = "transient_lastDdlTime"
const i8 ACCESSTYPE_NONE = 1
const i8 ACCESSTYPE_READONLY = 2
const i8 ACCESSTYPE_WRITEONLY = 4
const i8 ACCESSTYPE_READWRITE = 8

const string HIVE_FILTER_FIELD_OWNER = "hive_filter_field_owner__"
const string HIVE_FILTER_FIELD_PARAMS = "hive_filter_field_params__"
const string HIVE_FILTER_FIELD_LAST_ACCESS = "hive_filter_field_last_access__"

// well-known table / partition parameter keys
const string IS_ARCHIVED = "is_archived"
const string ORIGINAL_LOCATION = "original_location"
const string IS_IMMUTABLE = "immutable"
const string META_TABLE_COLUMNS = "columns"
const string META_TABLE_COLUMN_TYPES = "columns.types"
const string BUCKET_FIELD_NAME = "bucket_field_name"
const string BUCKET_COUNT = "bucket_count"
const string FIELD_TO_DIMENSION = "field_to_dimension"
const string IF_PURGE = "ifPurge"
const string META_TABLE_NAME = "name"
const string META_TABLE_DB = "db"
const string META_TABLE_LOCATION = "location"
const string META_TABLE_SERDE = "serde"
const string META_TABLE_PARTITION_COLUMNS = "partition_columns"
const string META_TABLE_PARTITION_COLUMN_TYPES = "partition_columns.types"
const string FILE_INPUT_FORMAT = "file.inputformat"
const string FILE_OUTPUT_FORMAT = "file.outputformat"
const string META_TABLE_STORAGE = "storage_handler"
const string TABLE_IS_TRANSACTIONAL = "transactional"
const string NO_AUTO_COMPACT = "no_auto_compaction"
const string TABLE_TRANSACTIONAL_PROPERTIES = "transactional_properties"
const string TABLE_BUCKETING_VERSION = "bucketing_version"
const string DRUID_CONFIG_PREFIX = "druid."
const string JDBC_CONFIG_PREFIX = "hive.sql."
const string TABLE_IS_CTAS = "created_with_ctas"
const string TABLE_IS_CTLT = "created_with_ctlt"
const string PARTITION_TRANSFORM_SPEC = "partition_transform_spec"
const string NO_CLEANUP = "no_cleanup"
const string CTAS_LEGACY_CONFIG = "create_table_as_external"
const string DEFAULT_TABLE_TYPE = "defaultTableType"
const string TXN_ID = "txnId"
const string WRITE_ID = "writeId"
const string EXPECTED_PARAMETER_KEY = "expected_parameter_key"
const string EXPECTED_PARAMETER_VALUE = "expected_parameter_value"

// -------------------------------------------------------------------- enums

enum HiveObjectType {
  GLOBAL = 1,
  DATABASE = 2,
  TABLE = 3,
  PARTITION = 4,
  COLUMN = 5,
  DATACONNECTOR = 6,
}

enum PrincipalType {
  USER = 1,
  ROLE = 2,
  GROUP = 3,
}

enum PartitionEventType {
  LOAD_DONE = 1,
}

enum TxnState {
  COMMITTED = 1,
  ABORTED = 2,
  OPEN = 3,
}

enum LockLevel {
  DB = 1,
  TABLE = 2,
  PARTITION = 3,
}

enum LockState {
  ACQUIRED = 1,
  WAITING = 2,
  ABORT = 3,
  NOT_ACQUIRED = 4,   // zero-wait requests only (4.x)
}

enum LockType {
  SHARED_READ = 1,
  SHARED_WRITE = 2,
  EXCLUSIVE = 3,
  EXCL_WRITE = 4,     // 4.x
}

enum CompactionType {
  MINOR = 1,
  MAJOR = 2,
  REBALANCE = 3,      // 4.x
}

enum GrantRevokeType {
  GRANT = 1,
  REVOKE = 2,
}

enum DataOperationType {
  SELECT = 1,
  INSERT = 2,
  UPDATE = 3,
  DELETE = 4,
  UNSET = 5,          // what old clients implicitly send
  NO_TXN = 6,
}

// DML events a client may ask the metastore to record
enum EventRequestType {
  INSERT = 1,
  UPDATE = 2,
  DELETE = 3,
}

enum SerdeType {
  HIVE = 1,
  SCHEMA_REGISTRY = 2,
}

enum DatabaseType {
  NATIVE = 1,
  REMOTE = 2,
}

enum FunctionType {
  JAVA = 1,
}

enum ResourceType {
  JAR = 1,
  FILE = 2,
  ARCHIVE = 3,
}

enum TxnType {
  DEFAULT = 0,
  REPL_CREATED = 1,
  READ_ONLY = 2,
  COMPACTION = 3,
  MATER_VIEW_REBUILD = 4,
  SOFT_DELETE = 5,
  REBALANCE_COMPACTION = 6,
}

// bit flags for GetTablesExtRequest.requestedFields
enum GetTablesExtRequestFields {
  ACCESS_TYPE = 1,
  PROCESSOR_CAPABILITIES = 2,
  ALL = 2147483647,
}

enum ClientCapability {
  TEST_CAPABILITY = 1,
  INSERT_ONLY_TABLES = 2,
}

enum PartitionFilterMode {
  BY_NAMES,
  BY_VALUES,
  BY_EXPR,
}

enum ScheduledQueryMaintenanceRequestType {
  CREATE = 1,
  ALTER = 2,
  DROP = 3,
}

enum QueryState {
  INITED,
  EXECUTING,
  FAILED,
  FINISHED,
  TIMED_OUT,
  AUTO_DISABLED,
}

// ------------------------------------------------------------- basic shapes

struct Version {
  1: string version,
  2: string comments,
}

// one column: name, Hive type string, comment
struct FieldSchema {
  1: string name,
  2: string type,
  3: string comment,
}

// free-form key/values passed along with DDL calls (hooks read them)
struct EnvironmentContext {
  1: map<string, string> properties,
}

struct Type {
  1: string name,
  2: optional string type1,
  3: optional string type2,
  4: optional list<FieldSchema> fields,
}

// ------------------------------------------------------------- constraints

struct SQLPrimaryKey {
  1: string table_db,
  2: string table_name,
  3: string column_name,
  4: i32 key_seq,
  5: string pk_name,
  6: bool enable_cstr,
  7: bool validate_cstr,
  8: bool rely_cstr,
  9: optional string catName,
}

struct SQLForeignKey {
  1: string pktable_db,
  2: string pktable_name,
  3: string pkcolumn_name,
  4: string fktable_db,
  5: string fktable_name,
  6: string fkcolumn_name,
  7: i32 key_seq,
  8: i32 update_rule,
  9: i32 delete_rule,
  10: string fk_name,
  11: string pk_name,
  12: bool enable_cstr,
  13: bool validate_cstr,
  14: bool rely_cstr,
  15: optional string catName,
}

struct SQLUniqueConstraint {
  1: string catName,
  2: string table_db,
  3: string table_name,
  4: string column_name,
  5: i32 key_seq,
  6: string uk_name,
  7: bool enable_cstr,
  8: bool validate_cstr,
  9: bool rely_cstr,
}

struct SQLNotNullConstraint {
  1: string catName,
  2: string table_db,
  3: string table_name,
  4: string column_name,
  5: string nn_name,
  6: bool enable_cstr,
  7: bool validate_cstr,
  8: bool rely_cstr,
}

struct SQLDefaultConstraint {
  1: string catName,
  2: string table_db,
  3: string table_name,
  4: string column_name,
  5: string default_value,
  6: string dc_name,
  7: bool enable_cstr,
  8: bool validate_cstr,
  9: bool rely_cstr,
}

struct SQLCheckConstraint {
  1: string catName,
  2: string table_db,
  3: string table_name,
  4: string column_name,
  5: string check_expression,
  6: string dc_name,
  7: bool enable_cstr,
  8: bool validate_cstr,
  9: bool rely_cstr,
}

struct SQLAllTableConstraints {
  1: optional list<SQLPrimaryKey> primaryKeys,
  2: optional list<SQLForeignKey> foreignKeys,
  3: optional list<SQLUniqueConstraint> uniqueConstraints,
  4: optional list<SQLNotNullConstraint> notNullConstraints,
  5: optional list<SQLDefaultConstraint> defaultConstraints,
  6: optional list<SQLCheckConstraint> checkConstraints,
}

// ------------------------------------------------------ privileges / roles

struct HiveObjectRef {
  1: HiveObjectType objectType,
  2: string dbName,
  3: string objectName,
  4: list<string> partValues,
  5: string columnName,
  6: optional string catName,
}

struct PrivilegeGrantInfo {
  1: string privilege,
  2: i32 createTime,
  3: string grantor,
  4: PrincipalType grantorType,
  5: bool grantOption,
}

struct HiveObjectPrivilege {
  1: HiveObjectRef hiveObject,
  2: string principalName,
  3: PrincipalType principalType,
  4: PrivilegeGrantInfo grantInfo,
  5: string authorizer,
}

struct PrivilegeBag {
  1: list<HiveObjectPrivilege> privileges,
}

// principal name -> grants, per kind of principal
struct PrincipalPrivilegeSet {
  1: map<string, list<PrivilegeGrantInfo>> userPrivileges,
  2: map<string, list<PrivilegeGrantInfo>> groupPrivileges,
  3: map<string, list<PrivilegeGrantInfo>> rolePrivileges,
}

struct GrantRevokePrivilegeRequest {
  1: GrantRevokeType requestType,
  2: PrivilegeBag privileges,
  3: optional bool revokeGrantOption,
}

struct GrantRevokePrivilegeResponse {
  1: optional bool success,
}

struct Role {
  1: string roleName,
  2: i32 createTime,
  3: string ownerName,
}

struct RolePrincipalGrant {
  1: string roleName,
  2: string principalName,
  3: PrincipalType principalType,
  4: bool grantOption,
  5: i32 grantTime,
  6: string grantorName,
  7: PrincipalType grantorPrincipalType,
}

struct GetRoleGrantsForPrincipalRequest {
  1: required string principal_name,
  2: required PrincipalType principal_type,
}

struct GetRoleGrantsForPrincipalResponse {
  1: required list<RolePrincipalGrant> principalGrants,
}

struct GetPrincipalsInRoleRequest {
  1: required string roleName,
}

struct GetPrincipalsInRoleResponse {
  1: required list<RolePrincipalGrant> principalGrants,
}

struct GrantRevokeRoleRequest {
  1: GrantRevokeType requestType,
  2: string roleName,
  3: string principalName,
  4: PrincipalType principalType,
  5: optional string grantor,
  6: optional PrincipalType grantorType,
  7: optional bool grantOption,
}

struct GrantRevokeRoleResponse {
  1: optional bool success,
}

// ------------------------------------------------------ catalogs, databases

struct Catalog {
  1: string name,
  2: optional string description,
  3: string locationUri,
  4: optional i32 createTime,
}

struct CreateCatalogRequest {
  1: Catalog catalog,
}

struct AlterCatalogRequest {
  1: string name,
  2: Catalog newCat,
}

struct GetCatalogRequest {
  1: string name,
}

struct GetCatalogResponse {
  1: Catalog catalog,
}

struct GetCatalogsResponse {
  1: list<string> names,
}

struct DropCatalogRequest {
  1: string name,
}

struct Database {
  1: string name,
  2: string description,
  3: string locationUri,
  4: map<string, string> parameters,
  5: optional PrincipalPrivilegeSet privileges,
  6: optional string ownerName,
  7: optional PrincipalType ownerType,
  8: optional string catalogName,
  9: optional i32 createTime,           // unix seconds
  10: optional string managedLocationUri,
  11: optional DatabaseType type,
  12: optional string connector_name,
  13: optional string remote_dbname,
}

struct GetDatabaseRequest {
  1: optional string name,
  2: optional string catalogName,
  3: optional list<string> processorCapabilities,
  4: optional string processorIdentifier,
}

struct DropDatabaseRequest {
  1: required string name,
  2: optional string catalogName,
  3: required bool ignoreUnknownDb,
  4: required bool deleteData,
  5: required bool cascade,
  6: optional bool softDelete = false,
  7: optional i64 txnId = 0,
  8: optional bool deleteManagedDir = true,
}

// --------------------------------------------------------- storage layout

struct SerDeInfo {
  1: string name,
  2: string serializationLib,
  3: map<string, string> parameters,
  4: optional string description,
  5: optional string serializerClass,
  6: optional string deserializerClass,
  7: optional SerdeType serdeType,
}

// order: 1 ascending, 0 descending
struct Order {
  1: string col,
  2: i32 order,
}

struct SkewedInfo {
  1: list<string> skewedColNames,
  2: list<list<string>> skewedColValues,
  3: map<list<string>, string> skewedColValueLocationMaps,
}

struct StorageDescriptor {
  1: list<FieldSchema> cols,
  2: string location,
  3: string inputFormat,
  4: string outputFormat,
  5: bool compressed,
  6: i32 numBuckets,
  7: SerDeInfo serdeInfo,
  8: list<string> bucketCols,
  9: list<Order> sortCols,
  10: map<string, string> parameters,
  11: optional SkewedInfo skewedInfo,
  12: optional bool storedAsSubDirectories,
}

// materialized-view bookkeeping (SourceTable is declared after Table)
struct CreationMetadata {
  1: required string catName,
  2: required string dbName,
  3: required string tblName,
  4: required set<string> tablesUsed,
  5: optional string validTxnList,
  6: optional i64 materializationTime,
  7: optional list<SourceTable> sourceTables,
}

// -------------------------------------------------------- column statistics

struct BooleanColumnStatsData {
  1: required i64 numTrues,
  2: required i64 numFalses,
  3: required i64 numNulls,
  4: optional binary bitVectors,
}

struct DoubleColumnStatsData {
  1: optional double lowValue,
  2: optional double highValue,
  3: required i64 numNulls,
  4: required i64 numDVs,
  5: optional binary bitVectors,
  6: optional binary histogram,
}

struct LongColumnStatsData {
  1: optional i64 lowValue,
  2: optional i64 highValue,
  3: required i64 numNulls,
  4: required i64 numDVs,
  5: optional binary bitVectors,
  6: optional binary histogram,
}

struct StringColumnStatsData {
  1: required i64 maxColLen,
  2: required double avgColLen,
  3: required i64 numNulls,
  4: required i64 numDVs,
  5: optional binary bitVectors,
}

struct BinaryColumnStatsData {
  1: required i64 maxColLen,
  2: required double avgColLen,
  3: required i64 numNulls,
  4: optional binary bitVectors,
}

// field 3 is declared (and so written) first, as upstream does
struct Decimal {
  3: required i16 scale,
  1: required binary unscaled,
}

struct DecimalColumnStatsData {
  1: optional Decimal lowValue,
  2: optional Decimal highValue,
  3: required i64 numNulls,
  4: required i64 numDVs,
  5: optional binary bitVectors,
  6: optional binary histogram,
}

struct Date {
  1: required i64 daysSinceEpoch,
}

struct DateColumnStatsData {
  1: optional Date lowValue,
  2: optional Date highValue,
  3: required i64 numNulls,
  4: required i64 numDVs,
  5: optional binary bitVectors,
  6: optional binary histogram,
}

struct Timestamp {
  1: required i64 secondsSinceEpoch,
}

struct TimestampColumnStatsData {
  1: optional Timestamp lowValue,
  2: optional Timestamp highValue,
  3: required i64 numNulls,
  4: required i64 numDVs,
  5: optional binary bitVectors,
  6: optional binary histogram,
}

union ColumnStatisticsData {
  1: BooleanColumnStatsData booleanStats,
  2: LongColumnStatsData longStats,
  3: DoubleColumnStatsData doubleStats,
  4: StringColumnStatsData stringStats,
  5: BinaryColumnStatsData binaryStats,
  6: DecimalColumnStatsData decimalStats,
  7: DateColumnStatsData dateStats,
  8: TimestampColumnStatsData timestampStats,
}

struct ColumnStatisticsObj {
  1: required string colName,
  2: required string colType,
  3: required ColumnStatisticsData statsData,
}

struct ColumnStatisticsDesc {
  1: required bool isTblLevel,
  2: required string dbName,
  3: required string tableName,
  4: optional string partName,
  5: optional i64 lastAnalyzed,
  6: optional string catName,
}

struct ColumnStatistics {
  1: required ColumnStatisticsDesc statsDesc,
  2: required list<ColumnStatisticsObj> statsObj,
  3: optional bool isStatsCompliant,
  4: optional string engine,
}

struct AggrStats {
  1: required list<ColumnStatisticsObj> colStats,
  2: required i64 partsFound,
  3: optional bool isStatsCompliant,
}

struct SetPartitionsStatsRequest {
  1: required list<ColumnStatistics> colStats,
  2: optional bool needMerge,
  3: optional i64 writeId = -1,
  4: optional string validWriteIdList,
  5: required string engine,
}

struct SetPartitionsStatsResponse {
  1: required bool result,
}

struct TableStatsResult {
  1: required list<ColumnStatisticsObj> tableStats,
  2: optional bool isStatsCompliant,
}

struct PartitionsStatsResult {
  1: required map<string, list<ColumnStatisticsObj>> partStats,
  2: optional bool isStatsCompliant,
}

struct TableStatsRequest {
  1: required string dbName,
  2: required string tblName,
  3: required list<string> colNames,
  4: optional string catName,
  5: optional string validWriteIdList,
  6: required string engine,
  7: optional i64 id = -1,
}

struct PartitionsStatsRequest {
  1: required string dbName,
  2: required string tblName,
  3: required list<string> colNames,
  4: required list<string> partNames,
  5: optional string catName,
  6: optional string validWriteIdList,
  7: required string engine,
}

// ------------------------------------------------------- tables, partitions

// engine-specific per-file metadata blobs; type 1 = Impala
struct FileMetadata {
  1: i8 type = 1,
  2: i8 version = 1,
  3: list<binary> data,
}

// shared objects referenced by index to shrink payloads
struct ObjectDictionary {
  1: required map<string, list<binary>> values,
}

struct Table {
  1: string tableName,
  2: string dbName,
  3: string owner,
  4: i32 createTime,                 // unix seconds
  5: i32 lastAccessTime,
  6: i32 retention,
  7: StorageDescriptor sd,
  8: list<FieldSchema> partitionKeys,
  9: map<string, string> parameters,
  10: string viewOriginalText,
  11: string viewExpandedText,
  12: string tableType,              // MANAGED_TABLE, EXTERNAL_TABLE, VIRTUAL_VIEW, ...
  13: optional PrincipalPrivilegeSet privileges,
  14: optional bool temporary = false,
  15: optional bool rewriteEnabled,
  16: optional CreationMetadata creationMetadata,
  17: optional string catName,
  18: optional PrincipalType ownerType = PrincipalType.USER,
  19: optional i64 writeId = -1,
  20: optional bool isStatsCompliant,
  21: optional ColumnStatistics colStats,
  22: optional i8 accessType,
  23: optional list<string> requiredReadCapabilities,
  24: optional list<string> requiredWriteCapabilities,
  25: optional i64 id,                // read-only, ignored on writes
  26: optional FileMetadata fileMetadata,
  27: optional ObjectDictionary dictionary,
  28: optional i64 txnId,
}

struct SourceTable {
  1: required Table table,
  2: required i64 insertedCount,
  3: required i64 updatedCount,
  4: required i64 deletedCount,
}

struct Partition {
  1: list<string> values,
  2: string dbName,
  3: string tableName,
  4: i32 createTime,
  5: i32 lastAccessTime,
  6: StorageDescriptor sd,
  7: map<string, string> parameters,
  8: optional PrincipalPrivilegeSet privileges,
  9: optional string catName,
  10: optional i64 writeId = -1,
  11: optional bool isStatsCompliant,
  12: optional ColumnStatistics colStats,
  13: optional FileMetadata fileMetadata,
}

struct PartitionWithoutSD {
  1: list<string> values,
  2: i32 createTime,
  3: i32 lastAccessTime,
  4: string relativePath,
  5: map<string, string> parameters,
  6: optional PrincipalPrivilegeSet privileges,
}

struct PartitionSpecWithSharedSD {
  1: list<PartitionWithoutSD> partitions,
  2: StorageDescriptor sd,
}

struct PartitionListComposingSpec {
  1: list<Partition> partitions,
}

struct PartitionSpec {
  1: string dbName,
  2: string tableName,
  3: string rootPath,
  4: optional PartitionSpecWithSharedSD sharedSDPartitionSpec,
  5: optional PartitionListComposingSpec partitionList,
  6: optional string catName,
  7: optional i64 writeId = -1,
  8: optional bool isStatsCompliant,
}

struct Schema {
  1: list<FieldSchema> fieldSchemas,
  2: map<string, string> properties,
}

struct TableMeta {
  1: required string dbName,
  2: required string tableName,
  3: required string tableType,
  4: optional string comments,
  5: optional string catName,
}

struct Materialization {
  1: required bool sourceTablesUpdateDeleteModified,
  2: required bool sourceTablesCompacted,
}

struct TruncateTableRequest {
  1: required string dbName,
  2: required string tableName,
  3: optional list<string> partNames,
  4: optional i64 writeId = -1,
  5: optional string validWriteIdList,
  6: optional EnvironmentContext environmentContext,
}

struct TruncateTableResponse {
}

// ------------------------------------------------------ constraint requests

struct PrimaryKeysRequest {
  1: required string db_name,
  2: required string tbl_name,
  3: optional string catName,
  4: optional string validWriteIdList,
  5: optional i64 tableId = -1,
}

struct PrimaryKeysResponse {
  1: required list<SQLPrimaryKey> primaryKeys,
}

struct ForeignKeysRequest {
  1: string parent_db_name,
  2: string parent_tbl_name,
  3: string foreign_db_name,
  4: string foreign_tbl_name,
  5: optional string catName,
  6: optional string validWriteIdList,
  7: optional i64 tableId = -1,
}

struct ForeignKeysResponse {
  1: required list<SQLForeignKey> foreignKeys,
}

struct UniqueConstraintsRequest {
  1: required string catName,
  2: required string db_name,
  3: required string tbl_name,
  4: optional string validWriteIdList,
  5: optional i64 tableId = -1,
}

struct UniqueConstraintsResponse {
  1: required list<SQLUniqueConstraint> uniqueConstraints,
}

struct NotNullConstraintsRequest {
  1: required string catName,
  2: required string db_name,
  3: required string tbl_name,
  4: optional string validWriteIdList,
  5: optional i64 tableId = -1,
}

struct NotNullConstraintsResponse {
  1: required list<SQLNotNullConstraint> notNullConstraints,
}

struct DefaultConstraintsRequest {
  1: required string catName,
  2: required string db_name,
  3: required string tbl_name,
  4: optional string validWriteIdList,
  5: optional i64 tableId = -1,
}

struct DefaultConstraintsResponse {
  1: required list<SQLDefaultConstraint> defaultConstraints,
}

struct CheckConstraintsRequest {
  1: required string catName,
  2: required string db_name,
  3: required string tbl_name,
  4: optional string validWriteIdList,
  5: optional i64 tableId = -1,
}

struct CheckConstraintsResponse {
  1: required list<SQLCheckConstraint> checkConstraints,
}

struct AllTableConstraintsRequest {
  1: required string dbName,
  2: required string tblName,
  3: required string catName,
  4: optional string validWriteIdList,
  5: optional i64 tableId = -1,
}

struct AllTableConstraintsResponse {
  1: required SQLAllTableConstraints allTableConstraints,
}

struct DropConstraintRequest {
  1: required string dbname,
  2: required string tablename,
  3: required string constraintname,
  4: optional string catName,
}

struct AddPrimaryKeyRequest {
  1: required list<SQLPrimaryKey> primaryKeyCols,
}

struct AddForeignKeyRequest {
  1: required list<SQLForeignKey> foreignKeyCols,
}

struct AddUniqueConstraintRequest {
  1: required list<SQLUniqueConstraint> uniqueConstraintCols,
}

struct AddNotNullConstraintRequest {
  1: required list<SQLNotNullConstraint> notNullConstraintCols,
}

struct AddDefaultConstraintRequest {
  1: required list<SQLDefaultConstraint> defaultConstraintCols,
}

struct AddCheckConstraintRequest {
  1: required list<SQLCheckConstraint> checkConstraintCols,
}

// ------------------------------------------------------- partition requests

struct PartitionsByExprResult {
  1: required list<Partition> partitions,
  2: required bool hasUnknownPartitions,
}

struct PartitionsSpecByExprResult {
  1: required list<PartitionSpec> partitionsSpec,
  2: required bool hasUnknownPartitions,
}

// expr is a serialized Hive expression (Kryo); only Hive can decode it
struct PartitionsByExprRequest {
  1: required string dbName,
  2: required string tblName,
  3: required binary expr,
  4: optional string defaultPartitionName,
  5: optional i16 maxParts = -1,
  6: optional string catName,
  7: optional string order,
  8: optional string validWriteIdList,
  9: optional i64 id = -1,
}

struct AddPartitionsResult {
  1: optional list<Partition> partitions,
  2: optional bool isStatsCompliant,
}

struct AddPartitionsRequest {
  1: required string dbName,
  2: required string tblName,
  3: required list<Partition> parts,
  4: required bool ifNotExists,
  5: optional bool needResult = true,
  6: optional string catName,
  7: optional string validWriteIdList,
}

struct DropPartitionsResult {
  1: optional list<Partition> partitions,
}

struct DropPartitionsExpr {
  1: required binary expr,
  2: optional i32 partArchiveLevel,
}

union RequestPartsSpec {
  1: list<string> names,
  2: list<DropPartitionsExpr> exprs,
}

struct DropPartitionsRequest {
  1: required string dbName,
  2: required string tblName,
  3: required RequestPartsSpec parts,
  4: optional bool deleteData,
  5: optional bool ifExists = true,
  6: optional bool ignoreProtection,
  7: optional EnvironmentContext environmentContext,
  8: optional bool needResult = true,
  9: optional string catName,
}

struct PartitionValuesRequest {
  1: required string dbName,
  2: required string tblName,
  3: required list<FieldSchema> partitionKeys,
  4: optional bool applyDistinct = true,
  5: optional string filter,
  6: optional list<FieldSchema> partitionOrder,
  7: optional bool ascending = true,
  8: optional i64 maxParts = -1,
  9: optional string catName,
  10: optional string validWriteIdList,
}

struct PartitionValuesRow {
  1: required list<string> row,
}

struct PartitionValuesResponse {
  1: required list<PartitionValuesRow> partitionValues,
}

struct GetPartitionsByNamesRequest {
  1: required string db_name,
  2: required string tbl_name,
  3: optional list<string> names,
  4: optional bool get_col_stats,
  5: optional list<string> processorCapabilities,
  6: optional string processorIdentifier,
  7: optional string engine,
  8: optional string validWriteIdList,
  9: optional bool getFileMetadata,
  10: optional i64 id = -1,
}

struct GetPartitionsByNamesResult {
  1: required list<Partition> partitions,
  2: optional ObjectDictionary dictionary,
}

struct AlterPartitionsRequest {
  1: optional string catName,
  2: required string dbName,
  3: required string tableName,
  4: required list<Partition> partitions,
  5: optional EnvironmentContext environmentContext,
  6: optional i64 writeId = -1,
  7: optional string validWriteIdList,
}

struct AlterPartitionsResponse {
}

struct RenamePartitionRequest {
  1: optional string catName,
  2: required string dbName,
  3: required string tableName,
  4: required list<string> partVals,
  5: required Partition newPart,
  6: optional string validWriteIdList,
  7: optional i64 txnId,
  8: optional bool clonePart,
}

struct RenamePartitionResponse {
}

// projection: dotted field paths to return, plus parameter-key patterns
struct GetProjectionsSpec {
  1: list<string> fieldList,
  2: string includeParamKeyPattern,
  3: string excludeParamKeyPattern,
}

struct GetPartitionsFilterSpec {
  7: optional PartitionFilterMode filterMode,
  8: optional list<string> filters,
}

struct GetPartitionsResponse {
  1: list<PartitionSpec> partitionSpec,
}

struct GetPartitionsRequest {
  1: optional string catName,
  2: string dbName,
  3: string tblName,
  4: optional bool withAuth,
  5: optional string user,
  6: optional list<string> groupNames,
  7: GetProjectionsSpec projectionSpec,
  8: GetPartitionsFilterSpec filterSpec,
  9: optional list<string> processorCapabilities,
  10: optional string processorIdentifier,
  11: optional string validWriteIdList,
}

struct GetPartitionRequest {
  1: optional string catName,
  2: required string dbName,
  3: required string tblName,
  4: required list<string> partVals,
  5: optional string validWriteIdList,
  6: optional i64 id = -1,
}

struct GetPartitionResponse {
  1: required Partition partition,
}

// "Partitions" rather than "GetPartitions": that name is taken above
struct PartitionsRequest {
  1: optional string catName,
  2: required string dbName,
  3: required string tblName,
  4: optional i16 maxParts = -1,
  5: optional string validWriteIdList,
  6: optional i64 id = -1,
}

struct PartitionsResponse {
  1: required list<Partition> partitions,
}

struct GetPartitionNamesPsRequest {
  1: optional string catName,
  2: required string dbName,
  3: required string tblName,
  4: optional list<string> partValues,
  5: optional i16 maxParts = -1,
  6: optional string validWriteIdList,
  7: optional i64 id = -1,
}

struct GetPartitionNamesPsResponse {
  1: required list<string> names,
}

struct GetPartitionsPsWithAuthRequest {
  1: optional string catName,
  2: required string dbName,
  3: required string tblName,
  4: optional list<string> partVals,
  5: optional i16 maxParts = -1,
  6: optional string userName,
  7: optional list<string> groupNames,
  8: optional string validWriteIdList,
  9: optional i64 id = -1,
}

struct GetPartitionsPsWithAuthResponse {
  1: required list<Partition> partitions,
}

// ----------------------------------------------------------- table requests

struct ClientCapabilities {
  1: required list<ClientCapability> values,
}

struct GetTableRequest {
  1: required string dbName,
  2: required string tblName,
  3: optional ClientCapabilities capabilities,
  4: optional string catName,
  // there is no field 5
  6: optional string validWriteIdList,
  7: optional bool getColumnStats,
  8: optional list<string> processorCapabilities,
  9: optional string processorIdentifier,
  10: optional string engine,
  11: optional i64 id = -1,
}

struct GetTableResult {
  1: required Table table,
  2: optional bool isStatsCompliant,
}

struct GetTablesRequest {
  1: required string dbName,
  2: optional list<string> tblNames,
  3: optional ClientCapabilities capabilities,
  4: optional string catName,
  5: optional list<string> processorCapabilities,
  6: optional string processorIdentifier,
  7: optional GetProjectionsSpec projectionSpec,
  8: optional string tablesPattern,
}

struct GetTablesResult {
  1: required list<Table> tables,
}

struct GetTablesExtRequest {
  1: required string catalog,
  2: required string database,
  3: required string tableNamePattern,
  4: required i32 requestedFields,      // OR of GetTablesExtRequestFields
  5: optional i32 limit,
  6: optional list<string> processorCapabilities,
  7: optional string processorIdentifier,
}

struct ExtendedTableInfo {
  1: required string tblName,
  2: optional i32 accessType,
  3: optional list<string> requiredReadCapabilities,
  4: optional list<string> requiredWriteCapabilities,
}

struct CreateTableRequest {
  1: required Table table,
  2: optional EnvironmentContext envContext,
  3: optional list<SQLPrimaryKey> primaryKeys,
  4: optional list<SQLForeignKey> foreignKeys,
  5: optional list<SQLUniqueConstraint> uniqueConstraints,
  6: optional list<SQLNotNullConstraint> notNullConstraints,
  7: optional list<SQLDefaultConstraint> defaultConstraints,
  8: optional list<SQLCheckConstraint> checkConstraints,
  9: optional list<string> processorCapabilities,
  10: optional string processorIdentifier,
}

struct AlterTableRequest {
  1: optional string catName,
  2: required string dbName,
  3: required string tableName,
  4: required Table table,
  5: optional EnvironmentContext environmentContext,
  6: optional i64 writeId = -1,
  7: optional string validWriteIdList,
  8: optional list<string> processorCapabilities,
  9: optional string processorIdentifier,
  10: optional string expectedParameterKey,
  11: optional string expectedParameterValue,
}

struct AlterTableResponse {
}

struct GetFieldsRequest {
  1: optional string catName,
  2: required string dbName,
  3: required string tblName,
  4: optional EnvironmentContext envContext,
  5: optional string validWriteIdList,
  6: optional i64 id = -1,
}

struct GetFieldsResponse {
  1: required list<FieldSchema> fields,
}

struct GetSchemaRequest {
  1: optional string catName,
  2: required string dbName,
  3: required string tblName,
  4: optional EnvironmentContext envContext,
  5: optional string validWriteIdList,
  6: optional i64 id = -1,
}

struct GetSchemaResponse {
  1: required list<FieldSchema> fields,
}

// ---------------------------------------------------------------- functions

struct ResourceUri {
  1: ResourceType resourceType,
  2: string uri,
}

struct Function {
  1: string functionName,
  2: string dbName,
  3: string className,
  4: string ownerName,
  5: PrincipalType ownerType,
  6: i32 createTime,
  7: FunctionType functionType,
  8: list<ResourceUri> resourceUris,
  9: optional string catName,
}

struct GetAllFunctionsResponse {
  1: optional list<Function> functions,
}

// ------------------------------------------------------------- transactions

struct TxnInfo {
  1: required i64 id,
  2: required TxnState state,
  3: required string user,
  4: required string hostname,
  5: optional string agentInfo = "Unknown",
  6: optional i32 heartbeatCount = 0,
  7: optional string metaInfo,
  8: optional i64 startedTime,
  9: optional i64 lastHeartbeatTime,
}

struct GetOpenTxnsInfoResponse {
  1: required i64 txn_high_water_mark,
  2: required list<TxnInfo> open_txns,
}

// Hive 3.0+ shape: open_txns is a list (a set in Hive 2.x), and abortedBits
// (Java BitSet bytes, one bit per open_txns entry) is required.
struct GetOpenTxnsResponse {
  1: required i64 txn_high_water_mark,
  2: required list<i64> open_txns,
  3: optional i64 min_open_txn,
  4: required binary abortedBits,
}

struct GetOpenTxnsRequest {
  1: optional list<TxnType> excludeTxnTypes,
}

struct OpenTxnRequest {
  1: required i32 num_txns,
  2: required string user,
  3: required string hostname,
  4: optional string agentInfo = "Unknown",
  5: optional string replPolicy,
  6: optional list<i64> replSrcTxnIds,
  7: optional TxnType txn_type = TxnType.DEFAULT,
}

struct OpenTxnsResponse {
  1: required list<i64> txn_ids,
}

struct AbortTxnRequest {
  1: required i64 txnid,
  2: optional string replPolicy,
  3: optional TxnType txn_type,
  4: optional i64 errorCode,
}

struct AbortTxnsRequest {
  1: required list<i64> txn_ids,
  2: optional i64 errorCode,
}

// stored atomically with a commit
struct CommitTxnKeyValue {
  1: required i64 tableId,
  2: required string key,
  3: required string value,
}

struct WriteEventInfo {
  1: required i64 writeId,
  2: required string database,
  3: required string table,
  4: required string files,
  5: optional string partition,
  6: optional string tableObj,
  7: optional string partitionObj,
}

struct ReplLastIdInfo {
  1: required string database,
  2: required i64 lastReplId,
  3: optional string table,
  4: optional string catalog,
  5: optional list<string> partitionList,
}

struct UpdateTransactionalStatsRequest {
  1: required i64 tableId,
  2: required i64 insertCount,
  3: required i64 updatedCount,
  4: required i64 deletedCount,
}

struct CommitTxnRequest {
  1: required i64 txnid,
  2: optional string replPolicy,
  3: optional list<WriteEventInfo> writeEventInfos,
  4: optional ReplLastIdInfo replLastIdInfo,
  5: optional CommitTxnKeyValue keyValue,
  6: optional bool exclWriteEnabled = true,
  7: optional TxnType txn_type,
}

struct ReplTblWriteIdStateRequest {
  1: required string validWriteIdlist,
  2: required string user,
  3: required string hostName,
  4: required string dbName,
  5: required string tableName,
  6: optional list<string> partNames,
}

// validTxnList is required in Hive 3.1 and optional in 4.x; 3.1 clients
// always send it, 4.x clients may send writeId instead.
struct GetValidWriteIdsRequest {
  1: required list<string> fullTableNames,   // "db.table"
  2: optional string validTxnList,
  3: optional i64 writeId,
}

struct TableValidWriteIds {
  1: required string fullTableName,
  2: required i64 writeIdHighWaterMark,
  3: required list<i64> invalidWriteIds,
  4: optional i64 minOpenWriteId,
  5: required binary abortedBits,
}

struct GetValidWriteIdsResponse {
  1: required list<TableValidWriteIds> tblValidWriteIds,
}

struct TxnToWriteId {
  1: required i64 txnId,
  2: required i64 writeId,
}

// txnIds for normal use; replPolicy + srcTxnToWriteIdList for replication
struct AllocateTableWriteIdsRequest {
  1: required string dbName,
  2: required string tableName,
  3: optional list<i64> txnIds,
  4: optional string replPolicy,
  5: optional list<TxnToWriteId> srcTxnToWriteIdList,
  6: optional bool reallocate = false,
}

struct AllocateTableWriteIdsResponse {
  1: required list<TxnToWriteId> txnToWriteIds,
}

struct MaxAllocatedTableWriteIdRequest {
  1: required string dbName,
  2: required string tableName,
}

struct MaxAllocatedTableWriteIdResponse {
  1: required i64 maxWriteId,
}

struct SeedTableWriteIdsRequest {
  1: required string dbName,
  2: required string tableName,
  3: required i64 seedWriteId,
}

struct SeedTxnIdRequest {
  1: required i64 seedTxnId,
}

struct GetAllWriteEventInfoRequest {
  1: required i64 txnId,
  2: optional string dbName,
  3: optional string tableName,
}

// -------------------------------------------------------------------- locks

struct LockComponent {
  1: required LockType type,
  2: required LockLevel level,
  3: required string dbname,
  4: optional string tablename,
  5: optional string partitionname,
  6: optional DataOperationType operationType = DataOperationType.UNSET,
  7: optional bool isTransactional = false,
  8: optional bool isDynamicPartitionWrite = false,
}

struct LockRequest {
  1: required list<LockComponent> component,
  2: optional i64 txnid,
  3: required string user,
  4: required string hostname,
  5: optional string agentInfo = "Unknown",
  6: optional bool zeroWaitReadEnabled = false,
  7: optional bool exclusiveCTAS = false,
  8: optional bool locklessReadsEnabled = false,
}

struct LockResponse {
  1: required i64 lockid,
  2: required LockState state,
  3: optional string errorMessage,
}

struct CheckLockRequest {
  1: required i64 lockid,
  2: optional i64 txnid,
  3: optional i64 elapsed_ms,
}

struct UnlockRequest {
  1: required i64 lockid,
}

struct ShowLocksRequest {
  1: optional string dbname,
  2: optional string tablename,
  3: optional string partname,
  4: optional bool isExtended = false,
  5: optional i64 txnid,
}

struct ShowLocksResponseElement {
  1: required i64 lockid,
  2: required string dbname,
  3: optional string tablename,
  4: optional string partname,
  5: required LockState state,
  6: required LockType type,
  7: optional i64 txnid,
  8: required i64 lastheartbeat,
  9: optional i64 acquiredat,
  10: required string user,
  11: required string hostname,
  12: optional i32 heartbeatCount = 0,
  13: optional string agentInfo,
  14: optional i64 blockedByExtId,
  15: optional i64 blockedByIntId,
  16: optional i64 lockIdInternal,
}

struct ShowLocksResponse {
  1: list<ShowLocksResponseElement> locks,
}

struct HeartbeatRequest {
  1: optional i64 lockid,
  2: optional i64 txnid,
}

struct HeartbeatTxnRangeRequest {
  1: required i64 min,
  2: required i64 max,
}

struct HeartbeatTxnRangeResponse {
  1: required set<i64> aborted,
  2: required set<i64> nosuch,
}

// --------------------------------------------------------------- compaction

struct CompactionRequest {
  1: required string dbname,
  2: required string tablename,
  3: optional string partitionname,
  4: required CompactionType type,
  5: optional string runas,
  6: optional map<string, string> properties,
  7: optional string initiatorId,
  8: optional string initiatorVersion,
  9: optional string poolName,
  10: optional i32 numberOfBuckets,
  11: optional string orderByClause,
}

struct CompactionInfoStruct {
  1: required i64 id,
  2: required string dbname,
  3: required string tablename,
  4: optional string partitionname,
  5: required CompactionType type,
  6: optional string runas,
  7: optional string properties,
  8: optional bool toomanyaborts,
  9: optional string state,
  10: optional string workerId,
  11: optional i64 start,
  12: optional i64 highestWriteId,
  13: optional string errorMessage,
  14: optional bool hasoldabort,
  15: optional i64 enqueueTime,
  16: optional i64 retryRetention,
  17: optional string poolname,
  18: optional i32 numberOfBuckets,
  19: optional string orderByClause,
}

struct CompactionResponse {
  1: required i64 id,
  2: required string state,
  3: required bool accepted,
  4: optional string errormessage,
}

// empty in Hive 3.1; all filters optional in 4.x
struct ShowCompactRequest {
  1: optional i64 id,
  2: optional string poolName,
  3: optional string dbName,
  4: optional string tbName,
  5: optional string partName,
  6: optional CompactionType type,
  7: optional string state,
  8: optional i64 limit,
  9: optional string order,
}

struct ShowCompactResponseElement {
  1: required string dbname,
  2: required string tablename,
  3: optional string partitionname,
  4: required CompactionType type,
  5: required string state,
  6: optional string workerid,
  7: optional i64 start,
  8: optional string runAs,
  9: optional i64 hightestTxnId,        // sic, as on the wire
  10: optional string metaInfo,
  11: optional i64 endTime,
  12: optional string hadoopJobId = "None",
  13: optional i64 id,
  14: optional string errorMessage,
  15: optional i64 enqueueTime,
  16: optional string workerVersion,
  17: optional string initiatorId,
  18: optional string initiatorVersion,
  19: optional i64 cleanerStart,
  20: optional string poolName,
  21: optional i64 nextTxnId,
  22: optional i64 txnId,
  23: optional i64 commitTime,
  24: optional i64 hightestWriteId,
}

struct ShowCompactResponse {
  1: required list<ShowCompactResponseElement> compacts,
}

struct AbortCompactionRequest {
  1: required list<i64> compactionIds,
  2: optional string type,
  3: optional string poolName,
}

struct AbortCompactionResponseElement {
  1: required i64 compactionId,
  2: optional string status,
  3: optional string message,
}

struct AbortCompactResponse {
  1: required map<i64, AbortCompactionResponseElement> abortedcompacts,
}

struct GetLatestCommittedCompactionInfoRequest {
  1: required string dbname,
  2: required string tablename,
  3: optional list<string> partitionnames,
  4: optional i64 lastCompactionId,
}

struct GetLatestCommittedCompactionInfoResponse {
  1: required list<CompactionInfoStruct> compactions,
}

// Hive 3.0+ layout (Hive 2.x had no writeid and different ids)
struct AddDynamicPartitions {
  1: required i64 txnid,
  2: required i64 writeid,
  3: required string dbname,
  4: required string tablename,
  5: required list<string> partitionnames,
  6: optional DataOperationType operationType = DataOperationType.UNSET,
}

// ------------------------------------------------------------ notifications

struct NotificationEventRequest {
  1: required i64 lastEvent,
  2: optional i32 maxEvents,
  3: optional list<string> eventTypeSkipList,
}

struct NotificationEvent {
  1: required i64 eventId,
  2: required i32 eventTime,            // unix seconds
  3: required string eventType,
  4: optional string dbName,
  5: optional string tableName,
  6: required string message,
  7: optional string messageFormat,
  8: optional string catName,
}

struct NotificationEventResponse {
  1: required list<NotificationEvent> events,
}

struct CurrentNotificationEventId {
  1: required i64 eventId,
}

struct NotificationEventsCountRequest {
  1: required i64 fromEventId,
  2: required string dbName,
  3: optional string catName,
  4: optional i64 toEventId,
  5: optional i64 limit,
}

struct NotificationEventsCountResponse {
  1: required i64 eventsCount,
}

struct InsertEventRequestData {
  1: optional bool replace,
  2: required list<string> filesAdded,
  3: optional list<string> filesAddedChecksum,   // hex checksums
  4: optional list<string> subDirectoryList,
  5: optional list<string> partitionVal,
}

union FireEventRequestData {
  1: InsertEventRequestData insertData,
  2: list<InsertEventRequestData> insertDatas,
}

struct FireEventRequest {
  1: required bool successful,
  2: required FireEventRequestData data,
  3: optional string dbName,
  4: optional string tableName,
  5: optional list<string> partitionVals,
  6: optional string catName,
}

struct FireEventResponse {
  1: list<i64> eventIds,
}

struct WriteNotificationLogRequest {
  1: required i64 txnId,
  2: required i64 writeId,
  3: required string db,
  4: required string table,
  5: required InsertEventRequestData fileInfo,
  6: optional list<string> partitionVals,
}

struct WriteNotificationLogResponse {
}

struct WriteNotificationLogBatchRequest {
  1: required string catalog,
  2: required string db,
  3: required string table,
  4: required list<WriteNotificationLogRequest> requestList,
}

struct WriteNotificationLogBatchResponse {
}

struct CmRecycleRequest {
  1: required string dataPath,
  2: required bool purge,
}

struct CmRecycleResponse {
}

// -------------------------------------------- scheduled queries, runtime stats

struct ScheduledQueryPollRequest {
  1: required string clusterNamespace,
}

struct ScheduledQueryKey {
  1: required string scheduleName,
  2: required string clusterNamespace,
}

struct ScheduledQueryPollResponse {
  1: optional ScheduledQueryKey scheduleKey,
  2: optional i64 executionId,
  3: optional string query,
  4: optional string user,
}

struct ScheduledQuery {
  1: required ScheduledQueryKey scheduleKey,
  2: optional bool enabled,
  // no field 3
  4: optional string schedule,
  5: optional string user,
  6: optional string query,
  7: optional i32 nextExecution,
}

struct ScheduledQueryMaintenanceRequest {
  1: required ScheduledQueryMaintenanceRequestType type,
  2: required ScheduledQuery scheduledQuery,
}

struct ScheduledQueryProgressInfo {
  1: required i64 scheduledExecutionId,
  2: required QueryState state,
  3: required string executorQueryId,
  4: optional string errorMessage,
}

struct RuntimeStat {
  1: optional i32 createTime,
  2: required i32 weight,
  3: required binary payload,
}

struct GetRuntimeStatsRequest {
  1: required i32 maxWeight,
  2: required i32 maxCreateTime,
}

// --------------------------------------------------------------- exceptions
// All carry a single message string at id 1.

exception MetaException {
  1: string message,
}

exception UnknownTableException {
  1: string message,
}

exception UnknownDBException {
  1: string message,
}

exception AlreadyExistsException {
  1: string message,
}

exception InvalidPartitionException {
  1: string message,
}

exception UnknownPartitionException {
  1: string message,
}

exception InvalidObjectException {
  1: string message,
}

exception NoSuchObjectException {
  1: string message,
}

exception InvalidOperationException {
  1: string message,
}

exception ConfigValSecurityException {
  1: string message,
}

exception InvalidInputException {
  1: string message,
}

exception NoSuchTxnException {
  1: string message,
}

exception TxnAbortedException {
  1: string message,
}

exception TxnOpenException {
  1: string message,
}

exception NoSuchLockException {
  1: string message,
}

exception CompactionAbortedException {
  1: string message,
}

exception NoSuchCompactionException {
  1: string message,
}

// ------------------------------------------------------------------ service
// Exception names (o1, o2, ...) are kept as Hive has them, gaps included.

service ThriftHiveMetastore extends fb303.FacebookService {

  // --- metastore configuration
  string getMetaConf(1: string key) throws (1: MetaException o1)
  void setMetaConf(1: string key, 2: string value) throws (1: MetaException o1)
  // keys must start with hive, mapred or hdfs, else ConfigValSecurityException
  string get_config_value(1: string name, 2: string defaultValue)
      throws (1: ConfigValSecurityException o1)
  string get_metastore_db_uuid() throws (1: MetaException o1)

  // --- catalogs
  void create_catalog(1: CreateCatalogRequest catalog)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  void alter_catalog(1: AlterCatalogRequest rqst)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  GetCatalogResponse get_catalog(1: GetCatalogRequest catName)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  GetCatalogsResponse get_catalogs() throws (1: MetaException o1)
  void drop_catalog(1: DropCatalogRequest catName)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)

  // --- databases
  void create_database(1: Database database)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  Database get_database(1: string name)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  Database get_database_req(1: GetDatabaseRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void drop_database(1: string name, 2: bool deleteData, 3: bool cascade)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  void drop_database_req(1: DropDatabaseRequest req)
      throws (1: NoSuchObjectException o1, 2: InvalidOperationException o2, 3: MetaException o3)
  list<string> get_databases(1: string pattern) throws (1: MetaException o1)
  list<string> get_all_databases() throws (1: MetaException o1)
  void alter_database(1: string dbname, 2: Database db)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)

  // --- types
  Type get_type(1: string name) throws (1: MetaException o1, 2: NoSuchObjectException o2)
  bool create_type(1: Type type)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3)
  bool drop_type(1: string type) throws (1: MetaException o1, 2: NoSuchObjectException o2)
  map<string, Type> get_type_all(1: string name) throws (1: MetaException o2)

  // --- columns of a table (get_schema adds the partition keys)
  list<FieldSchema> get_fields(1: string db_name, 2: string table_name)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  list<FieldSchema> get_fields_with_environment_context(1: string db_name, 2: string table_name,
      3: EnvironmentContext environment_context)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  GetFieldsResponse get_fields_req(1: GetFieldsRequest req)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  list<FieldSchema> get_schema(1: string db_name, 2: string table_name)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  list<FieldSchema> get_schema_with_environment_context(1: string db_name, 2: string table_name,
      3: EnvironmentContext environment_context)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)
  GetSchemaResponse get_schema_req(1: GetSchemaRequest req)
      throws (1: MetaException o1, 2: UnknownTableException o2, 3: UnknownDBException o3)

  // --- table DDL
  void create_table(1: Table tbl)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: NoSuchObjectException o4)
  void create_table_with_environment_context(1: Table tbl, 2: EnvironmentContext environment_context)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: NoSuchObjectException o4)
  void create_table_with_constraints(1: Table tbl, 2: list<SQLPrimaryKey> primaryKeys,
      3: list<SQLForeignKey> foreignKeys, 4: list<SQLUniqueConstraint> uniqueConstraints,
      5: list<SQLNotNullConstraint> notNullConstraints,
      6: list<SQLDefaultConstraint> defaultConstraints,
      7: list<SQLCheckConstraint> checkConstraints)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: NoSuchObjectException o4)
  void create_table_req(1: CreateTableRequest request)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: NoSuchObjectException o4)
  void drop_table(1: string dbname, 2: string name, 3: bool deleteData)
      throws (1: NoSuchObjectException o1, 2: MetaException o3)
  void drop_table_with_environment_context(1: string dbname, 2: string name, 3: bool deleteData,
      4: EnvironmentContext environment_context)
      throws (1: NoSuchObjectException o1, 2: MetaException o3)
  void truncate_table(1: string dbName, 2: string tableName, 3: list<string> partNames)
      throws (1: MetaException o1)
  TruncateTableResponse truncate_table_req(1: TruncateTableRequest req) throws (1: MetaException o1)
  void alter_table(1: string dbname, 2: string tbl_name, 3: Table new_tbl)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_table_with_environment_context(1: string dbname, 2: string tbl_name,
      3: Table new_tbl, 4: EnvironmentContext environment_context)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_table_with_cascade(1: string dbname, 2: string tbl_name, 3: Table new_tbl,
      4: bool cascade)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  AlterTableResponse alter_table_req(1: AlterTableRequest req)
      throws (1: InvalidOperationException o1, 2: MetaException o2)

  // --- constraints
  void drop_constraint(1: DropConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o3)
  void add_primary_key(1: AddPrimaryKeyRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_foreign_key(1: AddForeignKeyRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_unique_constraint(1: AddUniqueConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_not_null_constraint(1: AddNotNullConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_default_constraint(1: AddDefaultConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  void add_check_constraint(1: AddCheckConstraintRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  PrimaryKeysResponse get_primary_keys(1: PrimaryKeysRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  ForeignKeysResponse get_foreign_keys(1: ForeignKeysRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  UniqueConstraintsResponse get_unique_constraints(1: UniqueConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  NotNullConstraintsResponse get_not_null_constraints(1: NotNullConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  DefaultConstraintsResponse get_default_constraints(1: DefaultConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  CheckConstraintsResponse get_check_constraints(1: CheckConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  AllTableConstraintsResponse get_all_table_constraints(1: AllTableConstraintsRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)

  // --- table lookup
  list<string> get_tables(1: string db_name, 2: string pattern) throws (1: MetaException o1)
  list<string> get_tables_by_type(1: string db_name, 2: string pattern, 3: string tableType)
      throws (1: MetaException o1)
  list<Table> get_all_materialized_view_objects_for_rewriting() throws (1: MetaException o1)
  list<string> get_materialized_views_for_rewriting(1: string db_name)
      throws (1: MetaException o1)
  list<TableMeta> get_table_meta(1: string db_patterns, 2: string tbl_patterns,
      3: list<string> tbl_types)
      throws (1: MetaException o1)
  list<string> get_all_tables(1: string db_name) throws (1: MetaException o1)
  Table get_table(1: string dbname, 2: string tbl_name)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  // declares no exceptions
  list<Table> get_table_objects_by_name(1: string dbname, 2: list<string> tbl_names)
  list<ExtendedTableInfo> get_tables_ext(1: GetTablesExtRequest req) throws (1: MetaException o1)
  GetTableResult get_table_req(1: GetTableRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetTablesResult get_table_objects_by_name_req(1: GetTablesRequest req)
      throws (1: MetaException o1, 2: InvalidOperationException o2, 3: UnknownDBException o3)
  Materialization get_materialization_invalidation_info(1: CreationMetadata creation_metadata,
      2: string validTxnList)
      throws (1: MetaException o1, 2: InvalidOperationException o2, 3: UnknownDBException o3)
  void update_creation_metadata(1: string catName, 2: string dbname, 3: string tbl_name,
      4: CreationMetadata creation_metadata)
      throws (1: MetaException o1, 2: InvalidOperationException o2, 3: UnknownDBException o3)
  list<string> get_table_names_by_filter(1: string dbname, 2: string filter,
      3: i16 max_tables = -1)
      throws (1: MetaException o1, 2: InvalidOperationException o2, 3: UnknownDBException o3)

  // --- adding partitions
  Partition add_partition(1: Partition new_part)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition add_partition_with_environment_context(1: Partition new_part,
      2: EnvironmentContext environment_context)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  i32 add_partitions(1: list<Partition> new_parts)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  i32 add_partitions_pspec(1: list<PartitionSpec> new_parts)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition append_partition(1: string db_name, 2: string tbl_name, 3: list<string> part_vals)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  AddPartitionsResult add_partitions_req(1: AddPartitionsRequest request)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition append_partition_with_environment_context(1: string db_name, 2: string tbl_name,
      3: list<string> part_vals, 4: EnvironmentContext environment_context)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition append_partition_by_name(1: string db_name, 2: string tbl_name, 3: string part_name)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)
  Partition append_partition_by_name_with_environment_context(1: string db_name,
      2: string tbl_name, 3: string part_name, 4: EnvironmentContext environment_context)
      throws (1: InvalidObjectException o1, 2: AlreadyExistsException o2, 3: MetaException o3)

  // --- dropping partitions
  bool drop_partition(1: string db_name, 2: string tbl_name, 3: list<string> part_vals,
      4: bool deleteData)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool drop_partition_with_environment_context(1: string db_name, 2: string tbl_name,
      3: list<string> part_vals, 4: bool deleteData, 5: EnvironmentContext environment_context)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool drop_partition_by_name(1: string db_name, 2: string tbl_name, 3: string part_name,
      4: bool deleteData)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool drop_partition_by_name_with_environment_context(1: string db_name, 2: string tbl_name,
      3: string part_name, 4: bool deleteData, 5: EnvironmentContext environment_context)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  DropPartitionsResult drop_partitions_req(1: DropPartitionsRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)

  // --- reading partitions (mind the differing exception order)
  Partition get_partition(1: string db_name, 2: string tbl_name, 3: list<string> part_vals)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetPartitionResponse get_partition_req(1: GetPartitionRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  Partition exchange_partition(1: map<string, string> partitionSpecs, 2: string source_db,
      3: string source_table_name, 4: string dest_db, 5: string dest_table_name)
      throws (1: MetaException o1, 2: NoSuchObjectException o2, 3: InvalidObjectException o3,
              4: InvalidInputException o4)
  list<Partition> exchange_partitions(1: map<string, string> partitionSpecs,
      2: string source_db, 3: string source_table_name, 4: string dest_db,
      5: string dest_table_name)
      throws (1: MetaException o1, 2: NoSuchObjectException o2, 3: InvalidObjectException o3,
              4: InvalidInputException o4)
  Partition get_partition_with_auth(1: string db_name, 2: string tbl_name,
      3: list<string> part_vals, 4: string user_name, 5: list<string> group_names)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  Partition get_partition_by_name(1: string db_name, 2: string tbl_name, 3: string part_name)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Partition> get_partitions(1: string db_name, 2: string tbl_name, 3: i16 max_parts = -1)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  PartitionsResponse get_partitions_req(1: PartitionsRequest req)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  list<Partition> get_partitions_with_auth(1: string db_name, 2: string tbl_name,
      3: i16 max_parts = -1, 4: string user_name, 5: list<string> group_names)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  list<PartitionSpec> get_partitions_pspec(1: string db_name, 2: string tbl_name,
      3: i32 max_parts = -1)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  list<string> get_partition_names(1: string db_name, 2: string tbl_name, 3: i16 max_parts = -1)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  PartitionValuesResponse get_partition_values(1: PartitionValuesRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  // *_ps: part_vals is a prefix; "" matches any value
  list<Partition> get_partitions_ps(1: string db_name, 2: string tbl_name,
      3: list<string> part_vals, 4: i16 max_parts = -1)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Partition> get_partitions_ps_with_auth(1: string db_name, 2: string tbl_name,
      3: list<string> part_vals, 4: i16 max_parts = -1, 5: string user_name,
      6: list<string> group_names)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  GetPartitionsPsWithAuthResponse get_partitions_ps_with_auth_req(
      1: GetPartitionsPsWithAuthRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<string> get_partition_names_ps(1: string db_name, 2: string tbl_name,
      3: list<string> part_vals, 4: i16 max_parts = -1)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetPartitionNamesPsResponse get_partition_names_ps_req(1: GetPartitionNamesPsRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<string> get_partition_names_req(1: PartitionsByExprRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Partition> get_partitions_by_filter(1: string db_name, 2: string tbl_name,
      3: string filter, 4: i16 max_parts = -1)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<PartitionSpec> get_part_specs_by_filter(1: string db_name, 2: string tbl_name,
      3: string filter, 4: i32 max_parts = -1)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  PartitionsByExprResult get_partitions_by_expr(1: PartitionsByExprRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  PartitionsSpecByExprResult get_partitions_spec_by_expr(1: PartitionsByExprRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  i32 get_num_partitions_by_filter(1: string db_name, 2: string tbl_name, 3: string filter)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  list<Partition> get_partitions_by_names(1: string db_name, 2: string tbl_name,
      3: list<string> names)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetPartitionsByNamesResult get_partitions_by_names_req(1: GetPartitionsByNamesRequest req)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetPartitionsResponse get_partitions_with_specs(1: GetPartitionsRequest request)
      throws (1: MetaException o1)

  // --- altering partitions
  void alter_partition(1: string db_name, 2: string tbl_name, 3: Partition new_part)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_partitions(1: string db_name, 2: string tbl_name, 3: list<Partition> new_parts)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_partitions_with_environment_context(1: string db_name, 2: string tbl_name,
      3: list<Partition> new_parts, 4: EnvironmentContext environment_context)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  AlterPartitionsResponse alter_partitions_req(1: AlterPartitionsRequest req)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void alter_partition_with_environment_context(1: string db_name, 2: string tbl_name,
      3: Partition new_part, 4: EnvironmentContext environment_context)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  void rename_partition(1: string db_name, 2: string tbl_name, 3: list<string> part_vals,
      4: Partition new_part)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  RenamePartitionResponse rename_partition_req(1: RenamePartitionRequest req)
      throws (1: InvalidOperationException o1, 2: MetaException o2)

  // --- partition name helpers and events
  bool partition_name_has_valid_characters(1: list<string> part_vals, 2: bool throw_exception)
      throws (1: MetaException o1)
  list<string> partition_name_to_vals(1: string part_name) throws (1: MetaException o1)
  map<string, string> partition_name_to_spec(1: string part_name) throws (1: MetaException o1)
  void markPartitionForEvent(1: string db_name, 2: string tbl_name,
      3: map<string, string> part_vals, 4: PartitionEventType eventType)
      throws (1: MetaException o1, 2: NoSuchObjectException o2, 3: UnknownDBException o3,
              4: UnknownTableException o4, 5: UnknownPartitionException o5,
              6: InvalidPartitionException o6)
  bool isPartitionMarkedForEvent(1: string db_name, 2: string tbl_name,
      3: map<string, string> part_vals, 4: PartitionEventType eventType)
      throws (1: MetaException o1, 2: NoSuchObjectException o2, 3: UnknownDBException o3,
              4: UnknownTableException o4, 5: UnknownPartitionException o5,
              6: InvalidPartitionException o6)

  // --- column statistics
  bool update_table_column_statistics(1: ColumnStatistics stats_obj)
      throws (1: NoSuchObjectException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: InvalidInputException o4)
  bool update_partition_column_statistics(1: ColumnStatistics stats_obj)
      throws (1: NoSuchObjectException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: InvalidInputException o4)
  SetPartitionsStatsResponse update_table_column_statistics_req(1: SetPartitionsStatsRequest req)
      throws (1: NoSuchObjectException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: InvalidInputException o4)
  SetPartitionsStatsResponse update_partition_column_statistics_req(
      1: SetPartitionsStatsRequest req)
      throws (1: NoSuchObjectException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: InvalidInputException o4)
  void update_transaction_statistics(1: UpdateTransactionalStatsRequest req)
      throws (1: MetaException o1)
  ColumnStatistics get_table_column_statistics(1: string db_name, 2: string tbl_name,
      3: string col_name)
      throws (1: NoSuchObjectException o1, 2: MetaException o2, 3: InvalidInputException o3,
              4: InvalidObjectException o4)
  ColumnStatistics get_partition_column_statistics(1: string db_name, 2: string tbl_name,
      3: string part_name, 4: string col_name)
      throws (1: NoSuchObjectException o1, 2: MetaException o2, 3: InvalidInputException o3,
              4: InvalidObjectException o4)
  TableStatsResult get_table_statistics_req(1: TableStatsRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  PartitionsStatsResult get_partitions_statistics_req(1: PartitionsStatsRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  AggrStats get_aggr_stats_for(1: PartitionsStatsRequest request)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool set_aggr_stats_for(1: SetPartitionsStatsRequest request)
      throws (1: NoSuchObjectException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: InvalidInputException o4)
  // engine (arg 5 / 4) is 4.x; older clients leave it unset
  bool delete_partition_column_statistics(1: string db_name, 2: string tbl_name,
      3: string part_name, 4: string col_name, 5: string engine)
      throws (1: NoSuchObjectException o1, 2: MetaException o2, 3: InvalidObjectException o3,
              4: InvalidInputException o4)
  bool delete_table_column_statistics(1: string db_name, 2: string tbl_name,
      3: string col_name, 4: string engine)
      throws (1: NoSuchObjectException o1, 2: MetaException o2, 3: InvalidObjectException o3,
              4: InvalidInputException o4)

  // --- functions
  void create_function(1: Function func)
      throws (1: AlreadyExistsException o1, 2: InvalidObjectException o2, 3: MetaException o3,
              4: NoSuchObjectException o4)
  void drop_function(1: string dbName, 2: string funcName)
      throws (1: NoSuchObjectException o1, 2: MetaException o3)
  void alter_function(1: string dbName, 2: string funcName, 3: Function newFunc)
      throws (1: InvalidOperationException o1, 2: MetaException o2)
  list<string> get_functions(1: string dbName, 2: string pattern) throws (1: MetaException o1)
  Function get_function(1: string dbName, 2: string funcName)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  GetAllFunctionsResponse get_all_functions() throws (1: MetaException o1)

  // --- roles and privileges
  bool create_role(1: Role role) throws (1: MetaException o1)
  bool drop_role(1: string role_name) throws (1: MetaException o1)
  list<string> get_role_names() throws (1: MetaException o1)
  bool grant_role(1: string role_name, 2: string principal_name, 3: PrincipalType principal_type,
      4: string grantor, 5: PrincipalType grantorType, 6: bool grant_option)
      throws (1: MetaException o1)
  bool revoke_role(1: string role_name, 2: string principal_name,
      3: PrincipalType principal_type)
      throws (1: MetaException o1)
  list<Role> list_roles(1: string principal_name, 2: PrincipalType principal_type)
      throws (1: MetaException o1)
  GrantRevokeRoleResponse grant_revoke_role(1: GrantRevokeRoleRequest request)
      throws (1: MetaException o1)
  GetPrincipalsInRoleResponse get_principals_in_role(1: GetPrincipalsInRoleRequest request)
      throws (1: MetaException o1)
  GetRoleGrantsForPrincipalResponse get_role_grants_for_principal(
      1: GetRoleGrantsForPrincipalRequest request)
      throws (1: MetaException o1)
  PrincipalPrivilegeSet get_privilege_set(1: HiveObjectRef hiveObject, 2: string user_name,
      3: list<string> group_names)
      throws (1: MetaException o1)
  list<HiveObjectPrivilege> list_privileges(1: string principal_name,
      2: PrincipalType principal_type, 3: HiveObjectRef hiveObject)
      throws (1: MetaException o1)
  bool grant_privileges(1: PrivilegeBag privileges) throws (1: MetaException o1)
  bool revoke_privileges(1: PrivilegeBag privileges) throws (1: MetaException o1)
  GrantRevokePrivilegeResponse grant_revoke_privileges(1: GrantRevokePrivilegeRequest request)
      throws (1: MetaException o1)
  GrantRevokePrivilegeResponse refresh_privileges(1: HiveObjectRef objToRefresh,
      2: string authorizer, 3: GrantRevokePrivilegeRequest grantRequest)
      throws (1: MetaException o1)

  // --- client identity and delegation tokens
  // sent right after connecting by Hive clients
  list<string> set_ugi(1: string user_name, 2: list<string> group_names)
      throws (1: MetaException o1)
  string get_delegation_token(1: string token_owner, 2: string renewer_kerberos_principal_name)
      throws (1: MetaException o1)
  i64 renew_delegation_token(1: string token_str_form) throws (1: MetaException o1)
  void cancel_delegation_token(1: string token_str_form) throws (1: MetaException o1)
  bool add_token(1: string token_identifier, 2: string delegation_token)
  bool remove_token(1: string token_identifier)
  string get_token(1: string token_identifier)
  list<string> get_all_token_identifiers()
  i32 add_master_key(1: string key) throws (1: MetaException o1)
  void update_master_key(1: i32 seq_number, 2: string key)
      throws (1: NoSuchObjectException o1, 2: MetaException o2)
  bool remove_master_key(1: i32 key_seq)
  list<string> get_master_keys()

  // --- transactions and write ids
  GetOpenTxnsResponse get_open_txns()
  GetOpenTxnsResponse get_open_txns_req(1: GetOpenTxnsRequest getOpenTxnsRequest)
  GetOpenTxnsInfoResponse get_open_txns_info()
  OpenTxnsResponse open_txns(1: OpenTxnRequest rqst)
  void abort_txn(1: AbortTxnRequest rqst) throws (1: NoSuchTxnException o1)
  void abort_txns(1: AbortTxnsRequest rqst) throws (1: NoSuchTxnException o1)
  void commit_txn(1: CommitTxnRequest rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2)
  i64 get_latest_txnid_in_conflict(1: i64 txnId) throws (1: MetaException o1)
  void repl_tbl_writeid_state(1: ReplTblWriteIdStateRequest rqst)
  GetValidWriteIdsResponse get_valid_write_ids(1: GetValidWriteIdsRequest rqst)
      throws (1: NoSuchTxnException o1, 2: MetaException o2)
  void add_write_ids_to_min_history(1: i64 txnId, 2: map<string, i64> writeIds)
      throws (1: MetaException o2)
  AllocateTableWriteIdsResponse allocate_table_write_ids(1: AllocateTableWriteIdsRequest rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2, 3: MetaException o3)
  MaxAllocatedTableWriteIdResponse get_max_allocated_table_write_id(
      1: MaxAllocatedTableWriteIdRequest rqst)
      throws (1: MetaException o1)
  void seed_write_id(1: SeedTableWriteIdsRequest rqst) throws (1: MetaException o1)
  void seed_txn_id(1: SeedTxnIdRequest rqst) throws (1: MetaException o1)
  list<WriteEventInfo> get_all_write_event_info(1: GetAllWriteEventInfoRequest request)
      throws (1: MetaException o1)

  // --- locks
  LockResponse lock(1: LockRequest rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2)
  LockResponse check_lock(1: CheckLockRequest rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2, 3: NoSuchLockException o3)
  void unlock(1: UnlockRequest rqst) throws (1: NoSuchLockException o1, 2: TxnOpenException o2)
  ShowLocksResponse show_locks(1: ShowLocksRequest rqst)
  void heartbeat(1: HeartbeatRequest ids)
      throws (1: NoSuchLockException o1, 2: NoSuchTxnException o2, 3: TxnAbortedException o3)
  HeartbeatTxnRangeResponse heartbeat_txn_range(1: HeartbeatTxnRangeRequest txns)
  LockResponse get_lock_materialization_rebuild(1: string dbName, 2: string tableName,
      3: i64 txnId)
  bool heartbeat_lock_materialization_rebuild(1: string dbName, 2: string tableName,
      3: i64 txnId)

  // --- compaction
  void compact(1: CompactionRequest rqst)
  CompactionResponse compact2(1: CompactionRequest rqst)
  ShowCompactResponse show_compact(1: ShowCompactRequest rqst)
  AbortCompactResponse abort_Compactions(1: AbortCompactionRequest rqst)
  void add_dynamic_partitions(1: AddDynamicPartitions rqst)
      throws (1: NoSuchTxnException o1, 2: TxnAbortedException o2)
  GetLatestCommittedCompactionInfoResponse get_latest_committed_compaction_info(
      1: GetLatestCommittedCompactionInfoRequest rqst)

  // --- notification log
  NotificationEventResponse get_next_notification(1: NotificationEventRequest rqst)
  CurrentNotificationEventId get_current_notificationEventId()
  NotificationEventsCountResponse get_notification_events_count(
      1: NotificationEventsCountRequest rqst)
  FireEventResponse fire_listener_event(1: FireEventRequest rqst)
  void flushCache()
  WriteNotificationLogResponse add_write_notification_log(1: WriteNotificationLogRequest rqst)
  WriteNotificationLogBatchResponse add_write_notification_log_in_batch(
      1: WriteNotificationLogBatchRequest rqst)
  CmRecycleResponse cm_recycle(1: CmRecycleRequest request) throws (1: MetaException o1)

  // --- HiveServer2 background services (scheduled queries, runtime stats)
  ScheduledQueryPollResponse scheduled_query_poll(1: ScheduledQueryPollRequest request)
      throws (1: MetaException o1)
  void scheduled_query_maintenance(1: ScheduledQueryMaintenanceRequest request)
      throws (1: MetaException o1, 2: NoSuchObjectException o2, 3: AlreadyExistsException o3,
              4: InvalidInputException o4)
  void scheduled_query_progress(1: ScheduledQueryProgressInfo info)
      throws (1: MetaException o1, 2: InvalidOperationException o2)
  ScheduledQuery get_scheduled_query(1: ScheduledQueryKey scheduleKey)
      throws (1: MetaException o1, 2: NoSuchObjectException o2)
  void add_runtime_stats(1: RuntimeStat stat) throws (1: MetaException o1)
  list<RuntimeStat> get_runtime_stats(1: GetRuntimeStatsRequest rqst)
      throws (1: MetaException o1)
}
