package nosqltune.loadgen;

import java.io.IOException;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import javax.management.Attribute;
import javax.management.AttributeNotFoundException;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;

/**
 * The node side of online re-tuning (issue 39), run through {@link NodeInternals}'s command line:
 *
 * <pre>
 * NodeInternals --jmx-port N requests
 * NodeInternals --jmx-port N set --name KNOB --value V [--timeout-seconds 60]
 * </pre>
 *
 * <p>{@code requests} prints the node's cumulative ClientRequest metrics of the scopes Read, Write and RangeSlice
 * ({@code org.apache.cassandra.metrics:type=ClientRequest,scope=S,name=Latency}: Count, 50th and 99th percentile
 * and their DurationUnit; {@code name=Failures}, {@code Timeouts}, {@code Unavailables}: Count) and the JVM's
 * uptime (java.lang:type=Runtime Uptime, ms). Cassandra registers a scope's metrics when the node first needs
 * them (RangeSlice's only once it has coordinated a range scan): a scope or metric it does not have yet gives a
 * count of 0 and null percentiles, never an error.
 *
 * <p>{@code set} applies one knob of knobs/cassandra.yaml over JMX, in the knob file's unit, and reads it back
 * from the node. Each knob goes through the MBean operation nodetool's command uses on Cassandra 5.0 (read in
 * 5.0's NodeProbe and nodetool command classes), or its non-deprecated twin. A knob without a JMX path (a table
 * option, a setting read at start only) is refused with exit code 2 before anything connects.
 */
final class NodeRequests {

  private static final String STORAGE_SERVICE = "org.apache.cassandra.db:type=StorageService";
  private static final String CACHES = "org.apache.cassandra.db:type=Caches";
  private static final String INDEX_SUMMARIES = "org.apache.cassandra.db:type=IndexSummaries";
  private static final String CLIENT_REQUEST = "org.apache.cassandra.metrics:type=ClientRequest,scope=";
  private static final String CACHE_METRIC = "org.apache.cassandra.metrics:type=Cache,scope=";
  private static final double MIB = 1024.0 * 1024.0;

  /** The ClientRequest scopes a window needs: reads, writes and range scans. */
  static final List<String> SCOPES = List.of("Read", "Write", "RangeSlice");

  private NodeRequests() {
  }

  // ---------------------------------------------------------------- requests

  static Map<String, Object> requests(MBeanServerConnection mbs) throws IOException {
    return requests(mbs, null, null);
  }

  /**
   * With a keyspace and a table: the node's own (local) reads, writes and range reads of that table, from the
   * table's ReadLatency, WriteLatency and RangeLatency timers, as a replica serves them whichever node coordinated
   * (what a rollout's canary is judged on: at QUORUM a slow replica hides behind the others in the coordinators'
   * latencies); the failures, timeouts and unavailables stay the coordinator's (ClientRequest).
   */
  static Map<String, Object> requests(MBeanServerConnection mbs, String keyspace, String table) throws IOException {
    Map<String, Object> o = new LinkedHashMap<>();
    o.put("uptime_ms", NodeInternals.attr(mbs, "java.lang:type=Runtime", "Uptime"));
    Map<String, Object> scopes = new LinkedHashMap<>();
    String[] local = {"ReadLatency", "WriteLatency", "RangeLatency"};
    for (int i = 0; i < SCOPES.size(); i++) {
      String prefix = CLIENT_REQUEST + SCOPES.get(i) + ",name=";
      String latency = table == null ? prefix + "Latency"
          : "org.apache.cassandra.metrics:type=Table,keyspace=" + NodeInternals.quoteIfNeeded(keyspace) + ",scope="
          + NodeInternals.quoteIfNeeded(table) + ",name=" + local[i];
      scopes.put(SCOPES.get(i), scope(mbs, prefix, latency));
    }
    o.put("scopes", scopes);
    if (table != null) {
      o.put("table", keyspace + "." + table);
    }
    return o;
  }

  private static Map<String, Object> scope(MBeanServerConnection mbs, String prefix, String latency)
      throws IOException {
    Map<String, Object> s = new LinkedHashMap<>();
    s.put("count", count(NodeInternals.attr(mbs, latency, "Count")));
    s.put("p50", number(NodeInternals.attr(mbs, latency, "50thPercentile")));
    s.put("p99", number(NodeInternals.attr(mbs, latency, "99thPercentile")));
    s.put("buckets", buckets(mbs, latency));
    Object unit = NodeInternals.attr(mbs, latency, "DurationUnit");
    s.put("unit", unit == null ? null : unit.toString());
    s.put("failures", count(NodeInternals.attr(mbs, prefix + "Failures", "Count")));
    s.put("timeouts", count(NodeInternals.attr(mbs, prefix + "Timeouts", "Count")));
    s.put("unavailables", count(NodeInternals.attr(mbs, prefix + "Unavailables", "Count")));
    return s;
  }

  /**
   * The timer's cumulative count per latency bucket since the node started, from its {@code values} operation:
   * on Cassandra 5.0 that is the snapshot's {@code getValues()}, which DecayingEstimatedHistogramReservoir fills
   * from its plain buckets, not the decaying ones the percentiles are read from. Bucket i holds the latencies (in
   * the timer's DurationUnit, microseconds) up to EstimatedHistogram's i-th offset (1, 2, 3, ... each about 1.2
   * times the one before). The
   * trailing empty buckets are left out; null when the node has no such timer or operation.
   */
  private static List<Long> buckets(MBeanServerConnection mbs, String name) throws IOException {
    Object values;
    try {
      values = mbs.invoke(new ObjectName(name), "values", null, null);
    } catch (IOException e) {
      throw e; // connection lost: a real failure
    } catch (Exception e) {
      return null;
    }
    if (!(values instanceof long[])) {
      return null;
    }
    long[] counts = (long[]) values;
    int end = counts.length;
    while (end > 0 && counts[end - 1] == 0) {
      end--;
    }
    List<Long> out = new ArrayList<>(end);
    for (int i = 0; i < end; i++) {
      out.add(counts[i]);
    }
    return out;
  }

  private static long count(Object v) {
    return v instanceof Number ? ((Number) v).longValue() : 0L;
  }

  private static Double number(Object v) {
    return v instanceof Number ? ((Number) v).doubleValue() : null;
  }

  // ---------------------------------------------------------------- set

  /** How one knob is applied and read back over JMX. */
  interface Apply {
    void apply(MBeanServerConnection mbs, long value) throws Exception;
  }

  interface ReadBack {
    Object read(MBeanServerConnection mbs) throws Exception;
  }

  static final class LiveKnob {
    final String name;
    final String unit;
    final String via;
    final Apply apply;
    final ReadBack readBack;

    LiveKnob(String name, String unit, String via, Apply apply, ReadBack readBack) {
      this.name = name;
      this.unit = unit;
      this.via = via;
      this.apply = apply;
      this.readBack = readBack;
    }
  }

  /** The knobs of knobs/cassandra.yaml with a JMX path on Cassandra 5.0, in the knob file's units. */
  static final Map<String, LiveKnob> KNOBS = new LinkedHashMap<>();

  static {
    // nodetool setconcurrency <stage> <max>: StorageService.setConcurrency(stage, -1, max), core pool untouched
    stage("concurrent_reads", "ReadStage");
    stage("concurrent_writes", "MutationStage");
    // nodetool setconcurrentcompactors: StorageService.setConcurrentCompactors
    attribute("concurrent_compactors", null, STORAGE_SERVICE, "ConcurrentCompactors", "ConcurrentCompactors", false);
    // nodetool setcompactionthroughput: StorageService.setCompactionThroughputMbPerSec (MiB/s since 4.1); the
    // precise value is read back from getCompactionThroughtputMibPerSecAsDouble (sic)
    attribute("compaction_throughput", "MiB/s", STORAGE_SERVICE, "CompactionThroughputMbPerSec",
        "CompactionThroughtputMibPerSecAsDouble", false);
    // nodetool setstreamthroughput -m / setinterdcstreamthroughput -m: the ...MebibytesPerSec setters
    attribute("stream_throughput_outbound", "MiB/s", STORAGE_SERVICE, "StreamThroughputMebibytesPerSec",
        "StreamThroughputMebibytesPerSecAsDouble", false);
    attribute("inter_dc_stream_throughput_outbound", "MiB/s", STORAGE_SERVICE,
        "InterDCStreamThroughputMebibytesPerSec", "InterDCStreamThroughputMebibytesPerSecAsDouble", false);
    attribute("sstable_preemptive_open_interval", "MiB", STORAGE_SERVICE, "SSTablePreemptiveOpenIntervalInMB",
        "SSTablePreemptiveOpenIntervalInMB", false);
    // nodetool setcolumnindexsize calls the deprecated setColumnIndexSize; 5.0's setColumnIndexSizeInKiB is its
    // replacement (same setting, standard exceptions)
    attribute("column_index_size", "KiB", STORAGE_SERVICE, "ColumnIndexSizeInKiB", "ColumnIndexSizeInKiB", false);
    attribute("column_index_cache_size", "KiB", STORAGE_SERVICE, "ColumnIndexCacheSizeInKiB",
        "ColumnIndexCacheSizeInKiB", false);
    // nodetool setcachecapacity <key> <row> <counter>: CacheService.set{Key,Row,Counter}CacheCapacityInMB. A setter
    // without a getter is a write-only attribute of a standard MBean, not an operation: set as an attribute, one
    // cache at a time here, and read back from the cache's Capacity gauge (bytes)
    cache("key_cache_size", "KeyCache", "KeyCacheCapacityInMB");
    cache("row_cache_size", "RowCache", "RowCacheCapacityInMB");
    cache("counter_cache_size", "CounterCache", "CounterCacheCapacityInMB");
    attribute("row_cache_save_period", "s", CACHES, "RowCacheSavePeriodInSeconds", "RowCacheSavePeriodInSeconds",
        false);
    attribute("counter_cache_save_period", "s", CACHES, "CounterCacheSavePeriodInSeconds",
        "CounterCacheSavePeriodInSeconds", false);
    attribute("index_summary_capacity", "MiB", INDEX_SUMMARIES, "MemoryPoolCapacityInMB", "MemoryPoolCapacityInMB",
        true);
  }

  private static void stage(String knob, String stage) {
    KNOBS.put(knob, new LiveKnob(knob, null, "StorageService setConcurrency(" + stage + ", -1, <max>)",
        (mbs, v) -> mbs.invoke(new ObjectName(STORAGE_SERVICE), "setConcurrency",
            new Object[] {stage, -1, (int) v},
            new String[] {String.class.getName(), int.class.getName(), int.class.getName()}),
        mbs -> {
          Object got = mbs.invoke(new ObjectName(STORAGE_SERVICE), "getConcurrency",
              new Object[] {new ArrayList<>(List.of(stage))}, new String[] {List.class.getName()});
          if (!(got instanceof Map)) {
            return null;
          }
          Object sizes = ((Map<?, ?>) got).get(stage);   // [core, max]
          return sizes instanceof List && ((List<?>) sizes).size() == 2 ? ((List<?>) sizes).get(1) : null;
        }));
  }

  private static void attribute(String knob, String unit, String bean, String attribute, String readAttribute,
      boolean isLong) {
    KNOBS.put(knob, new LiveKnob(knob, unit, shortName(bean) + " set" + attribute,
        (mbs, v) -> write(mbs, bean, attribute, isLong ? (Object) v : (Object) (int) v,
            isLong ? long.class : int.class),
        mbs -> {
          Object got = NodeInternals.attr(mbs, bean, readAttribute);
          return got != null || readAttribute.equals(attribute) ? got : NodeInternals.attr(mbs, bean, attribute);
        }));
  }

  private static void cache(String knob, String scope, String attribute) {
    KNOBS.put(knob, new LiveKnob(knob, "MiB", "Caches set" + attribute,
        (mbs, v) -> write(mbs, CACHES, attribute, v, long.class),
        mbs -> {
          Object bytes = NodeInternals.attr(mbs, CACHE_METRIC + scope + ",name=Capacity", "Value");
          return bytes instanceof Number ? ((Number) bytes).doubleValue() / MIB : null;
        }));
  }

  private static String shortName(String bean) {
    return bean.substring(bean.indexOf("type=") + 5);
  }

  /**
   * A writable attribute of a standard MBean: JMX exposes a {@code setX(v)} method, with or without its getter, as
   * the attribute X, not as an operation. When the node's MBean has no such attribute, its setter operation.
   */
  private static void write(MBeanServerConnection mbs, String bean, String attribute, Object value, Class<?> type)
      throws Exception {
    ObjectName name = new ObjectName(bean);
    try {
      mbs.setAttribute(name, new Attribute(attribute, value));
    } catch (AttributeNotFoundException e) {
      mbs.invoke(name, "set" + attribute, new Object[] {value}, new String[] {type.getName()});
    }
  }

  /** The knob, or a usage failure (exit 2, no usage text) for a knob without a JMX path on Cassandra 5.0. */
  static LiveKnob knob(String name) throws NodeInternals.Failure {
    LiveKnob k = KNOBS.get(name);
    if (k == null) {
      throw new NodeInternals.Failure(NodeInternals.EXIT_USAGE, "knob " + name + " has no JMX path on Cassandra 5.0"
          + " (a table option changes with ALTER TABLE, other settings need a restart); live over JMX: "
          + String.join(", ", KNOBS.keySet()), false);
    }
    return k;
  }

  /** The asked value as a whole number: every live knob of the knob file is an integer in its unit. */
  static long wholeValue(String knob, String text) throws NodeInternals.Failure {
    BigDecimal v;
    try {
      v = new BigDecimal(text.trim());
    } catch (NumberFormatException e) {
      throw new NodeInternals.Failure(NodeInternals.EXIT_USAGE, "--value of " + knob + " must be a number, got: "
          + text, false);
    }
    try {
      long whole = v.stripTrailingZeros().longValueExact();
      if (whole < 0) {
        throw new NodeInternals.Failure(NodeInternals.EXIT_USAGE, "--value of " + knob + " must be >= 0, got: "
            + text, false);
      }
      if (whole > Integer.MAX_VALUE) {
        throw new NodeInternals.Failure(NodeInternals.EXIT_USAGE, "--value of " + knob + " is too large: " + text,
            false);
      }
      return whole;
    } catch (ArithmeticException e) {
      throw new NodeInternals.Failure(NodeInternals.EXIT_USAGE, "--value of " + knob + " must be a whole number in "
          + "its unit, got: " + text, false);
    }
  }

  static Map<String, Object> set(ExecutorService ex, MBeanServerConnection mbs, String name, String text,
      long timeoutSeconds) throws NodeInternals.Failure {
    LiveKnob k = knob(name);
    long value = wholeValue(name, text);
    // what the node ran before: the value a rollback puts back (the caller's idea of it may be stale)
    Object before = NodeInternals.call(ex, timeoutSeconds, "read " + name, () -> k.readBack.read(mbs));
    NodeInternals.call(ex, timeoutSeconds, "set " + name, () -> {
      k.apply.apply(mbs, value);
      return null;
    });
    Object readBack = NodeInternals.call(ex, timeoutSeconds, "read back " + name, () -> k.readBack.read(mbs));
    Map<String, Object> o = new LinkedHashMap<>();
    o.put("name", name);
    o.put("value_asked", value);
    o.put("value_read_back", readBack instanceof Number ? readBack : null);
    o.put("value_before", before instanceof Number ? before : null);
    o.put("unit", k.unit);
    o.put("via", k.via);
    return o;
  }
}
