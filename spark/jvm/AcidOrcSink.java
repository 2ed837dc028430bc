/*
 * The JVM writer of hive_acid's inserts (spark/_jvm.py compiles this file with Janino inside
 * the driver's JVM, as it compiles the reader, AcidOrcSource.java).
 *
 * A Spark DataSource V2 sink that writes the rows of one INSERT (or INSERT OVERWRITE)
 * statement, which the Python driver has opened (spark/_jvm_insert.py: transaction, write
 * id, lock; the directories' _orc_acid_version markers), as Hive's ACID insert files: one
 * file per Spark task and table partition, `<partition>/<statement dir>/bucket_<task>`
 * (the partition's name escaped as Hive and Spark escape it; the rows arrive sorted by the
 * partition columns, so a task has one file open at a time), each row an insert event
 *   struct<operation:int, originalTransaction:bigint, bucket:int, rowId:bigint,
 *          currentTransaction:bigint, row:struct<the table's columns>>
 * with operation 0, originalTransaction = currentTransaction = the write id, bucket = the
 * bucket property of (task, statement id) (BucketCodec V1: 1<<29 | task<<16 | statement),
 * rowId 0..n-1; and the footer metadata Hive's writers put there (orc_acid/writer.py's
 * acid_footer_items): hive.acid.key.index (the last key of each stripe), hive.acid.stats
 * (inserts,updates,deletes) and hive.acid.version = 2.
 *
 * Why in the JVM: the rows go from Spark's InternalRow to ORC column vectors in the task's
 * JVM, with no Arrow transfer to a Python worker and no second encoder. Rows of numbers,
 * booleans, strings and binaries are copied into the vectors directly; others take the way
 * Spark's own ORC writer takes them (Spark's OrcSerializer, then ORC's
 * OrcMapredRecordWriter.setColumn). The four constant ACID columns are repeating vectors;
 * ORC still encodes their values (and a present bit per value for each of the six extra
 * columns), which the direct copy more than pays for: an insert of the benchmark's rows
 * costs less task CPU than Spark's plain ORC write of them (docs/spark.md, Benchmark).
 *
 * Publishing: a task writes a hidden file (".bucket_N.<attempt>.tmp", which every ACID
 * reader skips) and renames it to bucket_N in DataWriter.commit, which Spark calls only for
 * the one attempt its output commit coordinator allows; other attempts delete theirs. The
 * driver's BatchWrite.commit records the files ("partition\tname\trows" lines) for the
 * Python driver (takeCommitted), which
 * commits the transaction with them; a failed job leaves its files to the Python driver's
 * abort, which removes the statement's directory.
 *
 * The plan arrives as the option "hive_acid.write" (JSON):
 *   {"token": the statement's id, "dir": the table's location (URI), "statementDir":
 *    delta_W_W_S or base_W, "writeId": W, "statementId": S, "schema": Spark's JSON of the
 *    rows' struct type (the table's data columns, in order, then the partition columns),
 *    "partitionKeys": [the partition columns' names] (strings, integers or booleans),
 *    "compression": ORC's kind name (ZLIB, SNAPPY, ...)}
 * The other ORC settings (stripe size, compression block size, row index stride, ...) come
 * from the Hadoop configuration, as for Spark's own ORC writer (orc.stripe.size etc.; by
 * default ORC's: 64 MiB stripes, 256 KiB blocks, which Hive's base writer uses too). Hive's
 * delta writer divides the stripe and block sizes by orc.base.delta.ratio (8) to bound the
 * memory of the many writers a Hive task may hold open; a Spark task holds one, and the
 * smaller blocks and stripes cost a fifth more CPU per row written (measured).
 *
 * Written for Janino: no lambdas, no generic type inference (raw types and casts).
 */
package hmstxn.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.ql.exec.vector.BytesColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.ColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.DoubleColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.LongColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.StructColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatch;
import org.apache.orc.CompressionKind;
import org.apache.orc.OrcFile;
import org.apache.orc.TypeDescription;
import org.apache.orc.Writer;
import org.apache.orc.mapred.OrcMapredRecordWriter;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.execution.datasources.orc.OrcSerializer;
import org.apache.spark.sql.execution.datasources.orc.OrcUtils;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.util.SerializableConfiguration;

public class AcidOrcSink implements TableProvider {

    public static final String PLAN = "hive_acid.write";

    // statement token -> the files its job committed ("name\trows" strings), until the
    // Python driver takes them
    static final java.util.concurrent.ConcurrentHashMap COMMITTED =
            new java.util.concurrent.ConcurrentHashMap();

    /** The files the job of statement ``token`` committed, one "name\trows" per line, or
     *  null if no job of it committed; forgets them. */
    public static String takeCommitted(String token) {
        return (String) COMMITTED.remove(token);
    }

    static JsonNode plan(String text) {
        try {
            return new ObjectMapper().readTree(text);
        } catch (IOException e) {
            throw new IllegalArgumentException("hive_acid: unreadable write plan", e);
        }
    }

    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return (StructType) DataType.fromJson(plan(options.get(PLAN)).get("schema").toString());
    }

    public boolean supportsExternalMetadata() {
        return true;
    }

    public Table getTable(StructType schema, Transform[] partitioning, Map properties) {
        return new SinkTable(schema, (String) properties.get(PLAN));
    }

    /** The rows of one statement. */
    public static class SinkTable implements SupportsWrite {
        private final StructType schema;
        private final String plan;

        SinkTable(StructType schema, String plan) {
            this.schema = schema;
            this.plan = plan;
        }

        public String name() {
            return "hive_acid insert " + plan(plan).get("dir").asText();
        }

        public StructType schema() {
            return schema;
        }

        public Set capabilities() {
            return EnumSet.of(TableCapability.BATCH_WRITE);
        }

        public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
            return new SinkWriteBuilder(schema, plan);
        }
    }

    public static class SinkWriteBuilder implements WriteBuilder, Write {
        private final StructType schema;
        private final String plan;

        SinkWriteBuilder(StructType schema, String plan) {
            this.schema = schema;
            this.plan = plan;
        }

        public Write build() {
            return this;
        }

        public BatchWrite toBatch() {
            return new InsertBatch(schema, plan);
        }
    }

    public static class InsertBatch implements BatchWrite {
        private final StructType schema;
        private final String plan;

        InsertBatch(StructType schema, String plan) {
            this.schema = schema;
            this.plan = plan;
        }

        public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
            Configuration conf;
            try {
                conf = org.apache.spark.sql.classic.SparkSession.active().sessionState()
                        .newHadoopConf();
            } catch (Throwable t) {
                conf = org.apache.spark.SparkContext.getOrCreate().hadoopConfiguration();
            }
            return new InsertWriterFactory(schema, plan, new SerializableConfiguration(conf));
        }

        public void commit(WriterCommitMessage[] messages) {
            StringBuilder out = new StringBuilder();
            for (int i = 0; i < messages.length; i++) {
                InsertFiles f = (InsertFiles) messages[i];
                for (int j = 0; f != null && j < f.files.length; j++) {
                    out.append(f.files[j]).append('\n');
                }
            }
            COMMITTED.put(plan(plan).get("token").asText(), out.toString());
        }

        public void abort(WriterCommitMessage[] messages) {
            // the Python driver aborts the statement and removes its directory
        }
    }

    /** What a task committed: its files, "partition\tname\trows" each. */
    public static class InsertFiles implements WriterCommitMessage {
        final String[] files;

        InsertFiles(String[] files) {
            this.files = files;
        }
    }

    public static class InsertWriterFactory implements DataWriterFactory {
        final StructType schema;
        final String plan;
        final SerializableConfiguration conf;

        InsertWriterFactory(StructType schema, String plan, SerializableConfiguration conf) {
            this.schema = schema;
            this.plan = plan;
            this.conf = conf;
        }

        public DataWriter createWriter(int partitionId, long taskId) {
            try {
                return new InsertWriter(this, partitionId, taskId);
            } catch (IOException e) {
                throw new IllegalArgumentException(e.getMessage(), e);
            }
        }
    }

    /** One task's files: one per table partition its rows belong to (rows arrive sorted by
     *  the partition columns, so one file is open at a time), or one. */
    public static class InsertWriter implements DataWriter {
        private final InsertWriterFactory f;
        private final int task;
        private final long attempt;
        private final JsonNode plan;
        private final String[] keys;        // the partition columns, last in the rows
        private final int first;            // the first partition column's ordinal
        private final Path table;
        private FileSystem fs;
        private AcidFile current;
        private String currentPart;
        private final List done = new ArrayList();

        InsertWriter(InsertWriterFactory f, int task, long attempt) throws IOException {
            this.f = f;
            this.task = task;
            this.attempt = attempt;
            this.plan = plan(f.plan);
            if (task > 4095) {
                throw new IOException("hive_acid: writer id " + task + " > 4095: reduce the "
                        + "number of Spark partitions of the data written");
            }
            JsonNode ks = plan.get("partitionKeys");
            keys = new String[ks == null ? 0 : ks.size()];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = ((JsonNode) ks.get(i)).asText();
            }
            first = f.schema.fields().length - keys.length;
            table = new Path(plan.get("dir").asText());
        }

        public void write(Object record) throws IOException {
            InternalRow row = (InternalRow) record;
            String part = keys.length == 0 ? "" : partitionName(row);
            if (current == null || !part.equals(currentPart)) {
                if (current != null) {
                    current.close();
                    done.add(current);
                }
                if (fs == null) {
                    fs = table.getFileSystem(f.conf.value());
                    if (fs instanceof LocalFileSystem) {
                        fs = ((LocalFileSystem) fs).getRaw();      // no .crc files beside ours
                    }
                }
                Path dir = new Path(part.isEmpty() ? table : new Path(table, part),
                        plan.get("statementDir").asText());
                current = new AcidFile(f, plan, fs, dir, part, task, attempt);
                currentPart = part;
            }
            current.write(row);
        }

        // the partition's name, k1=v1/k2=v2, escaped as Hive (and Spark) escape them
        private String partitionName(InternalRow row) {
            StringBuilder out = new StringBuilder();
            StructField[] fields = f.schema.fields();
            for (int j = 0; j < keys.length; j++) {
                int i = first + j;
                String v = null;
                if (!row.isNullAt(i)) {
                    DataType t = fields[i].dataType();
                    if (t instanceof StringType) {
                        v = row.getUTF8String(i).toString();
                    } else if (t instanceof LongType) {
                        v = String.valueOf(row.getLong(i));
                    } else if (t instanceof IntegerType) {
                        v = String.valueOf(row.getInt(i));
                    } else if (t instanceof ShortType) {
                        v = String.valueOf(row.getShort(i));
                    } else if (t instanceof ByteType) {
                        v = String.valueOf(row.getByte(i));
                    } else if (t instanceof BooleanType) {
                        v = String.valueOf(row.getBoolean(i));
                    } else {
                        throw new IllegalArgumentException("hive_acid: partition column "
                                + keys[j] + " of type " + t.simpleString());
                    }
                }
                if (j > 0) {
                    out.append('/');
                }
                out.append(ExternalCatalogUtils.getPartitionPathString(keys[j], v));
            }
            return out.toString();
        }

        public WriterCommitMessage commit() throws IOException {
            if (current != null) {
                current.close();
                done.add(current);
                current = null;
            }
            List files = new ArrayList();
            for (int i = 0; i < done.size(); i++) {
                AcidFile a = (AcidFile) done.get(i);
                files.add(a.publish());
            }
            return new InsertFiles((String[]) files.toArray(new String[0]));
        }

        public void abort() throws IOException {
            if (current != null) {
                done.add(current);
                current = null;
            }
            IOException failed = null;
            for (int i = 0; i < done.size(); i++) {
                try {
                    ((AcidFile) done.get(i)).discard();
                } catch (IOException e) {
                    failed = e;
                }
            }
            done.clear();
            if (failed != null) {
                throw failed;
            }
        }

        public void close() throws IOException {
            if (current != null || !done.isEmpty()) {
                abort();
            }
        }
    }

    /** One file of insert events: bucket_<task> in one statement directory. */
    static class AcidFile {
        private static final int BATCH = 1024;     // what Spark's ORC writer batches

        private final FileSystem fs;
        private final Path tmp;
        private final String part;
        private final int task;
        private Writer writer;
        private OrcSerializer serializer;
        private TypeDescription rowType;
        private VectorizedRowBatch batch;
        private LongColumnVector rowIds;
        private final List variable = new ArrayList();
        private final long writeId;
        private final int bucket;
        private long rows;
        // the key of the last row handed to the ORC writer, and one per stripe written
        private long lastRowId = -1;
        private long indexedRowId = -1;
        private final StringBuilder keyIndex = new StringBuilder();

        static String bucketFile(int task) {
            // orc_acid.layout.format_bucket_file
            return String.format("bucket_%05d", new Object[] {Integer.valueOf(task)});
        }

        AcidFile(InsertWriterFactory f, JsonNode plan, FileSystem fs, Path dir, String part,
                 int task, long attempt) throws IOException {
            this.fs = fs;
            this.part = part;
            this.task = task;
            writeId = plan.get("writeId").asLong();
            bucket = (1 << 29) | (task << 16) | plan.get("statementId").asInt();
            tmp = new Path(dir, "." + bucketFile(task) + "." + attempt + ".tmp");
            // the table's data columns: the rows' first fields (the partition columns follow)
            StructField[] all = f.schema.fields();
            StructType data = new StructType((StructField[]) Arrays.copyOf(all,
                    all.length - (plan.has("partitionKeys") ? plan.get("partitionKeys").size() : 0)));
            // Spark's ORC type of the rows, from its string (which has no Spark attributes)
            rowType = TypeDescription.fromString(OrcUtils.getOrcSchemaString(data));
            TypeDescription schema = TypeDescription.createStruct()
                    .addField("operation", TypeDescription.createInt())
                    .addField("originalTransaction", TypeDescription.createLong())
                    .addField("bucket", TypeDescription.createInt())
                    .addField("rowId", TypeDescription.createLong())
                    .addField("currentTransaction", TypeDescription.createLong())
                    .addField("row", rowType);
            final AcidFile self = this;
            OrcFile.WriterOptions options = OrcFile.writerOptions(f.conf.value())
                    .fileSystem(fs)
                    .setSchema(schema)
                    .compress(CompressionKind.valueOf(plan.get("compression").asText()))
                    .version(OrcFile.Version.V_0_12)
                    .useUTCTimestamp(true)
                    .overwrite(true)
                    .callback(new OrcFile.WriterCallback() {
                        public void preStripeWrite(OrcFile.WriterContext context) {
                            self.indexKey();
                        }

                        public void preFooterWrite(OrcFile.WriterContext context) {
                            // ORC 2 calls this before it writes the last stripe: its key is
                            // the file's last row, added here unless a stripe ended there
                            self.lastRowId = self.rows - 1;
                            self.indexKey();
                            Writer w = context.getWriter();
                            w.addUserMetadata("hive.acid.key.index", utf8(self.keyIndex.toString()));
                            w.addUserMetadata("hive.acid.stats", utf8(self.rows + ",0,0"));
                            w.addUserMetadata("hive.acid.version", utf8("2"));
                        }
                    });
            writer = OrcFile.createWriter(tmp, options);
            kinds = directKinds(data);
            serializer = kinds == null ? new OrcSerializer(data) : null;
            batch = schema.createRowBatch(BATCH);
            OrcMapredRecordWriter.addVariableLengthColumns(variable, batch);
            rowIds = (LongColumnVector) batch.cols[3];
            constants();
        }

        // the key of the last row handed to the ORC writer ends the stripe being written
        private void indexKey() {
            if (lastRowId > indexedRowId) {
                keyIndex.append(writeId).append(',').append(bucket).append(',').append(lastRowId)
                        .append(';');
                indexedRowId = lastRowId;
            }
        }

        static java.nio.ByteBuffer utf8(String s) {
            return java.nio.ByteBuffer.wrap(s.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }

        private void constant(int col, long value) {
            LongColumnVector v = (LongColumnVector) batch.cols[col];
            v.isRepeating = true;
            v.noNulls = true;
            v.vector[0] = value;
        }

        // the columns every event of the file shares (reset with the batch)
        private void constants() {
            constant(0, 0);              // operation: insert
            constant(1, writeId);        // originalTransaction
            constant(2, bucket);
            constant(4, writeId);        // currentTransaction
        }

        void write(InternalRow row) throws IOException {
            int r = batch.size++;
            if (kinds != null) {
                copy(row, r);
            } else {
                OrcMapredRecordWriter.setColumn(rowType, batch.cols[5], r,
                        serializer.serialize(row));
            }
            rowIds.vector[r] = rows++;
            if (batch.size == batch.getMaxSize() || (!variable.isEmpty()
                    && OrcMapredRecordWriter.getMaxChildLength(variable) >= batch.getMaxSize())) {
                flush();
            }
        }

        // How each column of the rows is copied into its vector when every column is of a
        // type taken as is (what Spark's OrcSerializer followed by ORC's setColumn does, in one
        // step and without its intermediate objects and copies); else null: every row goes
        // through those two. Dates, decimals, timestamps and nested types take that way.
        private static final int LONG = 1, INT = 2, SHORT = 3, BYTE = 4, BOOLEAN = 5,
                DOUBLE = 6, FLOAT = 7, STRING = 8, BINARY = 9;
        private int[] kinds;

        static int[] directKinds(StructType schema) {
            StructField[] fields = schema.fields();
            int[] out = new int[fields.length];
            for (int i = 0; i < fields.length; i++) {
                DataType t = fields[i].dataType();
                if (t instanceof LongType) {
                    out[i] = LONG;
                } else if (t instanceof IntegerType) {
                    out[i] = INT;
                } else if (t instanceof ShortType) {
                    out[i] = SHORT;
                } else if (t instanceof ByteType) {
                    out[i] = BYTE;
                } else if (t instanceof BooleanType) {
                    out[i] = BOOLEAN;
                } else if (t instanceof DoubleType) {
                    out[i] = DOUBLE;
                } else if (t instanceof FloatType) {
                    out[i] = FLOAT;
                } else if (t instanceof StringType) {
                    out[i] = STRING;
                } else if (t instanceof BinaryType) {
                    out[i] = BINARY;
                } else {
                    return null;
                }
            }
            return out;
        }

        private void copy(InternalRow row, int r) {
            StructColumnVector st = (StructColumnVector) batch.cols[5];
            for (int i = 0; i < kinds.length; i++) {
                ColumnVector c = st.fields[i];
                if (row.isNullAt(i)) {
                    c.noNulls = false;
                    c.isNull[r] = true;
                    continue;
                }
                switch (kinds[i]) {
                    case LONG:
                        ((LongColumnVector) c).vector[r] = row.getLong(i);
                        break;
                    case INT:
                        ((LongColumnVector) c).vector[r] = row.getInt(i);
                        break;
                    case SHORT:
                        ((LongColumnVector) c).vector[r] = row.getShort(i);
                        break;
                    case BYTE:
                        ((LongColumnVector) c).vector[r] = row.getByte(i);
                        break;
                    case BOOLEAN:
                        ((LongColumnVector) c).vector[r] = row.getBoolean(i) ? 1 : 0;
                        break;
                    case DOUBLE:
                        ((DoubleColumnVector) c).vector[r] = row.getDouble(i);
                        break;
                    case FLOAT:
                        ((DoubleColumnVector) c).vector[r] = row.getFloat(i);
                        break;
                    case STRING: {
                        UTF8String v = row.getUTF8String(i);
                        Object base = v.getBaseObject();
                        if (base instanceof byte[]) {
                            ((BytesColumnVector) c).setVal(r, (byte[]) base,
                                    (int) (v.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET),
                                    v.numBytes());
                        } else {
                            byte[] b = v.getBytes();
                            ((BytesColumnVector) c).setVal(r, b, 0, b.length);
                        }
                        break;
                    }
                    default: {
                        byte[] b = row.getBinary(i);
                        ((BytesColumnVector) c).setVal(r, b, 0, b.length);
                    }
                }
            }
        }

        private void flush() throws IOException {
            if (batch.size > 0) {
                lastRowId = rows - 1;
                writer.addRowBatch(batch);
                batch.reset();
                constants();
            }
        }

        /** Write the last rows and the footer (the file stays under its hidden name). */
        void close() throws IOException {
            flush();
            writer.close();
            writer = null;
        }

        /** Give the closed file its name -> "partition\tname\trows". */
        String publish() throws IOException {
            Path dst = new Path(tmp.getParent(), bucketFile(task));
            // an earlier attempt of this task that committed and then failed left its file:
            // this attempt's rows replace it (the same task of the same statement)
            fs.delete(dst, false);
            if (!fs.rename(tmp, dst)) {
                throw new IOException("hive_acid: could not rename " + tmp + " to " + dst);
            }
            return part + "\t" + dst.getName() + "\t" + rows;
        }

        void discard() throws IOException {
            try {
                if (writer != null) {
                    writer.close();
                }
            } finally {
                writer = null;
                fs.delete(tmp, false);
            }
        }
    }
}
