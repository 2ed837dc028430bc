"""The plain form: an ACID table as handed to a client that has not declared it understands
ACID tables (``hive.metastore.client.capability.check`` on). Plain functions on table and
partition documents (the stored form).

**Who gets it** (``needs_plain_form``): a client without ``INSERT_ONLY_TABLES`` for an
insert-only table (where Hive 3/4 refuse the table: HMSHandler.getTableInternal ->
``assertClientHasCapability``), and a client that declared nothing at all for a full-ACID
table (Hive hands it the table as stored). That is every Hive 2.x client: Spark's built-in
Hive 2.3 client (``HiveMetaStoreClient.VERSION`` null; ``Hive.getTable`` calls plain
``get_table``), hmsclient, pymetastore, and every ``get_table`` and
``get_table_objects_by_name`` call, which cannot declare anything.

**What the form must do.** Such a client describes, checks for, shows and drops the table
(DESCRIBE, ``catalog.tableExists``, ``CREATE TABLE IF NOT EXISTS``, SHOW TBLPROPERTIES,
DROP TABLE: Spark fetches the table for each, HiveClientImpl.getTableOption), and each of its
reads and writes fails loudly, naming ``hive_acid``, before a file is read or written. Handed
the stored table, Spark reads the directories as a plain ORC table (HiveStrategies'
RelationConversions turns a table whose serde names ORC into Spark's own ORC reader; no rows,
or deleted rows) and writes plain files into it (SPARK-15348). So, from the stored table:

* ``accessType`` NONE and the required read/write capabilities, as Hive 4's
  MetastoreDefaultTransformer answers a client without processor capabilities (Hive 4
  clients check them; Hive 2 clients skip the fields, they are not in their IDL);
* input and output format ``PLAIN_FORMAT``, a class that exists nowhere and whose name is
  the message: Spark's HiveTableScanExec and InsertIntoHiveTable build a TableDesc from
  ``Table.getInputFormatClass()`` (Hive 2.3 ql.metadata.Table: ``Class.forName``) first, so
  SELECT, ``count()``, INSERT INTO and INSERT OVERWRITE fail with
  ``ClassNotFoundException: ACID.table.use.spark.hive_acid`` before anything is read or
  written; so does a Hive 2 reader or writer;
* an empty serde name: RelationConversions.isConvertible looks for "orc" or "parquet" in
  it, so an empty one keeps Spark off its native readers; Hive 2.3's ``Table.getCols``
  still answers the stored columns (``hasMetastoreBasedSchema``: an empty serde name keeps
  the schema in the metastore), so DESCRIBE and ``listColumns`` show them; and
  ``Table.checkValidity`` (a serde and formats that load) stops Spark's ALTER TABLE, the
  last step of LOAD DATA and ANALYZE before they change the table's definition. Empty,
  not null: pymetastore refuses a table without a serde name;
* table type EXTERNAL_TABLE (and ``EXTERNAL=TRUE``, as Hive marks external tables):
  Spark's TruncateTableCommand and Hive 2's DDLSemanticAnalyzer.analyzeTruncateTable refuse
  external tables; otherwise TRUNCATE TABLE deletes every base and delta directory of the
  table or its partitions outside any transaction. DROP TABLE is unaffected: the metastore
  decides from the stored (managed) table whether the data goes.

Kept as stored: the columns, partition keys, location and parameters (``transactional``
shows in SHOW TBLPROPERTIES and DESCRIBE). Not shown: plain SHOW CREATE TABLE, which Spark
refuses for every table with ``transactional=true`` whatever the metastore answers
(ShowCreateTableCommand: UNSUPPORTED_SHOW_CREATE_TABLE.ON_TRANSACTIONAL_HIVE_TABLE, pointing
to SHOW CREATE TABLE ... AS SERDE, which works). Not stopped: Spark's LOAD DATA copies files
into the table's directory (Hive.loadTable/loadPartition) before the table's validity is
checked; partitions cannot be answered per client (partition calls declare nothing), so
their locations and formats stay as stored.

**Back from the client.** A client that sends the form back (alter_table of the table it
got, add_partition whose storage Hive's ``Partition`` copies from the table) gets the stored
table's formats, serde and type restored (``stored_table``, ``stored_partition``); a new
table in the form is refused (it could never be read).
"""

from __future__ import annotations

import copy
from typing import Any

from hms_txn.common.errors import InvalidObject
from hms_txn.domain.catalog import capabilities as caps

Doc = dict[str, Any]

# input and output format of the plain form: no such class exists, its name is the message
PLAIN_FORMAT = "ACID.table.use.spark.hive_acid"

_VIEW_TYPES = ("VIRTUAL_VIEW",)


def needs_plain_form(doc: Doc, client: caps.Declared) -> bool:
    """Whether a client that declared ``client`` gets ``doc`` in the plain form."""
    if doc.get("tableType") in _VIEW_TYPES:
        return False
    kind = caps.acid_kind(doc)
    if kind == caps.INSERT_ONLY:
        return not client.insert_only_tables
    return kind == caps.FULL_ACID and not client.anything


def plain_form(source: Doc) -> Doc:
    """The plain form of the ACID table ``source`` (a new document)."""
    doc = caps.transform([source], [])[0]      # accessType NONE, required capabilities
    sd = dict(doc.get("sd") or {})
    sd["inputFormat"] = sd["outputFormat"] = PLAIN_FORMAT
    sd["serdeInfo"] = {**(sd.get("serdeInfo") or {}), "serializationLib": ""}
    doc["sd"] = sd
    doc["tableType"] = "EXTERNAL_TABLE"
    doc["parameters"] = {**(doc.get("parameters") or {}), "EXTERNAL": "TRUE"}
    return doc


def in_plain_form(sd: Doc | None) -> bool:
    return bool(sd) and PLAIN_FORMAT in (sd.get("inputFormat"), sd.get("outputFormat"))


def _restore_storage(sd: Doc, stored_sd: Doc) -> Doc:
    sd = dict(sd)
    sd["inputFormat"] = stored_sd.get("inputFormat")
    sd["outputFormat"] = stored_sd.get("outputFormat")
    serde = dict(sd.get("serdeInfo") or {})
    lib = (stored_sd.get("serdeInfo") or {}).get("serializationLib")
    if lib is None:
        serde.pop("serializationLib", None)
    else:
        serde["serializationLib"] = lib
    sd["serdeInfo"] = serde
    return sd


def stored_table(new: Doc, old: Doc | None) -> Doc:
    """``new`` (a table a client sent: ``old``'s new definition, or a new table when
    ``old`` is None) without what is computed per client: Hive 4's per-client fields
    (``capabilities.stored_form``) and the plain form, whose storage and type are the
    stored table's again."""
    doc = caps.stored_form(new)
    if not in_plain_form(doc.get("sd")):
        return doc
    name = f"{doc.get('dbName')}.{doc.get('tableName')}"
    if old is None:
        raise InvalidObject(
            f"table {name} names {PLAIN_FORMAT} as its format: that is how the metastore "
            f"hands an ACID table to a client that does not understand ACID tables, and no "
            f"reader can read such a table; create it with a real input and output format")
    doc = copy.copy(doc)
    doc["sd"] = _restore_storage(doc["sd"], old.get("sd") or {})
    doc["tableType"] = old.get("tableType")
    params = dict(doc.get("parameters") or {})
    if "EXTERNAL" in (old.get("parameters") or {}):
        params["EXTERNAL"] = old["parameters"]["EXTERNAL"]
    else:
        params.pop("EXTERNAL", None)
    doc["parameters"] = params
    return doc


def stored_partition(part: Doc, table: Doc) -> Doc:
    """A partition a client sent, with the stored table's formats and serde where it
    carries the plain form's (Hive's ``Partition`` copies the table's storage descriptor,
    Spark's ADD PARTITION and MSCK REPAIR TABLE among its callers)."""
    if not in_plain_form(part.get("sd")):
        return part
    part = copy.copy(part)
    part["sd"] = _restore_storage(part["sd"], table.get("sd") or {})
    return part
