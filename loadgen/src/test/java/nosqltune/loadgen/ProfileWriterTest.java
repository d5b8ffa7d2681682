package nosqltune.loadgen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.cassandra.db.DecoratedKey;
import org.apache.cassandra.db.rows.Cell;
import org.apache.cassandra.db.rows.Row;
import org.apache.cassandra.db.rows.Unfiltered;
import org.apache.cassandra.db.rows.UnfilteredRowIterator;
import org.apache.cassandra.io.sstable.Descriptor;
import org.apache.cassandra.io.sstable.ISSTableScanner;
import org.apache.cassandra.io.sstable.format.SSTableReader;
import org.apache.cassandra.schema.ColumnMetadata;
import org.apache.cassandra.schema.Schema;
import org.apache.cassandra.schema.TableMetadataRef;
import org.apache.cassandra.utils.ByteBufferUtil;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A profile's dataset as ProfileWriter lays it out, read back with Cassandra's own SSTable reader: every partition
 * of ProfileData once with all of its rows and the values ProfileData makes; one SSTable per window of the data's
 * age with time-window compaction, else the sizes of the plan; rows as old as their partition, with what is left
 * of their TTL.
 */
class ProfileWriterTest {

  private static final long PARTITIONS = 300;
  private static final long TTL = 7 * 86_400;
  private static final String SCHEMA = "CREATE TABLE ks.t (sensor bigint, day date, ts timestamp, status text, "
      + "tags set<text>, reading double, PRIMARY KEY ((sensor, day), ts)) WITH CLUSTERING ORDER BY (ts DESC)";

  @TempDir
  static Path node;

  private static Properties properties(Path out, long ttl, long window, String plan) throws Exception {
    Properties p = ProfileDataTest.profile(PARTITIONS);
    p.setProperty("profile.schema", SCHEMA);
    p.setProperty(SSTableWriterDB.DIRECTORY_PROPERTY, out.toString());
    p.setProperty(SSTableWriterDB.NODE_CONFIG_PROPERTY, NodeYaml.in(node).toString());
    p.setProperty(SSTableWriterDB.BUFFER_PROPERTY, plan);
    p.setProperty(ProfileWriter.TTL_PROPERTY, Long.toString(ttl));
    p.setProperty(ProfileWriter.WINDOW_PROPERTY, Long.toString(window));
    return p;
  }

  /** What one SSTable holds: partition key -> clustering (ts millis) -> status; and its cells' write times. */
  private static final class ReadBack {
    final Map<ByteBuffer, Map<Long, String>> partitions = new HashMap<>();
    final Map<ByteBuffer, Set<Long>> writeTimes = new HashMap<>();
    final Map<ByteBuffer, Set<Integer>> ttls = new HashMap<>();
  }

  private static List<ReadBack> readBack(Path root) throws Exception {
    List<Path> data;
    try (Stream<Path> files = Files.walk(root)) {
      data = files.filter(f -> f.getFileName().toString().endsWith("-Data.db")).sorted().collect(Collectors.toList());
    }
    TableMetadataRef table = Schema.instance.getTableMetadataRef("ks", "t");
    ColumnMetadata status = table.get().getColumn(ByteBufferUtil.bytes("status"));
    List<ReadBack> out = new ArrayList<>();
    for (Path file : data) {
      Descriptor descriptor =
          Descriptor.fromFileWithComponent(new org.apache.cassandra.io.util.File(file.toString())).left;
      SSTableReader reader = SSTableReader.openNoValidation(null, descriptor, table);
      ReadBack sstable = new ReadBack();
      DecoratedKey previous = null;
      try (ISSTableScanner scanner = reader.getScanner()) {
        while (scanner.hasNext()) {
          try (UnfilteredRowIterator partition = scanner.next()) {
            DecoratedKey key = partition.partitionKey();
            assertTrue(previous == null || previous.compareTo(key) < 0, "partitions in the partitioner's order");
            previous = key;
            Map<Long, String> rows = new HashMap<>();
            while (partition.hasNext()) {
              Unfiltered unfiltered = partition.next();
              Row row = (Row) unfiltered;
              long ts = ByteBufferUtil.toLong(row.clustering().bufferAt(0));
              Cell<?> cell = row.getCell(status);
              rows.put(ts, ByteBufferUtil.string(cell.buffer()));
              sstable.writeTimes.computeIfAbsent(key.getKey(), k -> new HashSet<>()).add(cell.timestamp());
              sstable.ttls.computeIfAbsent(key.getKey(), k -> new HashSet<>()).add(cell.ttl());
            }
            assertTrue(sstable.partitions.put(key.getKey(), rows) == null, "a partition written twice");
          }
        }
      } finally {
        reader.selfRef().release();
      }
      out.add(sstable);
    }
    return out;
  }

  /** Every partition's rows as ProfileData makes them: partition key -> ts millis -> status. */
  private static Map<ByteBuffer, Map<Long, String>> expected(Properties p) {
    ProfileData data = new ProfileData(p);
    ProfileWriter.Rows rows = new ProfileWriter.Rows(data, Schema.instance.getTableMetadata("ks", "t"), 0, 0);
    Map<ByteBuffer, Map<Long, String>> out = new HashMap<>();
    for (long n = 1; n <= PARTITIONS; n++) {
      Map<Long, String> partition = new HashMap<>();
      for (long[] seeds : data.rowSeeds(n)) {
        Object[] row = data.row(n, seeds, 0);
        partition.put(((ProfileData.Millis) row[2]).value, (String) row[3]);
      }
      out.put(rows.key(n), partition);
    }
    return out;
  }

  private static Map<ByteBuffer, Map<Long, String>> all(List<ReadBack> sstables) {
    Map<ByteBuffer, Map<Long, String>> out = new HashMap<>();
    for (ReadBack s : sstables) {
      s.partitions.forEach((k, v) -> assertTrue(out.put(k, v) == null, "a partition in two SSTables"));
    }
    return out;
  }

  @Test
  void oneSSTablePerWindowAndRowsAsOldAsTheirPartition(@TempDir Path out) throws Exception {
    long window = 86_400;
    Properties p = properties(out, TTL, window, "256");
    long now = 1_790_000_000_000L;
    p.setProperty(ProfileWriter.DATA_TIME_PROPERTY, Long.toString(now));
    long written = ProfileWriter.write(p);
    List<ReadBack> sstables = readBack(out);
    Map<ByteBuffer, Map<Long, String>> expected = expected(p);
    assertEquals(expected, all(sstables));
    assertEquals(expected.values().stream().mapToLong(Map::size).sum(), written);
    Set<Long> windows = new HashSet<>();
    for (long n = 1; n <= PARTITIONS; n++) {
      windows.add(ProfileWriter.slotOf(n, TTL, window, 1));
    }
    assertEquals(windows.size(), sstables.size(), "one SSTable per window of the data's age");
    assertTrue(windows.size() >= 6, "300 partitions' ages spread over the 7 days: " + windows);
    for (ReadBack s : sstables) {
      Set<Long> ages = new HashSet<>();
      s.writeTimes.forEach((key, times) -> {
        assertEquals(1, times.size(), "a partition's rows were written at one time");
        long micros = times.iterator().next();
        assertEquals(0, micros % 1_000_000, "written at a whole second of age");
        long age = (now * 1000 - micros) / 1_000_000;
        assertTrue(age >= 0 && age < TTL, "age " + age);
        ages.add(age / window);
        assertEquals(Set.of((int) (TTL - age)),
            s.ttls.get(key), "what is left of the TTL at age " + age);
      });
      assertEquals(1, ages.size(), "an SSTable holds one window's partitions: " + ages);
    }
  }

  @Test
  void withoutWindowsTheSSTablesFollowThePlan(@TempDir Path out) throws Exception {
    // about 60 KB of keys and values in all: 12 KB, then 6 KB per SSTable, so many SSTables
    Properties p = properties(out, 0, 0, "0.012,0.006");
    long written = ProfileWriter.write(p);
    List<ReadBack> sstables = readBack(out);
    assertEquals(expected(p), all(sstables));
    assertEquals(sstables.stream().mapToLong(s -> s.partitions.values().stream().mapToLong(Map::size).sum()).sum(),
        written);
    assertTrue(sstables.size() >= 5, sstables.size() + " SSTables");
    for (ReadBack s : sstables) {
      assertFalse(s.partitions.isEmpty());
      s.ttls.values().forEach(t -> assertEquals(Set.of(Cell.NO_TTL), t, "no TTL"));
    }
    long rowsFiles = 0;
    try (Stream<Path> folders = Files.list(out)) {
      for (Path folder : folders.collect(Collectors.toList())) {
        rowsFiles += Long.parseLong(Files.readString(folder.resolve(SSTableWriterDB.ROWS_FILE)).trim());
      }
    }
    assertEquals(written, rowsFiles, "each folder's rows file counts its SSTable's rows");
  }
}
