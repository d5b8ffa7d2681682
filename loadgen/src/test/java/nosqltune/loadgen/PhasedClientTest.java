package nosqltune.loadgen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.Test;

class PhasedClientTest {

  @Test
  void argumentsFollowYcsbConventions() throws Exception {
    Properties p = PhasedClient.parseArguments(new String[] {
        "-t", "-threads", "3", "-target", "100", "-p", "a=b=c", "-s"});
    assertEquals("3", p.getProperty("threadcount"));
    assertEquals("100", p.getProperty("target"));
    assertEquals("b=c", p.getProperty("a"));
    assertEquals("true", p.getProperty("dotransactions"));
    assertEquals("true", p.getProperty("status"));
    assertEquals(PhasedClient.DEFAULT_DB, p.getProperty("db"));
    assertEquals(PhasedClient.DEFAULT_WORKLOAD, p.getProperty("workload"));
    assertEquals("50,95,99", p.getProperty("hdrhistogram.percentiles"));
    assertEquals("false", PhasedClient.parseArguments(new String[] {"-load"}).getProperty("dotransactions"));
    assertThrows(PhasedClient.UsageException.class, () -> PhasedClient.parseArguments(new String[] {"-x"}));
    assertThrows(PhasedClient.UsageException.class, () -> PhasedClient.parseArguments(new String[] {"-p"}));
    assertThrows(PhasedClient.UsageException.class, () -> PhasedClient.parseArguments(new String[] {"-p", "novalue"}));
  }

  @Test
  void operationsAreSplitLikeYcsb() {
    long total = 0;
    for (int i = 0; i < 3; i++) {
      total += PhasedClient.share(10, 3, i);
    }
    assertEquals(10, total);
    assertEquals(4, PhasedClient.share(10, 3, 0));
    assertEquals(3, PhasedClient.share(10, 3, 2));
    assertEquals(0, PhasedClient.share(0, 3, 1));
  }

  @Test
  void coefficientOfVariation() {
    List<Double> s = Arrays.asList(1.0, 100.0, 100.0, 100.0);
    assertEquals(0.0, PhasedClient.cvOfLast(s, 3), 1e-12);
    assertTrue(PhasedClient.cvOfLast(s, 4) > 0.5);
    assertTrue(Double.isNaN(PhasedClient.cvOfLast(s, 5)));
    assertTrue(Double.isInfinite(PhasedClient.cvOfLast(Arrays.asList(0.0, 0.0), 2)));
  }

  @Test
  void driftOfASlowClimb() {
    // a climb of 1% a second: each window's cv is small, the drift between two windows of 10 is not
    List<Double> climb = new java.util.ArrayList<>();
    for (int i = 0; i < 20; i++) {
      climb.add(1000.0 * (1 + 0.01 * i));
    }
    assertTrue(PhasedClient.cvOfLast(climb, 10) < 0.05);
    assertEquals(1145.0 / 1045.0 - 1, PhasedClient.driftOfLast(climb, 10), 1e-12);
    assertEquals(0.0, PhasedClient.driftOfLast(Arrays.asList(5.0, 7.0, 7.0, 5.0), 2), 1e-12);
    assertTrue(Double.isNaN(PhasedClient.driftOfLast(climb, 11)));
    assertTrue(Double.isInfinite(PhasedClient.driftOfLast(Arrays.asList(0.0, 0.0, 1.0, 1.0), 2)));
  }

  private static Map<String, String> run(String... args) throws Exception {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
    assertEquals(0, PhasedClient.run(args, out));
    Map<String, String> m = new HashMap<>();
    for (String line : buf.toString(StandardCharsets.UTF_8).split("\n")) {
      assertTrue(line.startsWith("["), "unexpected stdout line: " + line);
      String[] parts = line.split(",", 3);
      m.put(parts[0].trim() + " " + parts[1].trim(), parts.length > 2 ? parts[2].trim() : "");
    }
    return m;
  }

  @Test
  void warmupIsNotMeasuredAndBindingsAreInitializedOnce() throws Exception {
    MemoryDB.reset();
    Map<String, String> load = run("-load", "-db", MemoryDB.class.getName(), "-threads", "2",
        "-p", "recordcount=500", "-p", "fieldcount=3");
    assertEquals("500", load.get("[INSERT] Operations"));
    assertEquals("0", load.get("[WARMUP] Operations"));
    assertEquals(500, MemoryDB.DATA.size());
    assertEquals(2, MemoryDB.INITS.get());
    assertEquals(2, MemoryDB.CLEANUPS.get());

    MemoryDB.reset();
    Map<String, String> r = run("-t", "-db", MemoryDB.class.getName(), "-threads", "4", "-target", "3000",
        "-p", "recordcount=500", "-p", "fieldcount=3", "-p", "operationcount=3000",
        "-p", "readproportion=0.4", "-p", "updateproportion=0.3", "-p", "readmodifywriteproportion=0.3",
        "-p", "warmup.operations=1500");
    long warm = Long.parseLong(r.get("[WARMUP] Operations"));
    assertTrue(warm >= 1500, "warm-up ops " + warm);
    assertEquals("false", r.get("[WARMUP] Steady"));
    // every read is NOT_FOUND (empty store), counted as non-OK statuses in the warm-up
    assertTrue(Long.parseLong(r.get("[WARMUP] Errors")) > 0);
    // a read of a missing key is NOT_FOUND, which DBWrapper measures as READ-FAILED
    long reads = Long.parseLong(r.getOrDefault("[READ] Operations", "0"))
        + Long.parseLong(r.getOrDefault("[READ-FAILED] Operations", "0"));
    long updates = Long.parseLong(r.get("[UPDATE] Operations"));
    long rmw = Long.parseLong(r.get("[READ-MODIFY-WRITE] Operations"));
    // reads and updates include those of read-modify-write; only measured operations count
    assertEquals(3000, reads + updates - rmw);
    assertNotNull(r.get("[READ] 50thPercentileLatency(us)"));
    assertNotNull(r.get("[OVERALL] Throughput(ops/sec)"));
    String intervals = r.get("[INTERVALS] Throughput(ops/sec)");
    assertNotNull(intervals);
    assertFalse(intervals.isEmpty(), "every measured phase has at least one sample");
    for (String s : intervals.split(" ")) {
      Double.parseDouble(s);
    }
    // the per-second p99 of the measured operations, aligned with the throughput samples; no JMX port
    // was given, so no node series
    String p99 = r.get("[INTERVALS] P99(ms)");
    assertNotNull(p99);
    assertEquals(intervals.split(" ").length, p99.split(" ").length);
    for (String s : p99.split(" ")) {
      double v = Double.parseDouble(s);
      assertTrue(v >= 0 && v < 1000, "p99 " + v);
    }
    assertNull(r.get("[INTERVALS] SSTables"));
    assertEquals(4, MemoryDB.INITS.get());
    assertEquals(0, MemoryDB.DOUBLE_INITS.get());
    assertEquals(4, MemoryDB.CLEANUPS.get());
    // the warm-up's reads went through the measured phase's wrapper too (its code is compiled before the
    // measured phase starts), yet nothing they recorded reached the results (the counts above)
    assertEquals(0, MemoryDB.UNWRAPPED_READS.get());
  }

  @Test
  void eachThreadsWrapperSaysItsSettingsOnce() throws Exception {
    MemoryDB.reset();
    PrintStream before = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      run("-t", "-db", MemoryDB.class.getName(), "-threads", "3", "-p", "recordcount=100",
          "-p", "operationcount=300", "-p", "warmup.operations=300");
    } finally {
      System.setErr(before);
    }
    long said = err.toString(StandardCharsets.UTF_8).lines().filter(l -> l.startsWith("DBWrapper:")).count();
    assertEquals(3, said, "one DBWrapper line per thread (the warm-up's wrapper says nothing)");
  }

  @Test
  void aPhaseShorterThanOneSecondStillHasOneSample() throws Exception {
    // 200 unthrottled operations on an in-memory store end within milliseconds: no full second is ever
    // sampled, and the series still holds one sample over the whole phase, with the probes aligned to it
    MemoryDB.reset();
    Map<String, String> r = run("-t", "-db", MemoryDB.class.getName(), "-threads", "2",
        "-p", "recordcount=100", "-p", "fieldcount=2", "-p", "operationcount=200");
    assertTrue(Long.parseLong(r.get("[OVERALL] RunTime(ms)")) < 1000, "the phase must end within one second");
    String[] intervals = r.get("[INTERVALS] Throughput(ops/sec)").split(" ");
    assertEquals(1, intervals.length);
    assertTrue(Double.parseDouble(intervals[0]) > 0);
    assertEquals(1, r.get("[INTERVALS] P99(ms)").split(" ").length);
  }

  @Test
  void theSeriesStartsWithTheOperationsNotWithTheProbesOpening() throws Exception {
    // A "node" whose JMX port takes about a second to refuse: it accepts, then closes each connection after
    // 1 s. The measured phase runs at a fixed 1,000 ops/s for 3 s; its first second must hold about 1,000
    // operations. Were the series started before the probes opened, that second would hold the wait instead.
    try (java.net.ServerSocket slow = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
      Thread closer = new Thread(() -> {
        while (!slow.isClosed()) {
          try (java.net.Socket s = slow.accept()) {
            Thread.sleep(1000);
          } catch (Exception e) {
            return;
          }
        }
      });
      closer.setDaemon(true);
      closer.start();
      MemoryDB.reset();
      Map<String, String> r = run("-t", "-db", MemoryDB.class.getName(), "-threads", "2", "-target", "1000",
          "-p", "recordcount=100", "-p", "fieldcount=2", "-p", "operationcount=3000",
          "-p", "warmup.operations=500", "-p", "internals.jmx.port=" + slow.getLocalPort());
      assertNull(r.get("[INTERVALS] SSTables"), "the slow port gives no node series");
      String[] intervals = r.get("[INTERVALS] Throughput(ops/sec)").split(" ");
      assertTrue(intervals.length >= 2, "series " + String.join(" ", intervals));
      double first = Double.parseDouble(intervals[0]);
      assertTrue(first >= 800 && first <= 1200, "first second " + first + " ops/s at a target of 1000");
    }
  }

  /**
   * A warm-up at a fixed 400 ops/s on the in-memory store with a steady window of 2 s, a cv of 0.2, at most
   * 20 s and the given properties: its [WARMUP] lines, after checking that it ended steady within
   * {@code atLeastMs} and 15 s.
   */
  private static Map<String, String> steadyWarmup(long atLeastMs, String... props) throws Exception {
    MemoryDB.reset();
    List<String> args = new java.util.ArrayList<>(Arrays.asList("-t", "-db", MemoryDB.class.getName(),
        "-threads", "2", "-target", "400", "-p", "recordcount=100", "-p", "operationcount=100",
        "-p", "warmup.steady.window=2", "-p", "warmup.steady.cv=0.2", "-p", "warmup.maxseconds=20"));
    for (String p : props) {
      args.add("-p");
      args.add(p);
    }
    Map<String, String> r = run(args.toArray(new String[0]));
    assertEquals("true", r.get("[WARMUP] Steady"));
    long ms = Long.parseLong(r.get("[WARMUP] RunTime(ms)"));
    assertTrue(ms >= atLeastMs && ms < 15000, "warm-up took " + ms + " ms");
    return r;
  }

  @Test
  void steadyStateDetectionEndsTheWarmup() throws Exception {
    assertNotNull(steadyWarmup(2000).get("[WARMUP] WindowCV"));
  }

  @Test
  void aDriftBoundWaitsForTwoLevelWindows() throws Exception {
    // at a steady target rate the two windows' means agree: steady once two windows are full, not before
    Map<String, String> r = steadyWarmup(4000, "warmup.steady.drift=0.1");
    assertTrue(Math.abs(Double.parseDouble(r.get("[WARMUP] WindowDrift"))) <= 0.1);
  }

  @Test
  void aMinimumTimeHoldsASteadyWarmup() throws Exception {
    // steady after 2 s at a fixed rate, yet held to the floor: a fixed rate hides the JIT's climb
    assertNull(steadyWarmup(5000, "warmup.minseconds=5").get("[WARMUP] WindowDrift"));
  }

  @Test
  void jsonWriter() {
    Map<String, Object> m = new java.util.LinkedHashMap<>();
    m.put("a", 1L);
    m.put("b", Double.NaN);
    m.put("c", "q\"\n");
    m.put("d", null);
    m.put("e", Arrays.asList(1.5, true));
    assertEquals("{\"a\": 1, \"b\": null, \"c\": \"q\\\"\\n\", \"d\": null, \"e\": [1.5, true]}",
        NodeInternals.Json.write(m));
  }
}
