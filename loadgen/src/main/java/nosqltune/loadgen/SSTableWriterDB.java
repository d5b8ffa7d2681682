package nosqltune.loadgen;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.cassandra.config.DatabaseDescriptor;
import org.apache.cassandra.dht.Murmur3Partitioner;
import org.apache.cassandra.io.sstable.CQLSSTableWriter;
import org.apache.cassandra.io.sstable.KeyReader;
import org.apache.cassandra.io.sstable.format.FilterComponent;
import org.apache.cassandra.io.sstable.format.SSTableReader;
import org.apache.cassandra.utils.FilterFactory;
import org.apache.cassandra.utils.IFilter;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB binding that writes every inserted record into SSTables with Cassandra's own {@code CQLSSTableWriter}
 * instead of sending it to a node: YCSB's load phase ({@code -load} with CoreWorkload) then produces exactly the
 * records it would have inserted over CQL (same keys, fields and values), as SSTables that {@code nodetool
 * import} (JMX {@code importNewSSTables}) adds to a node. Only {@code insert} is supported; every other
 * operation returns NOT_IMPLEMENTED.
 *
 * <p>Cassandra's jars ({@code cassandra-all} and its dependencies, of the version of the node that imports the
 * SSTables) must be on the classpath: loadgen declares them {@code provided}.
 *
 * <p>How: inserted records are kept as their columns' bytes, packed into large arrays, in a buffer (one for all
 * client threads, or one per thread). A full buffer (its size of keys and values, see {@code sstable.buffer_mb})
 * goes to a flusher thread, which sorts it by partition (token, then key) and hands it to a CQLSSTableWriter in
 * sorted mode: one SSTable per buffer, written partition by partition. CQLSSTableWriter's own unsorted mode does
 * the same sort, but through a tree map it looks every record up in (a third of the CPU of a load) and with the
 * records as Cassandra's row objects on the heap (about three times their size, for the collector to copy). Only
 * Murmur3Partitioner (5.0's default) is supported. Each CQLSSTableWriter is used by one flusher thread only (it
 * is not thread-safe). Flusher n writes into {@code <sstable.directory>/<n>/<keyspace>/<table>/} and, once all is
 * written, records how many rows it wrote in {@code <sstable.directory>/<n>/rows}: a flusher directory without
 * that file did not finish (a failure also fails every insert after it).
 *
 * <p>The SSTable version: Cassandra's client mode, which CQLSSTableWriter sets up by default, writes the newest
 * version of the format (5.0: big {@code oa}), and a node whose {@code storage_compatibility_mode} is
 * CASSANDRA_4 (5.0's shipped setting, and ours) takes only versions it writes itself ({@code nb}): it would
 * refuse those SSTables. With {@code sstable.cassandra_yaml} the writer runs in Cassandra's tool mode (as its
 * offline tools do) under the node's own configuration instead, and writes what the node writes.
 *
 * <p>The bloom filter: CQLSSTableWriter sizes every SSTable's filter for zero partitions (CASSANDRA-21423),
 * which makes it useless (every read of a key would look into every SSTable), and a node never rebuilds it.
 * So each SSTable's filter is rebuilt as soon as the SSTable is written, for the partitions it holds and the
 * table's {@code bloom_filter_fp_chance}: the filter a node's flush or compaction writes.
 *
 * <p>Properties: {@code sstable.directory} (required), {@code cassandra.keyspace} (ycsb), {@code table}
 * (usertable), {@code fieldcount} (10) and {@code fieldnameprefix} (field) as in CoreWorkload,
 * {@code sstable.schema} (the CREATE TABLE statement, keyspace-qualified, with any table options that shape
 * SSTables such as compression; default: {@code y_id varchar PRIMARY KEY} and one varchar column per field,
 * Cassandra's default options), {@code sstable.buffers} ({@code shared}: one buffer all client threads fill,
 * the default; {@code thread}: one per client thread), {@code sstable.buffer_mb} (128: MiB of keys and values per
 * buffer, so per SSTable; a comma-separated list gives successive buffers successive sizes, the last repeating,
 * e.g. sizes that size-tiered compaction leaves alone), {@code sstable.flushers}
 * (threads that sort and write full buffers, 1), {@code sstable.cassandra_yaml} (the importing node's
 * cassandra.yaml, see above).
 */
public class SSTableWriterDB extends DB {

  public static final String DIRECTORY_PROPERTY = "sstable.directory";
  public static final String SCHEMA_PROPERTY = "sstable.schema";
  public static final String BUFFERS_PROPERTY = "sstable.buffers";
  public static final String BUFFER_PROPERTY = "sstable.buffer_mb";
  public static final String FLUSHERS_PROPERTY = "sstable.flushers";
  public static final String NODE_CONFIG_PROPERTY = "sstable.cassandra_yaml";
  /** The file beside a flusher's SSTables that holds the number of rows it wrote, once all were written. */
  public static final String ROWS_FILE = "rows";
  /** A field the record lacks: left unset, as a CQL INSERT of the given fields leaves it. */
  private static final byte[] UNSET = new byte[0];

  private static final Object LOCK = new Object();
  private static Load load;

  /**
   * The records of one SSTable-to-be, packed into large byte arrays (a few objects for the collector to trace and
   * copy, where a record as objects would be a dozen), with their tokens for the sort. A record: its key's length
   * and bytes, then per field its length (NULL_VALUE, UNSET_VALUE) and bytes.
   */
  static final class Buffer {
    static final int SLAB = 8 << 20;
    static final int NULL_VALUE = -1;
    static final int UNSET_VALUE = -2;
    final long limit;
    long bytes;       // of keys and values, what the limit counts
    int count;
    long[] tokens = new long[1024];
    long[] positions = new long[1024];   // slab number << 32 | offset
    final List<byte[]> slabs = new ArrayList<>();
    byte[] slab;
    int used;

    Buffer(long limit) {
      this.limit = limit;
    }

    /** Appends a record of `size` packed bytes (see packedSize). */
    void add(long token, byte[] key, byte[][] values, int size) {
      if (count == tokens.length) {
        tokens = Arrays.copyOf(tokens, count * 2);
        positions = Arrays.copyOf(positions, count * 2);
      }
      if (slab == null || used + size > slab.length) {
        slab = new byte[Math.max(SLAB, size)];
        slabs.add(slab);
        used = 0;
      }
      tokens[count] = token;
      positions[count++] = ((long) (slabs.size() - 1) << 32) | used;
      used = put(key, used);
      for (byte[] v : values) {
        used = v == UNSET ? putInt(UNSET_VALUE, used) : v == null ? putInt(NULL_VALUE, used) : put(v, used);
      }
    }

    static int packedSize(byte[] key, byte[][] values) {
      int size = 4 + key.length;
      for (byte[] v : values) {
        size += 4 + (v == null || v == UNSET ? 0 : v.length);
      }
      return size;
    }

    private int put(byte[] bytes, int at) {
      at = putInt(bytes.length, at);
      System.arraycopy(bytes, 0, slab, at, bytes.length);
      return at + bytes.length;
    }

    private int putInt(int v, int at) {
      slab[at] = (byte) (v >>> 24);
      slab[at + 1] = (byte) (v >>> 16);
      slab[at + 2] = (byte) (v >>> 8);
      slab[at + 3] = (byte) v;
      return at + 4;
    }

    private static int getInt(byte[] s, int at) {
      return (s[at] << 24) | ((s[at + 1] & 0xff) << 16) | ((s[at + 2] & 0xff) << 8) | (s[at + 3] & 0xff);
    }

    /** Record i as the values of the INSERT: its key, then its fields (`fields` of them). */
    void decode(int i, int fields, List<ByteBuffer> row) {
      row.clear();
      byte[] s = slabs.get((int) (positions[i] >>> 32));
      int at = (int) positions[i];
      for (int f = 0; f <= fields; f++) {
        int length = getInt(s, at);
        at += 4;
        if (length == UNSET_VALUE) {
          row.add(CQLSSTableWriter.UNSET_VALUE);
        } else if (length == NULL_VALUE) {
          row.add(null);
        } else {
          row.add(ByteBuffer.wrap(s, at, length).slice());
          at += length;
        }
      }
    }

    /** The records' order in the partitioner's (Murmur3: token, then key bytes). */
    int[] sortedOrder() {
      return TokenOrder.of(tokens, count, this::compareKeys);
    }

    private int compareKeys(int x, int y) {
      byte[] sx = slabs.get((int) (positions[x] >>> 32));
      byte[] sy = slabs.get((int) (positions[y] >>> 32));
      int ax = (int) positions[x];
      int ay = (int) positions[y];
      return Arrays.compareUnsigned(sx, ax + 4, ax + 4 + getInt(sx, ax), sy, ay + 4, ay + 4 + getInt(sy, ay));
    }
  }

  /** What the binding instances of one load share: the settings, the flushers and what they wrote. */
  static final class Load {
    final Path root;
    final String schema;
    final String insert;
    final long[] bufferBytes;
    final AtomicInteger buffersMade = new AtomicInteger();
    final boolean sharedBuffer;
    final int fieldCount;
    final ExecutorService flushers;
    final Semaphore flushSlots;
    final BlockingQueue<Path> directories;
    final Map<Path, AtomicLong> rowsByDirectory = new HashMap<>();
    final List<Future<?>> flushes = new ArrayList<>();
    final AtomicReference<Throwable> failure = new AtomicReference<>();
    final String keyspace;
    final String table;
    Buffer shared;
    int references;

    Load(Path root, String keyspace, String table, String schema, String[] fields, long[] bufferBytes,
         boolean sharedBuffer, int flusherCount) throws IOException, DBException {
      this.root = root;
      this.keyspace = keyspace;
      this.table = table;
      this.schema = schema;
      this.insert = insertStatement(keyspace, table, fields);
      this.fieldCount = fields.length;
      this.bufferBytes = bufferBytes;
      this.sharedBuffer = sharedBuffer;
      if (!(DatabaseDescriptor.getPartitioner() instanceof Murmur3Partitioner)) {
        throw new DBException("only Murmur3Partitioner is supported, not " + DatabaseDescriptor.getPartitioner());
      }
      this.directories = new ArrayBlockingQueue<>(flusherCount);
      for (int i = 1; i <= flusherCount; i++) {
        Path flusherRoot = root.resolve(String.valueOf(i));
        Files.createDirectories(flusherRoot.resolve(keyspace).resolve(table));
        directories.add(flusherRoot);
        rowsByDirectory.put(flusherRoot, new AtomicLong());
      }
      AtomicInteger numbers = new AtomicInteger();
      this.flushers = Executors.newFixedThreadPool(flusherCount, r -> {
        Thread t = new Thread(r, "sstable-flusher-" + numbers.incrementAndGet());
        t.setDaemon(true);
        return t;
      });
      this.flushSlots = new Semaphore(flusherCount);
      this.shared = sharedBuffer ? newBuffer() : null;
    }

    /** The next buffer: successive buffers take the successive sizes of the plan, the last one repeating. */
    Buffer newBuffer() {
      int i = buffersMade.getAndIncrement();
      return new Buffer(bufferBytes[Math.min(i, bufferBytes.length - 1)]);
    }

    /** Hands a buffer to a flusher; waits while every flusher is busy (so at most that many buffers wait). */
    void flush(Buffer buffer) throws InterruptedException {
      if (buffer.count == 0) {
        return;
      }
      flushSlots.acquire();
      Future<?> f = flushers.submit(() -> {
        Path directory = directories.poll();
        try {
          long written = write(directory.resolve(keyspace).resolve(table), buffer);
          rowsByDirectory.get(directory).addAndGet(written);
        } catch (Throwable t) {
          failure.compareAndSet(null, t);
        } finally {
          directories.add(directory);
          flushSlots.release();
        }
      });
      synchronized (flushes) {
        flushes.add(f);
      }
    }

    /** One SSTable of the buffer's records, in the partitioner's order; returns the rows written. */
    long write(Path directory, Buffer buffer) throws IOException {
      int[] order = buffer.sortedOrder();
      try (CQLSSTableWriter writer = sortedWriter(directory, schema, insert)) {
        List<ByteBuffer> row = new ArrayList<>(fieldCount + 1);
        for (int i : order) {
          buffer.decode(i, fieldCount, row);
          writer.rawAddRow(row);
        }
      }
      return buffer.count;
    }

    /** Waits for every flush; then each flusher directory gets its row count, unless something failed. */
    void finish() throws DBException {
      try {
        List<Future<?>> all;
        synchronized (flushes) {
          all = new ArrayList<>(flushes);
        }
        for (Future<?> f : all) {
          f.get();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        failure.compareAndSet(null, e);
      } catch (java.util.concurrent.ExecutionException e) {
        failure.compareAndSet(null, e.getCause());
      } finally {
        flushers.shutdown();
      }
      Throwable failed = failure.get();
      if (failed != null) {
        throw new DBException("writing SSTables into " + root + " failed: " + CassandraCQLClient.oneLine(failed),
            failed);
      }
      try {
        for (Map.Entry<Path, AtomicLong> e : rowsByDirectory.entrySet()) {
          Files.write(e.getKey().resolve(ROWS_FILE), (e.getValue().get() + "\n").getBytes(StandardCharsets.UTF_8));
        }
      } catch (IOException e) {
        throw new DBException("cannot record the rows written: " + e, e);
      }
    }
  }

  private Load myLoad;
  private Buffer own;
  private String[] fields;
  private Map<String, Integer> fieldIndex;

  @Override
  public void init() throws DBException {
    if (myLoad != null) {
      return;
    }
    Properties p = getProperties();
    String directory = p.getProperty(DIRECTORY_PROPERTY);
    if (directory == null || directory.trim().isEmpty()) {
      throw new DBException(DIRECTORY_PROPERTY + " is required");
    }
    String keyspace = p.getProperty(CassandraCQLClient.KEYSPACE_PROPERTY, "ycsb");
    String table = p.getProperty(CassandraCQLClient.TABLE_PROPERTY, "usertable");
    int fieldCount = Integer.parseInt(p.getProperty("fieldcount", "10").trim());
    String prefix = p.getProperty("fieldnameprefix", "field");
    fields = new String[fieldCount];
    fieldIndex = new HashMap<>();
    for (int i = 0; i < fieldCount; i++) {
      fields[i] = prefix + i;
      fieldIndex.put(fields[i], i);
    }
    String schema = p.getProperty(SCHEMA_PROPERTY, defaultSchema(keyspace, table, fields));
    String[] sizes = p.getProperty(BUFFER_PROPERTY, "128").split(",");
    long[] bufferBytes = new long[sizes.length];
    for (int i = 0; i < sizes.length; i++) {
      bufferBytes[i] = (long) (Double.parseDouble(sizes[i].trim()) * (1 << 20));
      if (bufferBytes[i] <= 0) {
        throw new DBException(BUFFER_PROPERTY + " must be positive sizes, got: " + sizes[i]);
      }
    }
    int flusherCount = Integer.parseInt(p.getProperty(FLUSHERS_PROPERTY, "1").trim());
    String buffers = p.getProperty(BUFFERS_PROPERTY, "shared").trim().toLowerCase(Locale.ROOT);
    if (!buffers.equals("thread") && !buffers.equals("shared")) {
      throw new DBException(BUFFERS_PROPERTY + " must be shared or thread, got: " + buffers);
    }
    if (flusherCount <= 0) {
      throw new DBException(FLUSHERS_PROPERTY + " must be positive");
    }
    Path root = Paths.get(directory);
    try {
      synchronized (LOCK) {
        if (load == null) {
          initializeCassandra(p.getProperty(NODE_CONFIG_PROPERTY));
          CQLSSTableWriter.builder();   // Cassandra's client mode, unless the tool mode above: the partitioner
          load = new Load(root, keyspace, table, schema, fields, bufferBytes, buffers.equals("shared"), flusherCount);
        }
        load.references++;
        myLoad = load;
        own = load.sharedBuffer ? null : load.newBuffer();
      }
    } catch (IOException | RuntimeException e) {
      throw new DBException("cannot set up SSTable writing in " + root + ": " + CassandraCQLClient.oneLine(e), e);
    } catch (LinkageError e) {
      throw new DBException("Cassandra's jars (cassandra-all) are not on the classpath: "
          + CassandraCQLClient.oneLine(e), e);
    }
  }

  /**
   * Cassandra's tool mode under the node's cassandra.yaml, set up before CQLSSTableWriter would set up its client
   * mode (whichever comes first stays); nothing without a yaml.
   */
  static void initializeCassandra(String yaml) throws DBException {
    if (yaml == null || yaml.trim().isEmpty() || DatabaseDescriptor.isToolInitialized()) {
      return;
    }
    Path path = Paths.get(yaml.trim()).toAbsolutePath();
    if (!Files.isReadable(path)) {
      throw new DBException(NODE_CONFIG_PROPERTY + ": cannot read " + path);
    }
    if (DatabaseDescriptor.isClientInitialized()) {
      throw new DBException("Cassandra's client mode is set up already: " + path + " cannot apply");
    }
    System.setProperty("cassandra.config", path.toUri().toString());
    DatabaseDescriptor.toolInitialization(false);
  }

  static String defaultSchema(String keyspace, String table, String[] fields) {
    StringBuilder sb = new StringBuilder("CREATE TABLE ").append(keyspace).append('.').append(table)
        .append(" (").append(CassandraCQLClient.KEY_COLUMN).append(" varchar PRIMARY KEY");
    for (String f : fields) {
      sb.append(", ").append(f).append(" varchar");
    }
    return sb.append(')').toString();
  }

  static String insertStatement(String keyspace, String table, String[] fields) {
    StringBuilder sb = new StringBuilder("INSERT INTO ").append(keyspace).append('.').append(table)
        .append(" (").append(CassandraCQLClient.KEY_COLUMN);
    for (String f : fields) {
      sb.append(", ").append(f);
    }
    sb.append(") VALUES (?");
    for (int i = 0; i < fields.length; i++) {
      sb.append(", ?");
    }
    return sb.append(')').toString();
  }

  /** Called by a flusher with each SSTable it wrote; what it throws fails the flush. */
  static void rebuildFilters(Collection<SSTableReader> written) {
    for (SSTableReader sstable : written) {
      try {
        rebuildFilter(sstable);
      } catch (IOException e) {
        throw new UncheckedIOException("rebuilding the bloom filter of " + sstable.descriptor + " failed", e);
      } finally {
        sstable.selfRef().release();
      }
    }
  }

  /**
   * A CQLSSTableWriter in sorted mode (rows given in the partitioner's order, one SSTable) into {@code directory}
   * for the table of {@code schema} and the INSERT {@code insert}; each SSTable's bloom filter rebuilt once written.
   */
  static CQLSSTableWriter sortedWriter(Path directory, String schema, String insert) {
    return CQLSSTableWriter.builder()
        .inDirectory(directory.toString())
        .forTable(schema)
        .using(insert)
        .sorted()
        .openSSTableOnProduced()
        .withSSTableProducedListener(SSTableWriterDB::rebuildFilters)
        .build();
  }

  /** The SSTable's bloom filter for its partitions (counted in its index), in place of the one it was written with. */
  static void rebuildFilter(SSTableReader sstable) throws IOException {
    double fpChance = sstable.metadata().params.bloomFilterFpChance;
    if (fpChance >= 1.0) {
      return; // no filter wanted: what was written stands
    }
    long partitions = 0;
    try (KeyReader keys = sstable.keyReader()) {
      for (; !keys.isExhausted(); keys.advance()) {
        partitions++;
      }
    }
    IFilter filter = FilterFactory.getFilter(partitions, fpChance);
    try (KeyReader keys = sstable.keyReader()) {
      for (; !keys.isExhausted(); keys.advance()) {
        filter.add(sstable.decorateKey(keys.key()));
      }
      FilterComponent.save(filter, sstable.descriptor, false);
    } finally {
      filter.close();
    }
  }

  @Override
  public void cleanup() throws DBException {
    Load l = myLoad;
    if (l == null) {
      return;
    }
    myLoad = null;
    boolean last;
    Buffer rest = null;
    synchronized (LOCK) {
      last = --l.references == 0;
      if (last) {
        load = null;
        rest = l.shared;
      }
    }
    try {
      if (own != null) {
        l.flush(own);
      }
      if (rest != null) {
        l.flush(rest);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      l.failure.compareAndSet(null, e);
    }
    if (last) {
      l.finish();
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    Load l = myLoad;
    if (l.failure.get() != null) {
      return Status.ERROR;   // a flush failed: the load is lost, and says so
    }
    byte[] keyBytes = key.getBytes(StandardCharsets.UTF_8);
    byte[][] row = new byte[fields.length][];
    Arrays.fill(row, UNSET);
    long bytes = keyBytes.length;
    for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
      Integer i = fieldIndex.get(e.getKey());
      if (i == null) {
        System.err.println("[loadgen] SSTable writer: no column for field " + e.getKey());
        return Status.ERROR;
      }
      ByteIterator v = e.getValue();
      row[i] = v == null ? null : utf8(v);
      bytes += row[i] == null ? 0 : row[i].length;
    }
    long token = Murmur3Partitioner.instance.getToken(ByteBuffer.wrap(keyBytes)).token;
    int size = Buffer.packedSize(keyBytes, row);
    Buffer full = null;
    if (l.sharedBuffer) {
      synchronized (l) {
        l.shared.add(token, keyBytes, row, size);
        l.shared.bytes += bytes;
        if (l.shared.bytes >= l.shared.limit) {
          full = l.shared;
          l.shared = l.newBuffer();
        }
      }
    } else {
      own.add(token, keyBytes, row, size);
      own.bytes += bytes;
      if (own.bytes >= own.limit) {
        full = own;
        own = l.newBuffer();
      }
    }
    if (full != null) {
      try {
        l.flush(full);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        l.failure.compareAndSet(null, e);
        return Status.ERROR;
      }
    }
    return Status.OK;
  }

  /**
   * The value as the CQL binding sends it: the UTF-8 bytes of {@code toString()}. YCSB's generated values are
   * ASCII, whose bytes are their UTF-8 as they are: taken without the detour through a String.
   */
  static byte[] utf8(ByteIterator v) {
    byte[] bytes = v.toArray();
    for (byte b : bytes) {
      if (b < 0) {
        return new String(bytes).getBytes(StandardCharsets.UTF_8);   // as toString() decodes them
      }
    }
    return bytes;
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    return Status.NOT_IMPLEMENTED;
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    return Status.NOT_IMPLEMENTED;
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return Status.NOT_IMPLEMENTED;
  }

  @Override
  public Status delete(String table, String key) {
    return Status.NOT_IMPLEMENTED;
  }
}
