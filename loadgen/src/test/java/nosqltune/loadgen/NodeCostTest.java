package nosqltune.loadgen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.lang.management.ManagementFactory;
import java.util.Map;
import java.util.Properties;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.junit.jupiter.api.Test;

class NodeCostTest {

  /**
   * Burns `ms` of CPU on this thread, counted in the thread's own CPU time (not the wall clock: on a busy machine a
   * wall-clock spin gets only part of a core, and the window would hold less CPU than the test expects).
   */
  private static long spin(long ms) {
    java.lang.management.ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    long end = threads.getCurrentThreadCpuTime() + ms * 1_000_000L;
    long x = 0;
    while (threads.getCurrentThreadCpuTime() < end) {
      x += System.nanoTime() % 7;
    }
    return x;
  }

  /** This JVM's CPU time so far, in ms (all its threads: JIT and GC threads included). */
  private static double processCpuMs() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime() / 1e6;
  }

  @Test
  void theClientAndALocalProcessAreMeasuredOverTheWindowOnly() throws Exception {
    Properties p = new Properties();
    p.setProperty("cost.nodes", "pid:" + ProcessHandle.current().pid());
    double before = processCpuMs();
    NodeCost cost = NodeCost.open(p);
    spin(300);    // before the window: not counted
    cost.markStart();
    spin(400);
    cost.markEnd();
    cost.close();
    double total = processCpuMs() - before;
    Map<String, Map<String, Double>> d = cost.deltas();
    assertEquals(2, d.size());
    double client = d.get("client").get(NodeCost.CPU);
    double node = d.get("node1").get(NodeCost.CPU);   // the same process, read from /proc
    // The JVM's other threads (JIT, GC) may add any amount, so no upper bound is fixed; what is fixed is that
    // the window holds the 400 ms spun inside it and leaves out the 300 ms spun before it.
    assertTrue(client >= 380, "client CPU " + client);
    assertTrue(client <= total - 280, "client CPU " + client + " of " + total + " in all: the spin before counted");
    assertTrue(node >= 350, "node CPU " + node);
    assertTrue(node <= total - 250, "node CPU " + node + " of " + total + " in all: the spin before counted");
    assertEquals(client, node, 100, "the same process read two ways");
    assertEquals(node, d.get("node1").get(NodeCost.USER) + d.get("node1").get(NodeCost.SYSTEM), 1e-6);
    assertFalse(d.get("node1").containsKey(NodeCost.GC_TIME), "/proc has no GC figures");
    assertTrue(d.get("node1").get(NodeCost.READ_BYTES) >= 0, "/proc/PID/io read");
    assertTrue(d.get("client").get(NodeCost.GC_COUNT) >= 0);

    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    cost.print(new PrintStream(buf, true, StandardCharsets.UTF_8), 1234);
    String text = buf.toString(StandardCharsets.UTF_8);
    assertTrue(text.startsWith("[COST], Operations, 1234\n"), text);
    assertTrue(text.contains("[COST], node1.UserTime(ms), "), text);
    assertTrue(text.contains("[COST], client.GcTime(ms), "), text);
  }

  @Test
  void aSourceThatCannotBeReadGivesNoFiguresAndNoFailure() {
    Properties p = new Properties();
    p.setProperty("cost.nodes", "pid:999999999,bogus:1,jmx:127.0.0.1");
    NodeCost cost = NodeCost.open(p);
    cost.markStart();
    cost.markEnd();
    assertEquals(1, cost.deltas().size());
    assertTrue(cost.deltas().containsKey("client"));
  }

  @Test
  void redisInfoIsParsed() {
    Map<String, Double> m = NodeCost.parseInfo("# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.5\r\nx:y\r\n");
    assertEquals(1.25, m.get("used_cpu_sys"), 1e-12);
    assertEquals(2.5, m.get("used_cpu_user"), 1e-12);
    assertFalse(m.containsKey("x"));
    assertThrows(IllegalArgumentException.class, () -> NodeCost.source("n", "redis:h", 100, null));
    assertTrue(NodeCost.concurrentCollector("ZGC Cycles"));
    assertFalse(NodeCost.concurrentCollector("G1 Young Generation"));
  }

  /** A stand-in for one of Cassandra's metrics: a counter (Count) and a gauge (Value). */
  public interface MetricMBean {
    long getCount();

    Object getValue();
  }

  public static final class Metric implements MetricMBean {
    volatile long count;
    volatile Object value;

    Metric(long count, Object value) {
      this.count = count;
      this.value = value;
    }

    public long getCount() {
      return count;
    }

    public Object getValue() {
      return value;
    }
  }

  @Test
  void aNodesReadTimeIsSummedOverItsKeyspacesAndItsReadThreadsAreALevel() throws Exception {
    MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
    assertTrue(NodeCost.readStage(mbs).isEmpty(), "a JVM that is no Cassandra node has no read figures");
    ObjectName ycsb = new ObjectName("org.apache.cassandra.metrics:type=Keyspace,keyspace=ycsb,name=ReadTotalLatency");
    ObjectName system = new ObjectName(
        "org.apache.cassandra.metrics:type=Keyspace,keyspace=system,name=ReadTotalLatency");
    ObjectName pool = new ObjectName(
        "org.apache.cassandra.metrics:type=ThreadPools,path=request,scope=ReadStage,name=MaxPoolSize");
    Metric reads = new Metric(1_000_000, null);
    mbs.registerMBean(reads, ycsb);
    mbs.registerMBean(new Metric(5_000, null), system);
    mbs.registerMBean(new Metric(0, 32), pool);
    try {
      Map<String, Double> m = NodeCost.readStage(mbs);
      assertEquals(1_005_000.0, m.get(NodeCost.READ_BUSY_US));
      assertEquals(32.0, m.get(NodeCost.READ_THREADS));
      // over a phase: the time in reads is a difference, the read threads the level at its end
      NodeCost cost = new NodeCost();
      NodeCost.Source node = new NodeCost.Source() {
        public String name() {
          return "node1";
        }

        public Map<String, Double> read() throws Exception {
          return NodeCost.readStage(mbs);
        }
      };
      cost.addForTest(node);
      cost.markStart();
      reads.count += 7_500_000;
      cost.markEnd();
      assertEquals(7_500_000.0, cost.deltas().get("node1").get(NodeCost.READ_BUSY_US));
      assertEquals(32.0, cost.deltas().get("node1").get(NodeCost.READ_THREADS));
    } finally {
      mbs.unregisterMBean(ycsb);
      mbs.unregisterMBean(system);
      mbs.unregisterMBean(pool);
    }
  }
}
