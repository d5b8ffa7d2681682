package nosqltune.loadgen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.cassandra.db.rows.Cell;
import org.apache.cassandra.db.rows.Row;
import org.apache.cassandra.db.rows.Unfiltered;
import org.apache.cassandra.db.rows.UnfilteredRowIterator;
import org.apache.cassandra.io.sstable.Descriptor;
import org.apache.cassandra.io.sstable.ISSTableScanner;
import org.apache.cassandra.io.sstable.format.FilterComponent;
import org.apache.cassandra.io.sstable.format.SSTableReader;
import org.apache.cassandra.schema.ColumnMetadata;
import org.apache.cassandra.schema.Schema;
import org.apache.cassandra.schema.TableMetadataRef;
import org.apache.cassandra.utils.IFilter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * YCSB's load phase through SSTableWriterDB writes the very records it gives any binding: the same load
 * through MemoryDB and read back from the SSTables with Cassandra's own reader must agree record by record
 * (YCSB's dataintegrity mode makes every value a function of its key and field, so two loads are comparable).
 */
class SSTableWriterDBTest {

  private static final int RECORDS = 300;

  @TempDir
  static Path node;

  private static Path nodeYaml() throws IOException {
    return NodeYaml.in(node);
  }

  private static String[] loadArgs(String db, String... more) {
    List<String> args = new ArrayList<>(List.of("-load", "-db", db, "-threads", "2",
        "-p", "recordcount=" + RECORDS, "-p", "fieldcount=4", "-p", "fieldlength=20", "-p", "dataintegrity=true"));
    for (String m : more) {
      args.add("-p");
      args.add(m);
    }
    return args.toArray(new String[0]);
  }

  private static String run(String[] args) throws Exception {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    assertEquals(0, PhasedClient.run(args, new PrintStream(buf, true, StandardCharsets.UTF_8)));
    return buf.toString(StandardCharsets.UTF_8);
  }

  private static Map<String, Map<String, String>> expected() throws Exception {
    MemoryDB.reset();
    run(loadArgs(MemoryDB.class.getName()));
    Map<String, Map<String, String>> copy = new HashMap<>();
    MemoryDB.DATA.forEach((k, v) -> copy.put(k, new HashMap<>(v)));
    assertEquals(RECORDS, copy.size());
    return copy;
  }

  /** Every partition of the SSTables under {@code root}: key -> column -> value. */
  private static Map<String, Map<String, String>> readBack(Path root, List<String> versions) throws IOException {
    List<Path> data;
    try (Stream<Path> files = Files.walk(root)) {
      data = files.filter(f -> f.getFileName().toString().endsWith("-Data.db")).collect(Collectors.toList());
    }
    assertFalse(data.isEmpty(), "no SSTable written under " + root);
    TableMetadataRef table = Schema.instance.getTableMetadataRef("ycsb", "usertable");
    Map<String, Map<String, String>> rows = new HashMap<>();
    for (Path file : data) {
      Descriptor descriptor =
          Descriptor.fromFileWithComponent(new org.apache.cassandra.io.util.File(file.toString())).left;
      versions.add(descriptor.version.toString());
      SSTableReader reader = SSTableReader.openNoValidation(null, descriptor, table);
      // a bloom filter for the partitions the SSTable holds (the writer's own is sized for none)
      IFilter filter = FilterComponent.load(descriptor);
      try (ISSTableScanner scanner = reader.getScanner()) {
        while (scanner.hasNext()) {
          try (UnfilteredRowIterator partition = scanner.next()) {
            String key = StandardCharsets.UTF_8.decode(partition.partitionKey().getKey()).toString();
            assertTrue(filter.isPresent(partition.partitionKey()), "bloom filter misses " + key);
            Map<String, String> record = new HashMap<>();
            while (partition.hasNext()) {
              Unfiltered unfiltered = partition.next();
              assertTrue(unfiltered.isRow());
              for (ColumnMetadata column : table.get().regularColumns()) {
                Cell<?> cell = ((Row) unfiltered).getCell(column);
                if (cell != null) {
                  ByteBuffer value = cell.buffer();
                  record.put(column.name.toString(), StandardCharsets.UTF_8.decode(value.duplicate()).toString());
                }
              }
            }
            assertTrue(rows.put(key, record) == null, "key written twice: " + key);
          }
        }
      } finally {
        reader.selfRef().release();
      }
      long misses = 0;
      for (int i = 0; i < 1000; i++) {
        misses += filter.isPresent(reader.decorateKey(ByteBuffer.wrap(("absent" + i).getBytes(StandardCharsets.UTF_8))))
            ? 0 : 1;
      }
      assertTrue(misses > 900, "the bloom filter lets " + (1000 - misses) + " of 1000 absent keys through");
      filter.close();
    }
    return rows;
  }

  private static long rowsRecorded(Path root) throws IOException {
    long total = 0;
    try (Stream<Path> dirs = Files.list(root)) {
      for (Path dir : dirs.collect(Collectors.toList())) {
        Path rows = dir.resolve(SSTableWriterDB.ROWS_FILE);
        assertTrue(Files.exists(rows), "writer " + dir + " did not finish");
        total += Long.parseLong(Files.readString(rows).trim());
      }
    }
    return total;
  }

  /** Loads through SSTableWriterDB; returns the number of SSTables written. */
  private long loadsTheRecordsYcsbGives(Path dir, String buffers, int flushers) throws Exception {
    Map<String, Map<String, String>> expected = expected();
    String out = run(loadArgs(SSTableWriterDB.class.getName(), "sstable.directory=" + dir,
        "sstable.buffers=" + buffers, "sstable.flushers=" + flushers,
        "sstable.buffer_mb=0.012,0.006", // about 12 KB of records, then 6 KB per SSTable: several SSTables
        "sstable.cassandra_yaml=" + nodeYaml()));
    assertTrue(out.contains("[INSERT], Return=OK, " + RECORDS), out);
    assertEquals(RECORDS, rowsRecorded(dir));
    try (Stream<Path> writers = Files.list(dir)) {
      assertEquals(flushers, writers.count());
    }
    List<String> versions = new ArrayList<>();
    assertEquals(expected, readBack(dir, versions));
    // the version the node writes itself: 4.0's, in storage compatibility mode CASSANDRA_4 (ours)
    assertEquals(List.of("nb"), versions.stream().distinct().collect(Collectors.toList()));
    return versions.size();
  }

  @Test
  void oneSharedBuffer(@TempDir Path dir) throws Exception {
    assertTrue(loadsTheRecordsYcsbGives(dir, "shared", 1) >= 2);
  }

  @Test
  void oneBufferPerThreadAndTwoFlushers(@TempDir Path dir) throws Exception {
    assertTrue(loadsTheRecordsYcsbGives(dir, "thread", 2) >= 2);
  }

  @Test
  void aBufferKeepsItsRecordsAndSortsThemByTokenThenKey() {
    SSTableWriterDB.Buffer buffer = new SSTableWriterDB.Buffer(1 << 20);
    String[] keys = {"b", "a", "z", "c"};
    long[] tokens = {5, 5, 1, 5};
    for (int i = 0; i < keys.length; i++) {
      byte[][] values = {("v" + i).getBytes(StandardCharsets.UTF_8), null, new byte[0]};
      byte[] key = keys[i].getBytes(StandardCharsets.UTF_8);
      buffer.add(tokens[i], key, values, SSTableWriterDB.Buffer.packedSize(key, values));
    }
    List<String> order = new ArrayList<>();
    List<ByteBuffer> row = new ArrayList<>();
    for (int i : buffer.sortedOrder()) {
      buffer.decode(i, 3, row);
      order.add(StandardCharsets.UTF_8.decode(row.get(0)).toString());
      assertEquals("v" + List.of(keys).indexOf(order.get(order.size() - 1)),
          StandardCharsets.UTF_8.decode(row.get(1)).toString());
      assertEquals(null, row.get(2));
      assertEquals(0, row.get(3).remaining());   // an empty value is a value, not a null
    }
    assertEquals(List.of("z", "a", "b", "c"), order);
  }

  @Test
  void statementsFollowTheFields() {
    String[] fields = {"field0", "field1"};
    assertEquals("CREATE TABLE ks.t (y_id varchar PRIMARY KEY, field0 varchar, field1 varchar)",
        SSTableWriterDB.defaultSchema("ks", "t", fields));
    assertEquals("INSERT INTO ks.t (y_id, field0, field1) VALUES (?, ?, ?)",
        SSTableWriterDB.insertStatement("ks", "t", fields));
  }
}
