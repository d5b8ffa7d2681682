package nosqltune.loadgen;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.cassandra.config.DatabaseDescriptor;
import org.apache.cassandra.cql3.ColumnIdentifier;
import org.apache.cassandra.cql3.functions.types.LocalDate;
import org.apache.cassandra.cql3.functions.types.TypeCodec;
import org.apache.cassandra.db.marshal.ByteBufferAccessor;
import org.apache.cassandra.db.marshal.CompositeType;
import org.apache.cassandra.dht.Murmur3Partitioner;
import org.apache.cassandra.io.sstable.CQLSSTableWriter;
import org.apache.cassandra.schema.ColumnMetadata;
import org.apache.cassandra.schema.Schema;
import org.apache.cassandra.schema.TableMetadata;
import org.apache.cassandra.transport.ProtocolVersion;
import org.apache.cassandra.utils.ByteBufferUtil;
import org.apache.cassandra.utils.JavaDriverUtils;

/**
 * Writes a cassandra-stress profile's dataset as SSTables: partitions 1..{@code profile.partitions} of
 * {@link ProfileData}, every row of each, through Cassandra's {@code CQLSSTableWriter} in sorted mode for the
 * profile's own CREATE TABLE ({@code profile.schema}, keyspace-qualified, with the table options that shape
 * SSTables). Then the node imports them ({@code nodetool import}), as the YCSB datasets' bulk path does.
 *
 * <p>Sorted: a partition's key comes from its number alone, so the partitions' order in the partitioner's (token,
 * then key bytes) is known before any row is made; each partition's rows are then made and written in that order,
 * one partition on the heap at a time. CQLSSTableWriter's unsorted mode keeps its buffer as Cassandra's row objects
 * in a tree map that every row is looked up in: for a profile's many small rows it took about 3.4 times a YCSB
 * build of the same bytes. The SSTables: one per window of the data's age (below), else the successive sizes of
 * {@code sstable.buffer_mb} (MiB of keys and values, the last repeating; cut between partitions by their estimated
 * bytes, as the YCSB path's plan: sizes size-tiered compaction leaves alone). They are written by
 * {@code sstable.flushers} threads at once, each in its own folder {@code <sstable.directory>/<n>/}.
 *
 * <p>Time in the data: with {@code profile.ttl_seconds} (the table's default TTL) each partition is given an age
 * within the TTL (from its number) and its rows are written with the timestamp of that age and what is left of
 * their TTL, as if written then; with {@code profile.window_seconds} (TimeWindowCompactionStrategy's window) the
 * rows of each window of ages go to an SSTable of their own, as the strategy would have left them, so that the
 * first trial does not measure the data's re-bucketing. The build's time is printed ({@code data_time_ms}); a
 * trial's node runs at that time ({@link OffsetClock}).
 *
 * <p>As {@link SSTableWriterDB}: under the node's cassandra.yaml ({@code sstable.cassandra_yaml}, tool mode, so
 * the SSTable version is the node's), with every SSTable's bloom filter rebuilt for its partitions. Once an SSTable
 * is written, {@code <sstable.directory>/<n>/rows} holds its rows (a folder without it did not finish), and the
 * last line printed is {@code [PROFILE-LOAD] partitions P rows R seconds S}.
 *
 * <p>Usage: {@code ProfileWriter PROPERTIES_FILE}.
 */
public final class ProfileWriter {

  /** The table's default TTL: each partition's rows are written as if at a time within it, with what is left. */
  public static final String TTL_PROPERTY = "profile.ttl_seconds";
  /** TimeWindowCompactionStrategy's window: one SSTable per window of the data's age. */
  public static final String WINDOW_PROPERTY = "profile.window_seconds";

  /** The data's time in milliseconds since the epoch (default: now): rows of age a were written at this minus a. */
  public static final String DATA_TIME_PROPERTY = "profile.data_time_ms";

  private ProfileWriter() {
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: ProfileWriter PROPERTIES_FILE");
      System.exit(2);
    }
    Properties p = new Properties();
    try (InputStream in = new FileInputStream(args[0])) {
      p.load(new java.io.InputStreamReader(in, StandardCharsets.UTF_8));
    }
    long started = System.nanoTime();
    long rows = write(p);
    System.out.printf("[PROFILE-LOAD] partitions %d rows %d seconds %.1f%n",
        Long.parseLong(p.getProperty("profile.partitions")), rows, (System.nanoTime() - started) / 1e9);
    System.exit(0);   // Cassandra's tool mode leaves non-daemon threads behind
  }

  static long write(Properties p) throws IOException {
    ProfileData data = new ProfileData(p);
    Path directory = Paths.get(ProfileData.required(p, SSTableWriterDB.DIRECTORY_PROPERTY));
    long ttl = Long.parseLong(p.getProperty(TTL_PROPERTY, "0").trim());
    long window = Long.parseLong(p.getProperty(WINDOW_PROPERTY, "0").trim());
    int threads = Math.max(1, Integer.parseInt(p.getProperty(SSTableWriterDB.FLUSHERS_PROPERTY, "2").trim()));
    double[] plan = Arrays.stream(p.getProperty(SSTableWriterDB.BUFFER_PROPERTY, "256").split(","))
        .mapToDouble(v -> Double.parseDouble(v.trim()) * (1 << 20)).toArray();
    if (data.partitions > Integer.MAX_VALUE - 8) {
      throw new IOException("profile.partitions: at most " + (Integer.MAX_VALUE - 8) + " partitions");
    }
    try {
      SSTableWriterDB.initializeCassandra(p.getProperty(SSTableWriterDB.NODE_CONFIG_PROPERTY));
    } catch (site.ycsb.DBException e) {
      throw new IOException(e.getMessage(), e);
    }
    if (!(DatabaseDescriptor.getPartitioner() instanceof Murmur3Partitioner)) {
      throw new IOException("only Murmur3Partitioner is supported, not " + DatabaseDescriptor.getPartitioner());
    }
    String statement = data.insertStatement(ttl > 0 ? " USING TIMESTAMP ? AND TTL ?" : "");
    String schema = ProfileData.required(p, "profile.schema");
    long now = Long.parseLong(p.getProperty(DATA_TIME_PROPERTY, Long.toString(System.currentTimeMillis())).trim());
    Rows rows = new Rows(data, tableOf(directory, schema, statement, data), ttl, now);

    // every partition's place in the partitioner's order: its key's token, then its key's bytes
    int count = (int) data.partitions;
    long[] tokens = new long[count];
    for (int i = 0; i < count; i++) {
      tokens[i] = Murmur3Partitioner.instance.getToken(rows.key(i + 1L)).token;
    }
    int[] order = TokenOrder.of(tokens, count,
        (x, y) -> ByteBufferUtil.compareUnsigned(rows.key(x + 1L), rows.key(y + 1L)));

    // the SSTables: one per window of the data's age (time-window compaction leaves one), else the successive
    // sizes of the plan, cut between partitions by their estimated bytes. The partitions in the partitioner's
    // order, grouped by window (a stable counting sort: no boxed numbers, a profile may have millions)
    java.util.TreeMap<Long, Integer> windows = new java.util.TreeMap<>();
    for (int i = 0; i < count; i++) {
      windows.putIfAbsent(slotOf(i + 1L, ttl, window, data.seed), 0);
    }
    int w = 0;
    for (Map.Entry<Long, Integer> e : windows.entrySet()) {
      e.setValue(w++);
    }
    int[] windowOf = new int[count];
    int[] starts = new int[windows.size() + 1];
    for (int i = 0; i < count; i++) {
      windowOf[i] = windows.get(slotOf(i + 1L, ttl, window, data.seed));
      starts[windowOf[i] + 1]++;
    }
    for (int k = 1; k < starts.length; k++) {
      starts[k] += starts[k - 1];
    }
    int[] grouped = new int[count];
    int[] next = Arrays.copyOf(starts, starts.length - 1);
    for (int i : order) {
      grouped[next[windowOf[i]]++] = i;
    }
    double partitionBytes = rows.meanPartitionBytes(200);
    List<int[]> sstables = new ArrayList<>();   // {from, to} in `grouped`
    for (int k = 0; k + 1 < starts.length; k++) {
      int from = starts[k];
      double bytes = 0;
      for (int j = starts[k]; j < starts[k + 1]; j++) {
        bytes += partitionBytes;
        boolean full = window == 0 && bytes >= plan[Math.min(sstables.size(), plan.length - 1)];
        if (full || j == starts[k + 1] - 1) {
          sstables.add(new int[] {from, j + 1});
          from = j + 1;
          bytes = 0;
        }
      }
    }

    // written by `threads` writers at once, each SSTable in a folder of its own (a folder's SSTables are numbered
    // by the writer that makes them)
    ExecutorService pool = Executors.newFixedThreadPool(threads, r -> {
      Thread t = new Thread(r, "profile-writer");
      t.setDaemon(true);
      return t;
    });
    List<Future<Long>> written = new ArrayList<>();
    for (int n = 0; n < sstables.size(); n++) {
      int[] range = sstables.get(n);
      Path folder = directory.resolve(Integer.toString(n + 1));
      written.add(pool.submit(() -> writeSSTable(folder, data, schema, statement, rows, grouped, range[0], range[1])));
    }
    long total = 0;
    try {
      for (Future<Long> f : written) {
        total += f.get();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    } catch (ExecutionException e) {
      throw new IOException("writing an SSTable failed: " + e.getCause(), e.getCause());
    } finally {
      pool.shutdownNow();
    }
    System.out.printf("[PROFILE-LOAD] data_time_ms %d windows %d sstables %d%n", rows.now, windows.size(),
        sstables.size());
    return total;
  }

  /**
   * One SSTable of the partitions {@code partitions[from..to)} (indexes from 0, in the partitioner's order) in
   * {@code folder}; the rows written.
   */
  private static long writeSSTable(Path folder, ProfileData data, String schema, String statement, Rows rows,
                                   int[] partitions, int from, int to) throws IOException {
    Path tableDir = folder.resolve(data.keyspace).resolve(data.table);
    Files.createDirectories(tableDir);
    long written = 0;
    try (CQLSSTableWriter writer = SSTableWriterDB.sortedWriter(tableDir, schema, statement)) {
      List<ByteBuffer> row = new ArrayList<>();
      for (int p = from; p < to; p++) {
        long number = partitions[p] + 1L;
        Rows.Partition partition = rows.partition(number);
        for (long[] seeds : data.rowSeeds(number)) {
          rows.values(partition, seeds, row);
          writer.rawAddRow(row);
          written++;
        }
      }
    }
    Files.write(folder.resolve(SSTableWriterDB.ROWS_FILE), Long.toString(written).getBytes(StandardCharsets.UTF_8));
    return written;
  }

  /**
   * The table as Cassandra's tool mode holds it: a writer built once (and closed without rows, in a folder removed
   * after) adds the table to its schema.
   */
  private static TableMetadata tableOf(Path directory, String schema, String statement, ProfileData data)
      throws IOException {
    Path probe = directory.resolve("schema").resolve(data.keyspace).resolve(data.table);
    Files.createDirectories(probe);
    SSTableWriterDB.sortedWriter(probe, schema, statement).close();
    deleteTree(directory.resolve("schema"));
    TableMetadata table = Schema.instance.getTableMetadata(data.keyspace, data.table);
    if (table == null) {
      throw new IOException("the table " + data.keyspace + "." + data.table + " is not in the writer's schema");
    }
    return table;
  }

  private static void deleteTree(Path root) throws IOException {
    try (java.util.stream.Stream<Path> paths = Files.walk(root)) {
      for (Path path : (Iterable<Path>) paths.sorted(java.util.Comparator.reverseOrder())::iterator) {
        Files.delete(path);
      }
    }
  }

  /**
   * The rows as the INSERT's bound values, serialized with the codecs CQLSSTableWriter's own {@code addRow} uses:
   * every column in the table's order, then (with a TTL) the write time and what is left of the TTL.
   */
  static final class Rows {
    final ProfileData data;
    final long ttl;
    final long now;   // the data's time: a partition of age a was written at now - a
    private final TypeCodec<Object>[] codecs;
    private final int[] keyColumns;   // the partition key's columns, in the key's order, as indexes into a row
    private final int[] keyParts;     // and as indexes into ProfileData's keyValues

    @SuppressWarnings("unchecked")
    Rows(ProfileData data, TableMetadata table, long ttl, long now) {
      this.data = data;
      this.ttl = ttl;
      this.now = now;
      List<String> names = data.columnNames();
      codecs = new TypeCodec[names.size()];
      keyColumns = new int[data.partitionKey.size()];
      keyParts = new int[data.partitionKey.size()];
      for (int i = 0; i < names.size(); i++) {
        ColumnMetadata column = table.getColumn(ColumnIdentifier.getInterned(names.get(i), true));
        if (column == null) {
          throw new IllegalArgumentException("the table has no column " + names.get(i));
        }
        codecs[i] = JavaDriverUtils.codecFor(column.type);
        if (column.isPartitionKey()) {   // its place in the key, as the table declares it
          keyColumns[column.position()] = i;
          for (int j = 0; j < data.partitionKey.size(); j++) {
            keyParts[column.position()] = data.partitionKey.get(j).name.equals(names.get(i)) ? j
                : keyParts[column.position()];
          }
        }
      }
    }

    private ByteBuffer serialize(int column, Object value) {
      return value == null ? null : codecs[column].serialize(toCassandra(value), ProtocolVersion.CURRENT);
    }

    /** Partition {@code number}'s key as the partitioner hashes it (a composite of its columns when several). */
    ByteBuffer key(long number) {
      Object[] values = data.keyValues(number);
      if (keyColumns.length == 1) {
        return serialize(keyColumns[0], values[keyParts[0]]);
      }
      ByteBuffer[] parts = new ByteBuffer[keyColumns.length];
      for (int k = 0; k < parts.length; k++) {
        parts[k] = serialize(keyColumns[k], values[keyParts[k]]);
      }
      return CompositeType.build(ByteBufferAccessor.instance, parts);
    }

    /** The bound values of one row of partition {@code number} into {@code out}. */
    void values(long number, long[] seeds, List<ByteBuffer> out) {
      values(partition(number), seeds, out);
    }

    /** What every row of partition {@code number} shares: its key's values, serialized, and its write time. */
    Partition partition(long number) {
      Object[] key = data.keyValues(number);
      ByteBuffer[] keyBytes = new ByteBuffer[key.length];
      for (int j = 0; j < key.length; j++) {
        keyBytes[j] = serialize(data.partitionKey.get(j).index, key[j]);
      }
      ByteBuffer[] time = new ByteBuffer[0];
      if (ttl > 0) {
        // a partition's age: all of its rows were written at once, at a time within the TTL
        long age = ageOf(number, ttl, data.seed);
        time = new ByteBuffer[] {ByteBufferUtil.bytes((now - age * 1000L) * 1000L),   // microseconds
            ByteBufferUtil.bytes((int) Math.max(1, ttl - age))};                      // what is left of its TTL
      }
      return new Partition(number, key, keyBytes, time);
    }

    /** The bound values of one row of a partition into {@code out}. */
    void values(Partition p, long[] seeds, List<ByteBuffer> out) {
      out.clear();
      Object[] row = data.row(p.number, p.key, seeds, 0);
      int k = 0;
      for (int c = 0; c < row.length; c++) {
        boolean isKey = k < p.keyColumn.length && p.keyColumn[k] == c;
        out.add(isKey ? p.keyBytes[k++].duplicate() : serialize(c, row[c]));
      }
      for (ByteBuffer b : p.time) {
        out.add(b.duplicate());
      }
    }

    /** One partition's shared values (see {@link #partition}). */
    final class Partition {
      final long number;
      final Object[] key;
      final ByteBuffer[] keyBytes;   // in the order of the row's columns
      final int[] keyColumn;         // their columns, ascending
      final ByteBuffer[] time;

      Partition(long number, Object[] key, ByteBuffer[] byKeyOrder, ByteBuffer[] time) {
        this.number = number;
        this.key = key;
        this.time = time;
        int n = key.length;
        keyColumn = new int[n];
        keyBytes = new ByteBuffer[n];
        Integer[] order = new Integer[n];
        for (int j = 0; j < n; j++) {
          order[j] = j;
        }
        Arrays.sort(order, (x, y) -> Integer.compare(data.partitionKey.get(x).index, data.partitionKey.get(y).index));
        for (int j = 0; j < n; j++) {
          keyColumn[j] = data.partitionKey.get(order[j]).index;
          keyBytes[j] = byKeyOrder[order[j]];
        }
      }
    }

    /** An estimate of a partition's bytes of keys and values: the mean over its first {@code sample}. */
    double meanPartitionBytes(int sample) {
      int n = (int) Math.min(sample, data.partitions);
      long bytes = 0;
      List<ByteBuffer> row = new ArrayList<>();
      for (long number = 1; number <= n; number++) {
        Partition partition = partition(number);
        for (long[] seeds : data.rowSeeds(number)) {
          values(partition, seeds, row);
          for (ByteBuffer b : row) {
            bytes += b == null ? 0 : b.remaining();
          }
        }
      }
      return n == 0 ? 0 : (double) bytes / n;
    }
  }

  /** A partition's age in seconds within the TTL (0 without one), from its number. */
  static long ageOf(long number, long ttl, long seed) {
    return ttl > 0 ? Math.floorMod(ProfileData.mix(number, 83, 89, seed), ttl) : 0;
  }

  /** The window of a partition's age (0 without windows). */
  static long slotOf(long number, long ttl, long window, long seed) {
    return window > 0 ? ageOf(number, ttl, seed) / window : 0;
  }

  /** {@link ProfileData}'s neutral values as the Java types CQLSSTableWriter's codecs take. */
  static Object toCassandra(Object value) {
    return ProfileData.map(value, v -> v instanceof ProfileData.Millis ? new java.util.Date(((ProfileData.Millis) v).value)
        : v instanceof ProfileData.Days ? LocalDate.fromDaysSinceEpoch(((ProfileData.Days) v).value)
        : v instanceof ProfileData.Nanos ? (Object) ((ProfileData.Nanos) v).value : v);
  }
}
