package nosqltune.loadgen;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.cassandra.cql3.functions.types.LocalDate;
import org.apache.cassandra.io.sstable.CQLSSTableWriter;

/**
 * Writes a cassandra-stress profile's dataset as SSTables: partitions 1..{@code profile.partitions} of
 * {@link ProfileData}, every row of each, through Cassandra's {@code CQLSSTableWriter} for the profile's own
 * CREATE TABLE ({@code profile.schema}, keyspace-qualified, with the table options that shape SSTables), which
 * sorts each buffer of {@code sstable.buffer_mb} MiB by token into one SSTable. Then the node imports them
 * ({@code nodetool import}), as the YCSB datasets' bulk path does.
 *
 * <p>Time in the data: with {@code profile.ttl_seconds} (the table's default TTL) each partition is given an age
 * within the TTL (from its number) and its rows are written with the timestamp of that age and what is left of
 * their TTL, as if written then; with {@code profile.window_seconds} (TimeWindowCompactionStrategy's window) the
 * rows of each window of ages go to SSTables of their own ({@code <sstable.directory>/<window>/}), as the
 * strategy would have left them, so that the first trial does not measure the data's re-bucketing. The build's
 * time is printed ({@code data_time_ms}); a trial's node runs at that time ({@link OffsetClock}).
 *
 * <p>As {@link SSTableWriterDB}: under the node's cassandra.yaml ({@code sstable.cassandra_yaml}, tool mode, so
 * the SSTable version is the node's), with every SSTable's bloom filter rebuilt for its partitions. Once all is
 * written, {@code <sstable.directory>/<window>/rows} holds the rows written (a directory without it did not finish), and
 * the last line printed is {@code [PROFILE-LOAD] partitions P rows R seconds S}.
 *
 * <p>Usage: {@code ProfileWriter PROPERTIES_FILE}.
 */
public final class ProfileWriter {

  /** The table's default TTL: each partition's rows are written as if at a time within it, with what is left. */
  public static final String TTL_PROPERTY = "profile.ttl_seconds";
  /** TimeWindowCompactionStrategy's window: one SSTable set per window of the data's age. */
  public static final String WINDOW_PROPERTY = "profile.window_seconds";

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
    try {
      SSTableWriterDB.initializeCassandra(p.getProperty(SSTableWriterDB.NODE_CONFIG_PROPERTY));
    } catch (site.ycsb.DBException e) {
      throw new IOException(e.getMessage(), e);
    }
    List<String> names = data.columnNames();
    String statement = data.insertStatement(ttl > 0 ? " USING TIMESTAMP ? AND TTL ?" : "");
    int bufferMb = Integer.parseInt(p.getProperty(SSTableWriterDB.BUFFER_PROPERTY, "128").split(",")[0].trim());
    String schema = ProfileData.required(p, "profile.schema");
    long now = System.currentTimeMillis();
    // the windows of the data's age, written one after the other (a writer buffers its rows: one at a time keeps
    // the heap to one buffer); a partition's age comes from its number alone
    java.util.TreeSet<Long> slots = new java.util.TreeSet<>();
    for (long number = 1; number <= data.partitions; number++) {
      slots.add(slotOf(number, ttl, window, data.seed));
    }
    Map<Long, Long> rows = new LinkedHashMap<>();
    for (long slot : slots) {
      Path tableDir = directory.resolve(Long.toString(slot)).resolve(data.keyspace).resolve(data.table);
      Files.createDirectories(tableDir);
      try (CQLSSTableWriter writer = CQLSSTableWriter.builder()
          .inDirectory(tableDir.toString())
          .forTable(schema)
          .using(statement)
          .withBufferSizeInMiB(bufferMb)
          .openSSTableOnProduced()
          .withSSTableProducedListener(SSTableWriterDB::rebuildFilters)
          .build()) {
        List<Object> row = new ArrayList<>(names.size() + 2);
        for (long number = 1; number <= data.partitions; number++) {
          if (slotOf(number, ttl, window, data.seed) != slot) {
            continue;
          }
          // a partition's age: all of its rows were written at once, at a time within the TTL
          long age = ageOf(number, ttl, data.seed);
          for (long[] seeds : data.rowSeeds(number)) {
            row.clear();
            for (Object v : data.row(number, seeds, 0)) {
              row.add(toCassandra(v));
            }
            if (ttl > 0) {
              row.add((now - age * 1000L) * 1000L);   // microseconds, as Cassandra's write timestamps
              row.add((int) Math.max(1, ttl - age));   // what is left of its TTL
            }
            writer.addRow(row);
            rows.merge(slot, 1L, Long::sum);
          }
        }
      }
    }
    long total = 0;
    for (Map.Entry<Long, Long> e : rows.entrySet()) {
      Files.write(directory.resolve(Long.toString(e.getKey())).resolve(SSTableWriterDB.ROWS_FILE),
          Long.toString(e.getValue()).getBytes(StandardCharsets.UTF_8));
      total += e.getValue();
    }
    System.out.printf("[PROFILE-LOAD] data_time_ms %d windows %d%n", now, slots.size());
    return total;
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
