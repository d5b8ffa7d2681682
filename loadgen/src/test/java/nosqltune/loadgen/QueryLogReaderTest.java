package nosqltune.loadgen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import net.openhft.chronicle.queue.ChronicleQueue;
import net.openhft.chronicle.queue.ExcerptAppender;
import net.openhft.chronicle.queue.ExcerptTailer;
import net.openhft.chronicle.queue.RollCycles;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueueBuilder;
import org.apache.cassandra.config.DatabaseDescriptor;
import org.apache.cassandra.cql3.QueryOptions;
import org.apache.cassandra.cql3.statements.BatchStatement;
import org.apache.cassandra.db.ConsistencyLevel;
import org.apache.cassandra.fql.FullQueryLogger;
import org.apache.cassandra.service.ClientState;
import org.apache.cassandra.service.QueryState;
import org.apache.cassandra.transport.ProtocolVersion;
import org.apache.cassandra.utils.ByteBufferUtil;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The reader against entries written by Cassandra's own FullQueryLogger classes (a query with its bound values,
 * a batch), an entry of a later version (refused), an entry of another type (counted, not read), and directories
 * that hold no queue. The real node's log is read in tests/integration/test_capture.py.
 */
class QueryLogReaderTest {

  @TempDir
  Path dir;

  @BeforeAll
  static void client() {
    System.setProperty("chronicle.announcer.disable", "true");
    DatabaseDescriptor.clientInitialization();
  }

  private ChronicleQueue queue(Path path, boolean readOnly) {
    SingleChronicleQueueBuilder b = SingleChronicleQueueBuilder.single(path.toFile());
    return readOnly ? b.readOnly(true).build() : b.rollCycle(RollCycles.HOURLY).build();
  }

  private List<Map<String, Object>> readAll(Path path, Map<String, Integer> skipped) {
    List<Map<String, Object>> out = new ArrayList<>();
    try (ChronicleQueue q = queue(path, true)) {
      ExcerptTailer tailer = q.createTailer();
      List<Map<String, Object>> one = new ArrayList<>();
      while (tailer.readDocument(wire -> one.add(QueryLogReader.readEntry(wire, skipped)))) {
        out.addAll(one);
        one.clear();
      }
    }
    return out;
  }

  @Test
  void readsWhatCassandrasLoggerWrites() {
    QueryState state = new QueryState(ClientState.forInternalCalls("shop"));
    List<ByteBuffer> values = Arrays.asList(ByteBufferUtil.bytes("k-17"), ByteBufferUtil.bytes(42), null,
        ByteBufferUtil.UNSET_BYTE_BUFFER);
    // protocol v5, as 5.0's drivers speak it (v3, the internal calls' version, has no unset values)
    QueryOptions options = QueryOptions.create(ConsistencyLevel.LOCAL_QUORUM, values, false, 5000, null,
        ConsistencyLevel.SERIAL, ProtocolVersion.V5, "shop");
    FullQueryLogger.Query query = new FullQueryLogger.Query(
        "SELECT * FROM shop.carts WHERE user = ? AND n = ? AND a = ? AND b = ?", options, state, 1_700_000_000_123L);
    FullQueryLogger.Batch batch = new FullQueryLogger.Batch(BatchStatement.Type.UNLOGGED,
        List.of("INSERT INTO shop.carts (user, n) VALUES (?, ?)", "DELETE FROM shop.carts WHERE user = ?"),
        List.of(List.of(ByteBufferUtil.bytes("u1"), ByteBufferUtil.bytes(7)), List.of(ByteBufferUtil.bytes("u2"))),
        QueryOptions.forInternalCalls(ConsistencyLevel.ONE, List.of()), state, 1_700_000_000_456L);
    try (ChronicleQueue q = queue(dir, false)) {
      ExcerptAppender appender = q.acquireAppender();
      appender.writeDocument(query);
      appender.writeDocument(batch);
    } finally {
      query.release();
      batch.release();
    }
    Map<String, Integer> skipped = new TreeMap<>();
    List<Map<String, Object>> entries = readAll(dir, skipped);
    assertEquals(2, entries.size());
    Map<String, Object> single = entries.get(0);
    assertEquals("single", single.get("type"));
    assertEquals(1_700_000_000_123L, single.get("t"));
    assertEquals("LOCAL_QUORUM", single.get("cl"));
    assertEquals("shop", single.get("ks"));
    assertTrue(((String) single.get("query")).startsWith("SELECT * FROM shop.carts"));
    // an unset value is logged as an empty one: Cassandra's encoder writes both with length 0
    assertEquals(Arrays.asList("6b2d3137", "0000002a", null, ""), single.get("values"));
    Map<String, Object> b = entries.get(1);
    assertEquals("batch", b.get("type"));
    assertEquals("UNLOGGED", b.get("batch_type"));
    assertEquals(2, ((List<?>) b.get("queries")).size());
    assertEquals(List.of(List.of("7531", "00000007"), List.of("7532")), b.get("values"));
    assertTrue(skipped.isEmpty());
  }

  @Test
  void refusesAVersionItDoesNotKnowAndCountsOtherTypes() {
    try (ChronicleQueue q = queue(dir, false)) {
      ExcerptAppender appender = q.acquireAppender();
      appender.writeDocument(w -> {
        w.write("version").int16((short) 0);
        w.write("type").text("audit");
      });
      appender.writeDocument(w -> {
        w.write("version").int16((short) 1);
        w.write("type").text("single-query");
      });
    }
    Map<String, Integer> skipped = new TreeMap<>();
    QueryLogReader.UnknownVersion refused = assertThrows(QueryLogReader.UnknownVersion.class,
        () -> readAll(dir, skipped));
    assertTrue(refused.getMessage().contains("version 1"), refused.getMessage());
    assertEquals(Map.of("audit", 1), skipped);
  }

  @Test
  void aDirectoryWithoutAQueueIsNotALog() throws Exception {
    assertNotNull(QueryLogReader.notAQueue(dir.toFile()));
    Files.writeString(dir.resolve("notes.txt"), "not a queue");
    assertTrue(QueryLogReader.notAQueue(dir.toFile()).contains("no metadata.cq4t"));
    assertTrue(QueryLogReader.notAQueue(new File(dir.toFile(), "missing")).contains("not a directory"));
    Files.writeString(dir.resolve("20261129-07.cq4"), "");
    assertNull(QueryLogReader.notAQueue(dir.toFile()));
  }
}
