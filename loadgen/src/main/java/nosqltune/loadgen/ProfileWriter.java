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
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.cassandra.cql3.functions.types.LocalDate;
import org.apache.cassandra.io.sstable.CQLSSTableWriter;

/**
 * Writes a cassandra-stress profile's dataset as SSTables: partitions 1..{@code profile.partitions} of
 * {@link ProfileData}, every row of each, through Cassandra's {@code CQLSSTableWriter} for the profile's own
 * CREATE TABLE ({@code profile.schema}, keyspace-qualified, with the table options that shape SSTables), which
 * sorts each buffer of {@code sstable.buffer_mb} MiB by token into one SSTable. Then the node imports them
 * ({@code nodetool import}), as the YCSB datasets' bulk path does.
 *
 * <p>As {@link SSTableWriterDB}: under the node's cassandra.yaml ({@code sstable.cassandra_yaml}, tool mode, so
 * the SSTable version is the node's), with every SSTable's bloom filter rebuilt for its partitions. Once all is
 * written, {@code <sstable.directory>/rows} holds the rows written (a directory without it did not finish), and
 * the last line printed is {@code [PROFILE-LOAD] partitions P rows R seconds S}.
 *
 * <p>Usage: {@code ProfileWriter PROPERTIES_FILE}.
 */
public final class ProfileWriter {

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
    Path tableDir = directory.resolve(data.keyspace).resolve(data.table);
    Files.createDirectories(tableDir);
    try {
      SSTableWriterDB.initializeCassandra(p.getProperty(SSTableWriterDB.NODE_CONFIG_PROPERTY));
    } catch (site.ycsb.DBException e) {
      throw new IOException(e.getMessage(), e);
    }
    List<String> names = data.columnNames();
    StringBuilder insert = new StringBuilder("INSERT INTO " + data.keyspace + "." + data.table + " (");
    StringBuilder marks = new StringBuilder();
    for (int i = 0; i < names.size(); i++) {
      insert.append(i == 0 ? "" : ", ").append('"').append(names.get(i)).append('"');
      marks.append(i == 0 ? "?" : ", ?");
    }
    int bufferMb = Integer.parseInt(p.getProperty(SSTableWriterDB.BUFFER_PROPERTY, "128").split(",")[0].trim());
    long rows = 0;
    try (CQLSSTableWriter writer = CQLSSTableWriter.builder()
        .inDirectory(tableDir.toString())
        .forTable(ProfileData.required(p, "profile.schema"))
        .using(insert + ") VALUES (" + marks + ")")
        .withBufferSizeInMiB(bufferMb)
        .openSSTableOnProduced()
        .withSSTableProducedListener(SSTableWriterDB::rebuildFilters)
        .build()) {
      List<Object> row = new ArrayList<>(names.size());
      for (long number = 1; number <= data.partitions; number++) {
        for (long[] seeds : data.rowSeeds(number)) {
          row.clear();
          for (Object v : data.row(number, seeds, 0)) {
            row.add(toCassandra(v));
          }
          writer.addRow(row);
          rows++;
        }
      }
    }
    Files.write(directory.resolve(SSTableWriterDB.ROWS_FILE), Long.toString(rows).getBytes(StandardCharsets.UTF_8));
    return rows;
  }

  /** {@link ProfileData}'s neutral values as the Java types CQLSSTableWriter's codecs take. */
  static Object toCassandra(Object v) {
    if (v instanceof ProfileData.Millis) {
      return new java.util.Date(((ProfileData.Millis) v).value);
    }
    if (v instanceof ProfileData.Days) {
      return LocalDate.fromDaysSinceEpoch(((ProfileData.Days) v).value);
    }
    if (v instanceof ProfileData.Nanos) {
      return ((ProfileData.Nanos) v).value;
    }
    if (v instanceof Set) {
      Set<Object> out = new LinkedHashSet<>();
      for (Object o : (Set<?>) v) {
        out.add(toCassandra(o));
      }
      return out;
    }
    if (v instanceof List) {
      List<Object> out = new ArrayList<>();
      for (Object o : (List<?>) v) {
        out.add(toCassandra(o));
      }
      return out;
    }
    if (v instanceof Map) {
      Map<Object, Object> out = new LinkedHashMap<>();
      for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
        out.put(toCassandra(e.getKey()), toCassandra(e.getValue()));
      }
      return out;
    }
    return v;
  }
}
