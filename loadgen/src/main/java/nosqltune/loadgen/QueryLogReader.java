package nosqltune.loadgen;

import io.netty.buffer.Unpooled;
import java.io.BufferedWriter;
import java.io.File;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import net.openhft.chronicle.queue.ChronicleQueue;
import net.openhft.chronicle.queue.ExcerptTailer;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueueBuilder;
import net.openhft.chronicle.wire.ValueIn;
import net.openhft.chronicle.wire.WireIn;
import org.apache.cassandra.config.DatabaseDescriptor;
import org.apache.cassandra.cql3.QueryOptions;
import org.apache.cassandra.transport.ProtocolVersion;
import org.apache.cassandra.utils.ByteBufferUtil;

/**
 * Reads a Cassandra full query log (the Chronicle queue {@code nodetool enablefullquerylog} writes, Cassandra 4.0 to
 * 5.0) and prints each entry as one JSON line on stdout, in the order the log holds them (completion order).
 *
 * <p>An entry is a document of named fields, as Cassandra's {@code FullQueryLogger} writes them: {@code version}
 * (int16, 0 so far), {@code type} ({@code single-query} or {@code batch}), {@code query-start-time} (int64, ms
 * since the epoch), {@code protocol-version} (int32), {@code query-options} (the native protocol's QUERY options,
 * decoded with Cassandra's own codec: the consistency level and a single query's bound values, positional), {@code
 * generated-timestamp}, {@code generated-now-in-seconds}, {@code keyspace} (the session's, may be null); then a
 * single query's {@code query} text, or a batch's {@code batch-type}, {@code queries} and {@code values}.
 *
 * <p>Printed: {@code {"t": ms, "type": "single"|"batch", "ks": ..., "cl": ..., "query": ..., "values": [...]}} for a
 * single query, {@code "queries"} and {@code "values"} (one list per statement) and {@code "batch_type"} for a
 * batch. A value is its bytes in hex, {@code null} for a null. Cassandra's encoder writes an unset value
 * as an empty one (length 0, CBUtil.writeValue), so the log cannot tell the two apart: both read as {@code ""}. The last line is
 * {@code {"end": true, "entries": n, "skipped": {type: count}}}: entries of another type (an audit log shares the
 * format) are counted, not printed.
 *
 * <p>Refused with one line on stderr and exit 2: a path that is not a directory holding a queue ({@code
 * metadata.cq4t} or a {@code .cq4} file; Chronicle opens any directory and finds nothing in it), and an entry of a
 * version this reader does not know. The queue is opened read-only, so the log is not changed.
 *
 * <p>Usage: {@code QueryLogReader DIR}. Run with Cassandra's jars on the classpath (they bring Chronicle).
 */
public final class QueryLogReader {

  /** The entry version FullQueryLogger writes (its CURRENT_VERSION): 0 in Cassandra 4.0 to 5.0. */
  static final int KNOWN_VERSION = 0;

  private QueryLogReader() {
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: QueryLogReader DIR");
      System.exit(2);
    }
    File dir = new File(args[0]);
    String refusal = notAQueue(dir);
    if (refusal != null) {
      System.err.println(refusal);
      System.exit(2);
    }
    System.setProperty("chronicle.announcer.disable", "true");
    System.setProperty("chronicle.analytics.disable", "true");
    PrintStream out = System.out;
    System.setOut(System.err); // stdout carries the entries only
    DatabaseDescriptor.clientInitialization();
    BufferedWriter writer = new BufferedWriter(new OutputStreamWriter(out, StandardCharsets.UTF_8), 1 << 16);
    Map<String, Integer> skipped = new TreeMap<>();
    long entries = 0;
    try (ChronicleQueue queue = SingleChronicleQueueBuilder.single(dir).readOnly(true).build()) {
      ExcerptTailer tailer = queue.createTailer();
      Map<String, Object>[] entry = new Map[1];
      while (true) {
        entry[0] = null;
        boolean read;
        try {
          read = tailer.readDocument(wire -> entry[0] = readEntry(wire, skipped));
        } catch (UnknownVersion e) {
          System.err.println(e.getMessage());
          System.exit(2);
          return;
        }
        if (!read) {
          break;
        }
        if (entry[0] != null) {
          writer.write(NodeInternals.Json.write(entry[0]));
          writer.write('\n');
          entries++;
        }
      }
    }
    Map<String, Object> end = new LinkedHashMap<>();
    end.put("end", true);
    end.put("entries", entries);
    end.put("skipped", skipped);
    writer.write(NodeInternals.Json.write(end));
    writer.write('\n');
    writer.flush();
    System.exit(0); // Chronicle may leave threads behind
  }

  /** Why {@code dir} is not a queue to read, or null when it holds one. */
  static String notAQueue(File dir) {
    if (!dir.isDirectory()) {
      return "not a full query log: " + dir + " is not a directory";
    }
    String[] names = dir.list();
    if (names != null) {
      for (String name : names) {
        if (name.equals("metadata.cq4t") || name.endsWith(".cq4")) {
          return null;
        }
      }
    }
    return "not a full query log: " + dir + " holds no Chronicle queue (no metadata.cq4t, no .cq4 file)";
  }

  /** A version this reader does not know: the layout of what follows may differ. */
  static final class UnknownVersion extends RuntimeException {
    UnknownVersion(String message) {
      super(message);
    }
  }

  /** One entry as the map printed, or null (counted in {@code skipped}) when it is of another type. */
  static Map<String, Object> readEntry(WireIn wire, Map<String, Integer> skipped) {
    int version = wire.read("version").int16();
    if (version > KNOWN_VERSION) {
      throw new UnknownVersion("full query log entry version " + version + ": this reader knows version "
          + KNOWN_VERSION + " (Cassandra 4.0 to 5.0)");
    }
    String type = wire.read("type").text();
    boolean single = "single-query".equals(type);
    if (!single && !"batch".equals(type)) {
      skipped.merge(String.valueOf(type), 1, Integer::sum);
      return null;
    }
    long start = wire.read("query-start-time").int64();
    int protocol = wire.read("protocol-version").int32();
    byte[] optionBytes = wire.read("query-options").bytes();
    QueryOptions options = QueryOptions.codec.decode(Unpooled.wrappedBuffer(optionBytes),
        ProtocolVersion.decode(protocol, true));
    wire.read("generated-timestamp").int64();
    wire.read("generated-now-in-seconds").int64();
    String keyspace = wire.read("keyspace").text();
    Map<String, Object> entry = new LinkedHashMap<>();
    entry.put("t", start);
    entry.put("type", single ? "single" : "batch");
    entry.put("ks", keyspace);
    entry.put("cl", options.getConsistency().name());
    if (single) {
      entry.put("query", wire.read("query").text());
      entry.put("values", values(options.getValues()));
      return entry;
    }
    entry.put("batch_type", wire.read("batch-type").text());
    ValueIn in = wire.read("queries");
    int n = in.int32();
    List<String> queries = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      queries.add(in.text());
    }
    in = wire.read("values");
    int statements = in.int32();
    List<List<Object>> values = new ArrayList<>(statements);
    for (int i = 0; i < statements; i++) {
      int m = in.int32();
      List<ByteBuffer> row = new ArrayList<>(m);
      for (int j = 0; j < m; j++) {
        byte[] b = in.bytes();
        row.add(b == null ? null : ByteBuffer.wrap(b));
      }
      values.add(values(row));
    }
    entry.put("queries", queries);
    entry.put("values", values);
    return entry;
  }

  static List<Object> values(List<ByteBuffer> values) {
    List<Object> out = new ArrayList<>(values.size());
    for (ByteBuffer value : values) {
      if (value == null) {
        out.add(null);
      } else {
        out.add(ByteBufferUtil.bytesToHex(value));
      }
    }
    return out;
  }
}
