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
 *  - deleted and invalid rows are removed inside the reader: each task reads the delete
 *    events of the splits (buckets) of its files itself (the valid ones, as orc_acid does:
 *    by currentTransaction where the delete delta spans invalid write ids), once per task,
 *    keeps per data file those whose originalTransaction lies in the file's write id range,
 *    and walks them (sorted rowIds per (originalTransaction, bucket) pair) in step with the
 *    file's rows, which ascend: nothing is read on the driver or broadcast, and a file no
 *    delete event can hit is read without any ACID column; a batch without removed rows is
 *    handed to Spark as read;
 *  - filters Spark pushes become an ORC search argument (row-group skipping by the files'
 *    statistics; the ORC library resolves the names inside `row` for ACID files); Spark
 *    still evaluates every filter.
 *
 * The plan arrives as the option "hive_acid.plan" (JSON):
 *   {"table": "db.t", "schema": <the columns, Spark's JSON of a struct type: the table's
 *    columns in the files' `row` order, optionally with "ROW__ID"
 *    struct<writeid:bigint,bucketid:int,rowid:bigint>>, "lease": id (optional: see
 *    leaseAlive), "splits": [[deleteFile, ...], ...]  the delete files of each split,
 *    "files": [file, ...]}
 *   file: {"p": URI, "n": bytes, "lo"/"hi": the write ids its rows were inserted by
 *          (originalTransaction), "s": index into "splits" (absent: no delete events),
 *          "h": high watermark and "x": invalid write ids (absent: every row's write id
 *          is valid)}
 *   deleteFile: {"p": URI, "h"/"x": as above}
 * The files are cut and packed into Spark input partitions as Spark packs a plain file
 * scan (spark.sql.files.maxPartitionBytes, openCostInBytes, minPartitionNum): large files
 * become byte ranges (ORC reads the stripes starting in a range), small ones share a task.
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
    public static final String BATCH_ROWS = "hive_acid.batchRows";

    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return (StructType) DataType.fromJson(plan(options.get(PLAN)).get("schema").toString());
    }

    static JsonNode plan(String text) {
        try {
            return new ObjectMapper().readTree(text);
        } catch (IOException e) {
            throw new IllegalArgumentException("hive_acid: unreadable plan", e);
        }
    }

    // The tables made for each lease (a read lock of the Python driver, spark/_leases.py):
    // the lease lasts while the JVM can reach one of them (every plan that reads them holds
    // them), which the driver asks through leaseAlive after a garbage collection.
    static final java.util.concurrent.ConcurrentHashMap LEASES =
            new java.util.concurrent.ConcurrentHashMap();

    /** Forget lease ``id`` (its lock ended). */
    public static void leaseEnd(String id) {
        LEASES.remove(id);
    }

    /** Can the JVM still reach a table made for lease ``id``? (Forgets it when not.) */
    public static boolean leaseAlive(String id) {
        List refs = (List) LEASES.get(id);
        if (refs == null) {
            return false;
        }
        synchronized (refs) {
            for (int i = 0; i < refs.size(); i++) {
                if (((java.lang.ref.WeakReference) refs.get(i)).get() != null) {
                    return true;
                }
            }
        }
        LEASES.remove(id);
        return false;
    }

    public boolean supportsExternalMetadata() {
        return true;
    }

    public Table getTable(StructType schema, Transform[] partitioning, Map properties) {
        JsonNode plan = plan((String) properties.get(PLAN));
        AcidTable table = new AcidTable(schema, ((JsonNode) plan.get("table")).asText());
        if (plan.has("lease")) {
            String id = ((JsonNode) plan.get("lease")).asText();
            LEASES.putIfAbsent(id, new ArrayList());
            List refs = (List) LEASES.get(id);
            synchronized (refs) {
                refs.add(new java.lang.ref.WeakReference(table));
            }
        }
        return table;
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
            JsonNode plan = plan(options.get(PLAN));
            JsonNode splits = ((JsonNode) plan.get("splits"));
            DeleteFile[][] deletes = new DeleteFile[splits == null ? 0 : splits.size()][];
            for (int i = 0; i < deletes.length; i++) {
                JsonNode fs = ((JsonNode) splits.get(i));
                deletes[i] = new DeleteFile[fs.size()];
                for (int j = 0; j < deletes[i].length; j++) {
                    JsonNode f = ((JsonNode) fs.get(j));
                    deletes[i][j] = new DeleteFile(((JsonNode) f.get("p")).asText(),
                            hwm(f), invalid(f));
                }
            }
            JsonNode files = ((JsonNode) plan.get("files"));
            long[] sizes = new long[files.size()];
            long total = 0;
            org.apache.spark.sql.internal.SQLConf conf = org.apache.spark.sql.internal.SQLConf.get();
            long openCost = conf.filesOpenCostInBytes();
            for (int i = 0; i < sizes.length; i++) {
                sizes[i] = ((JsonNode) ((JsonNode) files.get(i)).get("n")).asLong();
                total += sizes[i] + openCost;
            }
            // Spark's FilePartition.maxSplitBytes and getFilePartitions
            long minParts;
            scala.Option configured = conf.filesMinPartitionNum();
            if (configured.isDefined()) {
                minParts = ((Number) configured.get()).longValue();
            } else {
                minParts = org.apache.spark.SparkContext.getOrCreate().defaultParallelism();
            }
            long split = Math.min(conf.filesMaxPartitionBytes(),
                    Math.max(openCost, total / Math.max(1, minParts)));
            List pieces = new ArrayList();          // of long[] {file, offset, length, bytes}
            for (int i = 0; i < sizes.length; i++) {
                if (sizes[i] <= split) {
                    pieces.add(new long[] {i, 0, -1, sizes[i]});
                } else {
                    for (long off = 0; off < sizes[i]; off += split) {
                        long len = Math.min(split, sizes[i] - off);
                        pieces.add(new long[] {i, off, len, len});
                    }
                }
            }
            java.util.Collections.sort(pieces, new java.util.Comparator() {
                public int compare(Object a, Object b) {
                    return Long.compare(((long[]) b)[3], ((long[]) a)[3]);
                }
            });
            List out = new ArrayList();
            List current = new ArrayList();
            long used = 0;
            for (int i = 0; i < pieces.size(); i++) {
                long[] p = (long[]) pieces.get(i);
                if (!current.isEmpty() && used + p[3] > split) {
                    out.add(new AcidPartition((Piece[]) current.toArray(new Piece[0])));
                    current = new ArrayList();
                    used = 0;
                }
                current.add(Piece.of((JsonNode) files.get((int) p[0]), p[1], p[2], deletes));
                used += p[3] + openCost;
            }
            if (!current.isEmpty()) {
                out.add(new AcidPartition((Piece[]) current.toArray(new Piece[0])));
            }
            return (InputPartition[]) out.toArray(new InputPartition[0]);
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

    static long hwm(JsonNode n) {
        return n.has("h") ? ((JsonNode) n.get("h")).asLong() : -1L;
    }

    static long[] invalid(JsonNode n) {
        JsonNode x = ((JsonNode) n.get("x"));
        long[] out = new long[x == null ? 0 : x.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = ((JsonNode) x.get(i)).asLong();
        }
        Arrays.sort(out);
        return out;
    }

    /** Is write id c valid? (hwm < 0: every one is.) */
    static boolean valid(long c, long hwm, long[] invalid) {
        return hwm < 0 || (c <= hwm && Arrays.binarySearch(invalid, c) < 0);
    }

    /** A delete delta file of a split, and the write ids its events must have (hwm < 0: any). */
    public static class DeleteFile implements java.io.Serializable {
        final String path;
        final long hwm;
        final long[] invalid;

        DeleteFile(String path, long hwm, long[] invalid) {
            this.path = path;
            this.hwm = hwm;
            this.invalid = invalid;
        }
    }

    /** Delete events: per (originalTransaction, bucket) pair, sorted rowIds. */
    public static class DeleteSet {
        final long[] ot;
        final int[] bucket;
        final long[][] rows;

        DeleteSet(long[] ot, int[] bucket, long[][] rows) {
            this.ot = ot;
            this.bucket = bucket;
            this.rows = rows;
        }

        /** The valid events of a split's delete files (read in the task). */
        static DeleteSet read(DeleteFile[] files, Configuration conf) throws IOException {
            List ots = new ArrayList();
            List buckets = new ArrayList();
            List rows = new ArrayList();        // of long[1 + n]: [0] = count
            for (int f = 0; f < files.length; f++) {
                DeleteFile d = files[f];
                Reader reader = OrcFile.createReader(new Path(d.path),
                        OrcFile.readerOptions(conf));
                TypeDescription schema = reader.getSchema();
                boolean[] include = new boolean[schema.getMaximumId() + 1];
                include[0] = true;
                include[2] = true;
                include[3] = true;
                include[4] = true;
                include[5] = d.hwm >= 0;
                RecordReader rr = reader.rows(reader.options().schema(schema).include(include));
                VectorizedRowBatch b = schema.createRowBatch(4096);
                int last = -1;
                try {
                    while (rr.nextBatch(b)) {
                        LongColumnVector ot = (LongColumnVector) b.cols[1];
                        LongColumnVector bk = (LongColumnVector) b.cols[2];
                        LongColumnVector rid = (LongColumnVector) b.cols[3];
                        LongColumnVector ct = (LongColumnVector) b.cols[4];
                        for (int i = 0; i < b.size; i++) {
                            if (d.hwm >= 0 && !valid(ct.vector[ct.isRepeating ? 0 : i], d.hwm,
                                    d.invalid)) {
                                continue;
                            }
                            long o = ot.vector[ot.isRepeating ? 0 : i];
                            int k = (int) bk.vector[bk.isRepeating ? 0 : i];
                            if (last < 0 || ((Long) ots.get(last)).longValue() != o
                                    || ((Integer) buckets.get(last)).intValue() != k) {
                                last = -1;
                                for (int q = 0; q < ots.size(); q++) {
                                    if (((Long) ots.get(q)).longValue() == o
                                            && ((Integer) buckets.get(q)).intValue() == k) {
                                        last = q;
                                        break;
                                    }
                                }
                                if (last < 0) {
                                    ots.add(Long.valueOf(o));
                                    buckets.add(Integer.valueOf(k));
                                    rows.add(new long[17]);
                                    last = ots.size() - 1;
                                }
                            }
                            long[] r = (long[]) rows.get(last);
                            int n = (int) r[0];
                            if (n + 1 == r.length) {
                                r = Arrays.copyOf(r, r.length * 2);
                                rows.set(last, r);
                            }
                            r[n + 1] = rid.vector[rid.isRepeating ? 0 : i];
                            r[0] = n + 1;
                        }
                    }
                } finally {
                    rr.close();
                    reader.close();
                }
            }
            int k = ots.size();
            long[] ot = new long[k];
            int[] bucket = new int[k];
            long[][] sorted = new long[k][];
            for (int i = 0; i < k; i++) {
                ot[i] = ((Long) ots.get(i)).longValue();
                bucket[i] = ((Integer) buckets.get(i)).intValue();
                long[] r = (long[]) rows.get(i);
                sorted[i] = Arrays.copyOfRange(r, 1, 1 + (int) r[0]);
                Arrays.sort(sorted[i]);     // one pass when already sorted (one file)
            }
            return new DeleteSet(ot, bucket, sorted);
        }

        /** The events that can hit the rows of write ids lo..hi; null when none can. */
        DeleteSet hitting(long lo, long hi) {
            int n = 0;
            for (int i = 0; i < ot.length; i++) {
                if (ot[i] >= lo && ot[i] <= hi) {
                    n++;
                }
            }
            if (n == 0) {
                return null;
            }
            long[] o = new long[n];
            int[] b = new int[n];
            long[][] r = new long[n][];
            n = 0;
            for (int i = 0; i < ot.length; i++) {
                if (ot[i] >= lo && ot[i] <= hi) {
                    o[n] = ot[i];
                    b[n] = bucket[i];
                    r[n++] = rows[i];
                }
            }
            return new DeleteSet(o, b, r);
        }
    }

    /** A file, or the stripes of a file starting in [offset, offset + length). */
    public static class Piece implements java.io.Serializable {
        final String path;
        final long offset;
        final long length;
        final long lo;                  // the write ids its rows were inserted by
        final long hi;
        final DeleteFile[] deletes;     // its split's delete files (null: none)
        final long hwm;                 // -1: every row's write id is valid
        final long[] invalid;           // sorted

        Piece(String path, long offset, long length, long lo, long hi, DeleteFile[] deletes,
              long hwm, long[] invalid) {
            this.path = path;
            this.offset = offset;
            this.length = length;
            this.lo = lo;
            this.hi = hi;
            this.deletes = deletes;
            this.hwm = hwm;
            this.invalid = invalid;
        }

        static Piece of(JsonNode n, long offset, long length, DeleteFile[][] splits) {
            int s = n.has("s") ? ((JsonNode) n.get("s")).asInt() : -1;
            return new Piece(((JsonNode) n.get("p")).asText(), offset, length,
                    ((JsonNode) n.get("lo")).asLong(), ((JsonNode) n.get("hi")).asLong(),
                    s < 0 ? null : splits[s], hwm(n), invalid(n));
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
        private Reader file;
        private Piece piece;
        private TypeDescription fileSchema;
        private VectorizedRowBatch batch;
        private ColumnarBatch plain;
        private ColumnarBatch selected;
        private Selected[] selectedCols;
        private int[] sel;
        private ColumnarBatch current;
        // the delete events of the splits read so far (by their files), and those of the
        // current piece with its walk state
        private final java.util.IdentityHashMap splitDeletes = new java.util.IdentityHashMap();
        private DeleteSet deletes;
        private boolean filters;
        private int[] pos;
        private int pair;
        // the piece's rows are its file's row numbers: rowId = row number (see open)
        private long[] byRowNumber;

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
            file = reader;
            TypeDescription schema = reader.getSchema();
            if (fileSchema == null) {
                setUp(schema);
            } else if (!fileSchema.equals(schema)) {
                throw new IOException(piece.path + ": schema " + schema + " differs from "
                        + fileSchema + " (the plan checked every file)");
            }
            deletes = null;
            if (piece.deletes != null) {
                DeleteSet all = (DeleteSet) splitDeletes.get(piece.deletes);
                if (all == null) {
                    all = DeleteSet.read(piece.deletes, conf);
                    splitDeletes.put(piece.deletes, all);
                }
                deletes = all.hitting(piece.lo, piece.hi);
            }
            byRowNumber = null;
            if (deletes != null && piece.hwm < 0 && !wantsRowId()) {
                long[] only = onePairFile(reader);
                if (only != null) {
                    DeleteSet hit = deletes;
                    deletes = null;
                    for (int q = 0; q < hit.ot.length; q++) {
                        if (hit.ot[q] == only[0] && hit.bucket[q] == only[1]) {
                            byRowNumber = hit.rows[q];
                        }
                    }
                }
            }
            filters = deletes != null || piece.hwm >= 0;
            boolean[] include = new boolean[schema.getMaximumId() + 1];
            include[0] = true;
            boolean acid = filters || wantsRowId();
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
            if (deletes != null) {
                pos = new int[deletes.ot.length];
                pair = -1;
            }
            if (byRowNumber != null) {
                pos = new int[1];
            }
            return true;
        }

        /**
         * (originalTransaction, bucket) when every row of the file has that one pair and the
         * rowIds 0 .. rows-1 (an insert delta's file, by its statistics), else null. Its rows'
         * rowIds are then their row numbers (ACID events are sorted by (originalTransaction,
         * bucket, rowId) and unique), so deletes are applied by row number: no ACID column is
         * decoded.
         */
        private static long[] onePairFile(Reader reader) {
            org.apache.orc.ColumnStatistics[] st = reader.getStatistics();
            long n = reader.getNumberOfRows();
            if (n == 0 || st.length < 5) {
                return null;
            }
            for (int c = 2; c <= 4; c++) {
                if (!(st[c] instanceof org.apache.orc.IntegerColumnStatistics)
                        || st[c].getNumberOfValues() != n || st[c].hasNull()) {
                    return null;
                }
            }
            org.apache.orc.IntegerColumnStatistics ot =
                    (org.apache.orc.IntegerColumnStatistics) st[2];
            org.apache.orc.IntegerColumnStatistics bk =
                    (org.apache.orc.IntegerColumnStatistics) st[3];
            org.apache.orc.IntegerColumnStatistics rid =
                    (org.apache.orc.IntegerColumnStatistics) st[4];
            if (ot.getMinimum() != ot.getMaximum() || bk.getMinimum() != bk.getMaximum()
                    || rid.getMinimum() != 0 || rid.getMaximum() != n - 1) {
                return null;
            }
            return new long[] {ot.getMinimum(), bk.getMinimum()};
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
                // the row number of the batch's first row (ORC positions the reader on the
                // next row it reads, past skipped row groups and stripes)
                long first = rr.getRowNumber();
                if (!rr.nextBatch(batch)) {
                    closeFile();
                    continue;
                }
                int n = batch.size;
                if (n == 0) {
                    continue;
                }
                if (!filters && byRowNumber == null) {
                    plain.setNumRows(n);
                    current = plain;
                    return true;
                }
                int kept = byRowNumber != null ? keepByRowNumber(first, n) : keep(n);
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

        /** keep() for a file whose rowIds are its row numbers, ``first`` that of row 0. */
        private int keepByRowNumber(long first, int n) {
            long[] rows = byRowNumber;
            int p = pos[0];
            if (p > 0 && rows[p - 1] >= first) {
                p = Arrays.binarySearch(rows, first);       // went back: not expected
                p = p < 0 ? -p - 1 : p;
            }
            while (p < rows.length && rows[p] < first) {
                p++;
            }
            long end = first + n;
            if (p == rows.length || rows[p] >= end) {
                pos[0] = p;
                return n;
            }
            int k = 0;
            for (int i = 0; i < n; i++) {
                if (p < rows.length && rows[p] == first + i) {
                    p++;
                    continue;
                }
                sel[k++] = i;
            }
            pos[0] = p;
            return k;
        }

        /** Fill sel with the rows of the batch that are valid and not deleted -> their count. */
        private int keep(int n) {
            LongColumnVector ot = (LongColumnVector) batch.cols[1];
            LongColumnVector bk = (LongColumnVector) batch.cols[2];
            LongColumnVector rid = (LongColumnVector) batch.cols[3];
            LongColumnVector ct = (LongColumnVector) batch.cols[4];
            DeleteSet d = deletes;
            int k = 0;
            for (int i = 0; i < n; i++) {
                if (piece.hwm >= 0
                        && !valid(ct.vector[ct.isRepeating ? 0 : i], piece.hwm, piece.invalid)) {
                    continue;
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

        private void closeFile() throws IOException {
            try {
                if (rr != null) {
                    rr.close();
                }
            } finally {
                rr = null;
                if (file != null) {
                    file.close();
                    file = null;
                }
            }
        }

        public void close() throws IOException {
            next = pieces.length;
            closeFile();
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
