/*
 * The JVM reader of hive_acid's fast path (spark/_jvm.py compiles this file with Janino, the
 * compiler Spark itself ships for its code generation, inside the driver's JVM: no JDK and no
 * jar to install).
 *
 * A Spark DataSource V2 source that reads the data files of one ACID table snapshot, as the
 * Python driver planned them (spark/_native.py), with the ORC library Spark uses, into
 * columnar batches whose columns are the table columns themselves: the children of the ACID
 * event's `row` struct, wrapped with Spark's own ORC column vectors. So a query pays what a
 * scan of a plain ORC file with these columns pays:
 *
 *  - only the columns Spark asks for are decoded (column pruning; `row`'s other fields are
 *    not included in the ORC read);
 *  - the five ACID columns are decoded only for the pieces of files that have delete events
 *    (originalTransaction, bucket, rowId), that hold rows of invalid write ids
 *    (currentTransaction), or when the query asks for ROW__ID;
 *  - deleted and invalid rows are removed inside the reader, per piece, from that piece's
 *    own delete events (sorted rowIds per (originalTransaction, bucket) pair, walked in step
 *    with the rows, which ascend within a file): nothing is broadcast, and a batch without
 *    removed rows is handed to Spark as read;
 *  - filters Spark pushes become an ORC search argument (row-group skipping by the files'
 *    statistics; the ORC library resolves the names inside `row` for ACID files); Spark
 *    still evaluates every filter.
 *
 * The plan arrives as the option "hive_acid.plan" (JSON):
 *   {"partitions": [[piece, ...], ...],           one Spark input partition per list
 *    "deletes": [[[ot, bucket, "<base64 of big-endian int64 rowIds>"], ...], ...]}
 *   piece: {"p": file URI, "o": offset, "l": length (stripes starting in [o, o+l); -1: all),
 *           "d": index into "deletes" or -1, "h": high watermark or -1 (no validity check),
 *           "x": [invalid write ids]}
 * and the schema (DataFrameReader.schema) is the table's columns in the files' `row` order,
 * optionally with "ROW__ID" struct<writeid:bigint,bucketid:int,rowid:bigint>.
 *
 * Written for Janino: no lambdas, no generic type inference (raw types and casts).
 */
package hmstxn.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.EnumSet;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.ql.exec.vector.LongColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.StructColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatch;
import org.apache.hadoop.hive.ql.io.sarg.SearchArgument;
import org.apache.orc.OrcFile;
import org.apache.orc.Reader;
import org.apache.orc.RecordReader;
import org.apache.orc.TypeDescription;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.SerializableConfiguration;

public class AcidOrcSource implements TableProvider {

    public static final String PLAN = "hive_acid.plan";
    public static final String ROW_ID = "ROW__ID";
    public static final String TABLE = "hive_acid.table";
    public static final String BATCH_ROWS = "hive_acid.batchRows";

    public StructType inferSchema(CaseInsensitiveStringMap options) {
        throw new IllegalArgumentException("hive_acid's JVM reader needs the table's schema");
    }

    public boolean supportsExternalMetadata() {
        return true;
    }

    public Table getTable(StructType schema, Transform[] partitioning, Map properties) {
        return new AcidTable(schema, (String) properties.get(TABLE));
    }

    /** The table of one snapshot: its columns, read in batches. */
    public static class AcidTable implements SupportsRead {
        private final StructType schema;
        private final String name;

        AcidTable(StructType schema, String name) {
            this.schema = schema;
            this.name = name == null ? "hive_acid" : name;
        }

        public String name() {
            return name;
        }

        public StructType schema() {
            return schema;
        }

        public Set capabilities() {
            return EnumSet.of(TableCapability.BATCH_READ);
        }

        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            return new AcidScanBuilder(schema, name, options);
        }
    }

    public static class AcidScanBuilder
            implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters {
        private final StructType schema;
        private final String name;
        private final CaseInsensitiveStringMap options;
        private StructType required;
        private Filter[] pushed = new Filter[0];

        AcidScanBuilder(StructType schema, String name, CaseInsensitiveStringMap options) {
            this.schema = schema;
            this.required = schema;
            this.name = name;
            this.options = options;
        }

        public void pruneColumns(StructType requiredSchema) {
            // top-level pruning only: a nested column is read whole (its full type is a
            // superset of the pruned one Spark asks for, which Spark projects from)
            List fields = new ArrayList();
            StructField[] all = schema.fields();
            for (int i = 0; i < all.length; i++) {
                if (hasField(requiredSchema, all[i].name())) {
                    fields.add(all[i]);
                }
            }
            required = new StructType((StructField[]) fields.toArray(new StructField[0]));
        }

        public Filter[] pushFilters(Filter[] filters) {
            pushed = filters;
            return filters;       // for row-group skipping only: Spark evaluates them all
        }

        public Filter[] pushedFilters() {
            return pushed;
        }

        public Scan build() {
            return new AcidScan(schema, required, name, options, pushed);
        }
    }

    static boolean hasField(StructType st, String name) {
        StructField[] fs = st.fields();
        for (int i = 0; i < fs.length; i++) {
            if (fs[i].name().equalsIgnoreCase(name)) {
                return true;
            }
        }
        return false;
    }

    public static class AcidScan implements Scan, Batch {
        private final StructType schema;
        private final StructType required;
        private final String name;
        private final CaseInsensitiveStringMap options;
        private final Filter[] filters;

        AcidScan(StructType schema, StructType required, String name,
                 CaseInsensitiveStringMap options, Filter[] filters) {
            this.schema = schema;
            this.required = required;
            this.name = name;
            this.options = options;
            this.filters = filters;
        }

        public StructType readSchema() {
            return required;
        }

        public String description() {
            return "hive_acid " + name;
        }

        public Batch toBatch() {
            return this;
        }

        public InputPartition[] planInputPartitions() {
            JsonNode plan;
            try {
                plan = new ObjectMapper().readTree(options.get(PLAN));
            } catch (IOException e) {
                throw new IllegalArgumentException("hive_acid: unreadable plan", e);
            }
            JsonNode dels = ((JsonNode) plan.get("deletes"));
            DeleteSet[] sets = new DeleteSet[dels == null ? 0 : dels.size()];
            for (int i = 0; i < sets.length; i++) {
                sets[i] = DeleteSet.of(((JsonNode) dels.get(i)));
            }
            JsonNode parts = ((JsonNode) plan.get("partitions"));
            InputPartition[] out = new InputPartition[parts.size()];
            for (int i = 0; i < out.length; i++) {
                JsonNode ps = ((JsonNode) parts.get(i));
                Piece[] pieces = new Piece[ps.size()];
                for (int j = 0; j < pieces.length; j++) {
                    pieces[j] = Piece.of(((JsonNode) ps.get(j)), sets);
                }
                out[i] = new AcidPartition(pieces);
            }
            return out;
        }

        public PartitionReaderFactory createReaderFactory() {
            Configuration conf;
            try {
                conf = org.apache.spark.sql.classic.SparkSession.active().sessionState()
                        .newHadoopConf();
            } catch (Throwable t) {
                conf = org.apache.spark.SparkContext.getOrCreate().hadoopConfiguration();
            }
            String rows = options.get(BATCH_ROWS);
            return new AcidReaderFactory(schema, required, new SerializableConfiguration(conf),
                    filters, rows == null ? 4096 : Integer.parseInt(rows));
        }
    }

    /** The delete events of one split: per (originalTransaction, bucket), sorted rowIds. */
    public static class DeleteSet implements java.io.Serializable {
        final long[] ot;
        final int[] bucket;
        final long[][] rows;

        DeleteSet(long[] ot, int[] bucket, long[][] rows) {
            this.ot = ot;
            this.bucket = bucket;
            this.rows = rows;
        }

        static DeleteSet of(JsonNode n) {
            int k = n.size();
            long[] ot = new long[k];
            int[] bucket = new int[k];
            long[][] rows = new long[k][];
            for (int i = 0; i < k; i++) {
                JsonNode p = ((JsonNode) n.get(i));
                ot[i] = ((JsonNode) p.get(0)).asLong();
                bucket[i] = ((JsonNode) p.get(1)).asInt();
                java.nio.LongBuffer lb = java.nio.ByteBuffer.wrap(
                        Base64.getDecoder().decode(((JsonNode) p.get(2)).asText())).asLongBuffer();
                rows[i] = new long[lb.remaining()];
                lb.get(rows[i]);
            }
            return new DeleteSet(ot, bucket, rows);
        }
    }

    /** A file, or the stripes of a file starting in [offset, offset + length). */
    public static class Piece implements java.io.Serializable {
        final String path;
        final long offset;
        final long length;
        final DeleteSet deletes;        // null: no delete events for these rows
        final long hwm;                 // -1: every row's write id is valid
        final long[] invalid;           // sorted

        Piece(String path, long offset, long length, DeleteSet deletes, long hwm,
              long[] invalid) {
            this.path = path;
            this.offset = offset;
            this.length = length;
            this.deletes = deletes;
            this.hwm = hwm;
            this.invalid = invalid;
        }

        static Piece of(JsonNode n, DeleteSet[] sets) {
            int d = n.has("d") ? ((JsonNode) n.get("d")).asInt() : -1;
            long[] invalid = new long[0];
            JsonNode x = ((JsonNode) n.get("x"));
            if (x != null) {
                invalid = new long[x.size()];
                for (int i = 0; i < invalid.length; i++) {
                    invalid[i] = ((JsonNode) x.get(i)).asLong();
                }
                Arrays.sort(invalid);
            }
            return new Piece(((JsonNode) n.get("p")).asText(), n.has("o") ? ((JsonNode) n.get("o")).asLong() : 0L,
                    n.has("l") ? ((JsonNode) n.get("l")).asLong() : -1L, d < 0 ? null : sets[d],
                    n.has("h") ? ((JsonNode) n.get("h")).asLong() : -1L, invalid);
        }

        boolean filters() {
            return deletes != null || hwm >= 0;
        }
    }

    public static class AcidPartition implements InputPartition {
        final Piece[] pieces;

        AcidPartition(Piece[] pieces) {
            this.pieces = pieces;
        }
    }

    public static class AcidReaderFactory implements PartitionReaderFactory {
        final StructType schema;
        final StructType required;
        final SerializableConfiguration conf;
        final Filter[] filters;
        final int batchRows;

        AcidReaderFactory(StructType schema, StructType required, SerializableConfiguration conf,
                          Filter[] filters, int batchRows) {
            this.schema = schema;
            this.required = required;
            this.conf = conf;
            this.filters = filters;
            this.batchRows = batchRows;
        }

        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }

        public PartitionReader createColumnarReader(InputPartition partition) {
            return new AcidBatchReader(this, ((AcidPartition) partition).pieces);
        }

        public PartitionReader createReader(InputPartition partition) {
            return new RowReader(createColumnarReader(partition));
        }
    }

    /** Rows of the batches (for a plan Spark does not run columnar). */
    static class RowReader implements PartitionReader {
        private final PartitionReader batches;
        private Iterator rows;
        private Object row;

        RowReader(PartitionReader batches) {
            this.batches = batches;
        }

        public boolean next() throws IOException {
            while (rows == null || !rows.hasNext()) {
                if (!batches.next()) {
                    return false;
                }
                rows = ((ColumnarBatch) batches.get()).rowIterator();
            }
            row = rows.next();
            return true;
        }

        public Object get() {
            return row;
        }

        public void close() throws IOException {
            batches.close();
        }
    }

    static final java.lang.reflect.Method TO_ORC_VECTOR = orcVectorFactory();

    static java.lang.reflect.Method orcVectorFactory() {
        try {
            Class c = Class.forName(
                    "org.apache.spark.sql.execution.datasources.orc.OrcColumnVectorUtils");
            java.lang.reflect.Method m = c.getDeclaredMethod("toOrcColumnVector",
                    new Class[] {DataType.class,
                        org.apache.hadoop.hive.ql.exec.vector.ColumnVector.class});
            m.setAccessible(true);
            return m;
        } catch (Exception e) {
            throw new IllegalStateException("Spark's ORC column vectors are not available", e);
        }
    }

    /** Spark's own column vector over an ORC column (what its ORC reader hands out). */
    static ColumnVector sparkVector(DataType type,
                                    org.apache.hadoop.hive.ql.exec.vector.ColumnVector orc) {
        try {
            return (ColumnVector) TO_ORC_VECTOR.invoke(null, new Object[] {type, orc});
        } catch (Exception e) {
            throw new IllegalStateException("cannot wrap an ORC column vector", e);
        }
    }

    public static class AcidBatchReader implements PartitionReader {
        private final AcidReaderFactory f;
        private final Piece[] pieces;
        private int next;
        private Configuration conf;
        private SearchArgument sarg;
        private boolean sargBuilt;
        private RecordReader rr;
        private Piece piece;
        private TypeDescription fileSchema;
        private VectorizedRowBatch batch;
        private ColumnarBatch plain;
        private ColumnarBatch selected;
        private Selected[] selectedCols;
        private int[] sel;
        private ColumnarBatch current;
        // delete walk state of the current piece
        private int[] pos;
        private int pair;

        AcidBatchReader(AcidReaderFactory f, Piece[] pieces) {
            this.f = f;
            this.pieces = pieces;
            this.conf = f.conf.value();
        }

        private boolean wantsRowId() {
            return hasField(f.required, ROW_ID);
        }

        private boolean open() throws IOException {
            if (next >= pieces.length) {
                return false;
            }
            piece = pieces[next++];
            Reader reader = OrcFile.createReader(new Path(piece.path), OrcFile.readerOptions(conf));
            TypeDescription schema = reader.getSchema();
            if (fileSchema == null) {
                setUp(schema);
            } else if (!fileSchema.equals(schema)) {
                throw new IOException(piece.path + ": schema " + schema + " differs from "
                        + fileSchema + " (the plan checked every file)");
            }
            boolean[] include = new boolean[schema.getMaximumId() + 1];
            include[0] = true;
            boolean acid = piece.filters() || wantsRowId();
            if (acid) {
                include[2] = true;      // originalTransaction
                include[3] = true;      // bucket
                include[4] = true;      // rowId
                include[5] = piece.hwm >= 0;    // currentTransaction
            }
            TypeDescription row = (TypeDescription) schema.getChildren().get(5);
            List names = row.getFieldNames();
            List kids = row.getChildren();
            StructField[] req = f.required.fields();
            for (int i = 0; i < req.length; i++) {
                if (req[i].name().equals(ROW_ID)) {
                    continue;
                }
                int j = indexOf(names, req[i].name());
                TypeDescription t = (TypeDescription) kids.get(j);
                include[row.getId()] = true;
                for (int id = t.getId(); id <= t.getMaximumId(); id++) {
                    include[id] = true;
                }
            }
            Reader.Options opts = reader.options().schema(schema).include(include);
            if (piece.length >= 0) {
                opts = opts.range(piece.offset, piece.length);
            }
            SearchArgument s = searchArgument();
            if (s != null) {
                opts = opts.searchArgument(s, new String[0]);
            }
            rr = reader.rows(opts);
            if (piece.deletes != null) {
                pos = new int[piece.deletes.ot.length];
                pair = -1;
            }
            return true;
        }

        private SearchArgument searchArgument() {
            if (!sargBuilt) {
                sargBuilt = true;
                if (f.filters.length > 0) {
                    try {
                        StructType data = withoutRowId(f.schema);
                        scala.Option o = org.apache.spark.sql.execution.datasources.orc.OrcFilters
                                .createFilter(data, (scala.collection.immutable.Seq)
                                        scala.jdk.javaapi.CollectionConverters.asScala(
                                                Arrays.asList(f.filters)).toList(),
                                        scala.Option.empty());
                        sarg = o.isDefined() ? (SearchArgument) o.get() : null;
                    } catch (Throwable t) {
                        sarg = null;        // no row-group skipping; results are the same
                    }
                }
            }
            return sarg;
        }

        private static StructType withoutRowId(StructType st) {
            List fields = new ArrayList();
            StructField[] all = st.fields();
            for (int i = 0; i < all.length; i++) {
                if (!all[i].name().equals(ROW_ID)) {
                    fields.add(all[i]);
                }
            }
            return new StructType((StructField[]) fields.toArray(new StructField[0]));
        }

        private static int indexOf(List names, String name) {
            for (int i = 0; i < names.size(); i++) {
                if (((String) names.get(i)).equalsIgnoreCase(name)) {
                    return i;
                }
            }
            throw new IllegalArgumentException("column " + name + " is not in the files");
        }

        /** The batch and its Spark vectors (once: every file has the same schema). */
        private void setUp(TypeDescription schema) {
            fileSchema = schema;
            batch = schema.createRowBatch(f.batchRows);
            StructColumnVector row = (StructColumnVector) batch.cols[5];
            List names = ((TypeDescription) schema.getChildren().get(5)).getFieldNames();
            StructField[] req = f.required.fields();
            ColumnVector[] cols = new ColumnVector[req.length];
            selectedCols = new Selected[req.length];
            for (int i = 0; i < req.length; i++) {
                if (req[i].name().equals(ROW_ID)) {
                    cols[i] = new RowIdVector(req[i].dataType(), new ColumnVector[] {
                        sparkVector(org.apache.spark.sql.types.DataTypes.LongType, batch.cols[1]),
                        sparkVector(org.apache.spark.sql.types.DataTypes.IntegerType,
                                batch.cols[2]),
                        sparkVector(org.apache.spark.sql.types.DataTypes.LongType,
                                batch.cols[3])});
                } else {
                    cols[i] = sparkVector(req[i].dataType(),
                            row.fields[indexOf(names, req[i].name())]);
                }
                selectedCols[i] = new Selected(cols[i]);
            }
            plain = new ColumnarBatch(cols);
            selected = new ColumnarBatch((ColumnVector[]) selectedCols);
            sel = new int[f.batchRows];
        }

        public boolean next() throws IOException {
            while (true) {
                if (rr == null && !open()) {
                    return false;
                }
                if (!rr.nextBatch(batch)) {
                    rr.close();
                    rr = null;
                    continue;
                }
                int n = batch.size;
                if (n == 0) {
                    continue;
                }
                if (!piece.filters()) {
                    plain.setNumRows(n);
                    current = plain;
                    return true;
                }
                int kept = keep(n);
                if (kept == n) {
                    plain.setNumRows(n);
                    current = plain;
                    return true;
                }
                if (kept > 0) {
                    for (int i = 0; i < selectedCols.length; i++) {
                        selectedCols[i].select(sel);
                    }
                    selected.setNumRows(kept);
                    current = selected;
                    return true;
                }
            }
        }

        /** Fill sel with the rows of the batch that are valid and not deleted -> their count. */
        private int keep(int n) {
            LongColumnVector ot = (LongColumnVector) batch.cols[1];
            LongColumnVector bk = (LongColumnVector) batch.cols[2];
            LongColumnVector rid = (LongColumnVector) batch.cols[3];
            LongColumnVector ct = (LongColumnVector) batch.cols[4];
            DeleteSet d = piece.deletes;
            int k = 0;
            for (int i = 0; i < n; i++) {
                if (piece.hwm >= 0) {
                    long c = ct.vector[ct.isRepeating ? 0 : i];
                    if (c > piece.hwm || Arrays.binarySearch(piece.invalid, c) >= 0) {
                        continue;
                    }
                }
                if (d != null && deleted(d, ot.vector[ot.isRepeating ? 0 : i],
                        (int) bk.vector[bk.isRepeating ? 0 : i],
                        rid.vector[rid.isRepeating ? 0 : i])) {
                    continue;
                }
                sel[k++] = i;
            }
            return k;
        }

        private boolean deleted(DeleteSet d, long o, int b, long r) {
            int j = pair;
            if (j < 0 || d.ot[j] != o || d.bucket[j] != b) {
                j = -1;
                for (int q = 0; q < d.ot.length; q++) {
                    if (d.ot[q] == o && d.bucket[q] == b) {
                        j = q;
                        break;
                    }
                }
                pair = j;
                if (j < 0) {
                    return false;
                }
            }
            long[] rows = d.rows[j];
            int p = pos[j];
            if (p > 0 && rows[p - 1] >= r) {
                // rowIds went back (not expected within a file): look it up
                return Arrays.binarySearch(rows, r) >= 0;
            }
            while (p < rows.length && rows[p] < r) {
                p++;
            }
            pos[j] = p;
            return p < rows.length && rows[p] == r;
        }

        public Object get() {
            return current;
        }

        public void close() throws IOException {
            if (rr != null) {
                rr.close();
                rr = null;
            }
            next = pieces.length;
        }
    }

    /** ROW__ID: struct<writeid, bucketid, rowid> over the event's three key columns. */
    static class RowIdVector extends ColumnVector {
        private final ColumnVector[] kids;

        RowIdVector(DataType type, ColumnVector[] kids) {
            super(type);
            this.kids = kids;
        }

        public void close() {
        }

        public boolean hasNull() {
            return false;
        }

        public int numNulls() {
            return 0;
        }

        public boolean isNullAt(int i) {
            return false;
        }

        public ColumnVector getChild(int ordinal) {
            return kids[ordinal];
        }

        public boolean getBoolean(int i) {
            throw new UnsupportedOperationException();
        }

        public byte getByte(int i) {
            throw new UnsupportedOperationException();
        }

        public short getShort(int i) {
            throw new UnsupportedOperationException();
        }

        public int getInt(int i) {
            throw new UnsupportedOperationException();
        }

        public long getLong(int i) {
            throw new UnsupportedOperationException();
        }

        public float getFloat(int i) {
            throw new UnsupportedOperationException();
        }

        public double getDouble(int i) {
            throw new UnsupportedOperationException();
        }

        public ColumnarArray getArray(int i) {
            throw new UnsupportedOperationException();
        }

        public ColumnarMap getMap(int i) {
            throw new UnsupportedOperationException();
        }

        public Decimal getDecimal(int i, int precision, int scale) {
            throw new UnsupportedOperationException();
        }

        public UTF8String getUTF8String(int i) {
            throw new UnsupportedOperationException();
        }

        public byte[] getBinary(int i) {
            throw new UnsupportedOperationException();
        }
    }

    /** A column restricted to the selected rows of its batch (row i = row sel[i]). */
    static class Selected extends ColumnVector {
        private final ColumnVector d;
        private int[] sel;
        private Selected[] kids;

        Selected(ColumnVector d) {
            super(d.dataType());
            this.d = d;
        }

        void select(int[] s) {
            sel = s;
            if (kids != null) {
                for (int i = 0; i < kids.length; i++) {
                    if (kids[i] != null) {
                        kids[i].select(s);
                    }
                }
            }
        }

        public void close() {
        }

        public boolean hasNull() {
            return d.hasNull();
        }

        public int numNulls() {
            return d.numNulls();
        }

        public boolean isNullAt(int i) {
            return d.isNullAt(sel[i]);
        }

        public ColumnVector getChild(int ordinal) {
            if (kids == null) {
                kids = new Selected[((StructType) d.dataType()).fields().length];
            }
            if (kids[ordinal] == null) {
                kids[ordinal] = new Selected(d.getChild(ordinal));
                kids[ordinal].select(sel);
            }
            return kids[ordinal];
        }

        public boolean getBoolean(int i) {
            return d.getBoolean(sel[i]);
        }

        public byte getByte(int i) {
            return d.getByte(sel[i]);
        }

        public short getShort(int i) {
            return d.getShort(sel[i]);
        }

        public int getInt(int i) {
            return d.getInt(sel[i]);
        }

        public long getLong(int i) {
            return d.getLong(sel[i]);
        }

        public float getFloat(int i) {
            return d.getFloat(sel[i]);
        }

        public double getDouble(int i) {
            return d.getDouble(sel[i]);
        }

        public ColumnarArray getArray(int i) {
            return d.getArray(sel[i]);
        }

        public ColumnarMap getMap(int i) {
            return d.getMap(sel[i]);
        }

        public Decimal getDecimal(int i, int precision, int scale) {
            return d.getDecimal(sel[i], precision, scale);
        }

        public UTF8String getUTF8String(int i) {
            return d.getUTF8String(sel[i]);
        }

        public byte[] getBinary(int i) {
            return d.getBinary(sel[i]);
        }
    }
}
