package nosqltune.loadgen;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import redis.clients.jedis.Jedis;

/**
 * What the datastore's processes (and this client) spent on the measured phase: CPU time, split into user
 * and system time where the process is on this machine, and garbage-collection pauses. Each source is read
 * right before the measured phase starts and right after it ends; the lines printed are the differences.
 *
 * <p>Property {@code cost.nodes}: a comma-separated list of sources, one per datastore process, named
 * node1, node2, ... in that order:
 * <ul>
 * <li>{@code jmx:HOST:PORT[:PID]}: a JVM (Cassandra) over unauthenticated JMX: the OperatingSystem MXBean's
 * ProcessCpuTime and the GarbageCollector MXBeans; with PID, user and system time from /proc/PID/stat;
 * <li>{@code redis:HOST:PORT[:PID]}: a Redis server's INFO cpu (used_cpu_user, used_cpu_sys); the password,
 * if any, is {@code redis.password};
 * <li>{@code pid:PID}: any local process, from /proc/PID/stat.
 * </ul>
 * With a PID, the bytes the process read from and wrote to the storage layer ({@code /proc/PID/io}
 * read_bytes, write_bytes: reads served from the page cache do not count) are read too.
 * {@code cost.clktck}: the kernel's clock ticks per second for /proc times (default 100).
 *
 * <p>Property {@code cost.disks}: what the block device under each node's own volume did, as the device and
 * as the cgroup the node's I/O is charged to saw it (so that the I/Os and bytes per operation can be set
 * against the volume's caps). A comma-separated list, one entry per {@code cost.nodes} source in the same
 * order; an empty entry is a node without one, and fewer entries than nodes leave the last nodes without
 * one. An entry is {@code STATFILE} or {@code STATFILE|GROUPDIR@MAJ:MIN}:
 * <ul>
 * <li>{@code STATFILE}: a block device's stat file (e.g. {@code /sys/block/loop3/stat}, fields as in the
 * kernel's Documentation/block/stat.rst): DevReadIOs, DevWriteIOs, DevReadBytes, DevWriteBytes (512-byte
 * sectors), DevReadMs, DevWriteMs (the time the I/Os of each kind spent, summed over I/Os in flight),
 * DevBusyMs (the time the device had I/O in flight);
 * <li>{@code GROUPDIR@MAJ:MIN}: a blkio cgroup's folder and the device number to count in it (the last
 * {@code @} splits, since a folder's name may hold one): cgroup v1 when the folder has
 * {@code blkio.throttle.io_serviced} (and {@code blkio.throttle.io_service_bytes}), else cgroup v2's
 * {@code io.stat}: GroupReadIOs, GroupWriteIOs, GroupReadBytes, GroupWriteBytes. A device the file does not
 * list counts 0: the kernel lists a device only once the group did I/O on it. {@code STATFILE} may be empty,
 * for the group alone.
 * </ul>
 * These figures are the node's, beside its source's. They are read on their own, whatever the node's source
 * is: a node whose source cannot be opened or read still has them. The device and the group are each read
 * on their own too: one whose file cannot be read gives a warning and no figures of its own.
 *
 * <p>Output, in the exporter's "[SECTION], metric, value" shape: {@code [COST], Operations, N}, then per
 * source and for {@code client}: CpuTime(ms), UserTime(ms), SystemTime(ms), GcTime(ms) (pauses), GcCount,
 * ReadBytes, WriteBytes, and the disk figures above;
 * a figure the source cannot give is left out. A source that cannot be read gives no lines and a warning;
 * it never fails the run.
 */
final class NodeCost {

  static final String CPU = "CpuTime(ms)";
  static final String USER = "UserTime(ms)";
  static final String SYSTEM = "SystemTime(ms)";
  static final String GC_TIME = "GcTime(ms)";
  static final String GC_COUNT = "GcCount";
  static final String READ_BYTES = "ReadBytes";
  static final String WRITE_BYTES = "WriteBytes";
  static final String DEV_READ_IOS = "DevReadIOs";
  static final String DEV_WRITE_IOS = "DevWriteIOs";
  static final String DEV_READ_BYTES = "DevReadBytes";
  static final String DEV_WRITE_BYTES = "DevWriteBytes";
  static final String DEV_READ_MS = "DevReadMs";
  static final String DEV_WRITE_MS = "DevWriteMs";
  static final String DEV_BUSY_MS = "DevBusyMs";
  static final String GROUP_READ_IOS = "GroupReadIOs";
  static final String GROUP_WRITE_IOS = "GroupWriteIOs";
  static final String GROUP_READ_BYTES = "GroupReadBytes";
  static final String GROUP_WRITE_BYTES = "GroupWriteBytes";
  /** Time the node spent in local reads, summed over them (Cassandra's keyspaces' ReadTotalLatency, in us):
   * over the phase, divided by its length, the reads in progress on average. */
  static final String READ_BUSY_US = "ReadBusyUs";
  /** The node's read threads (its ReadStage's MaxPoolSize: concurrent_reads), a level: its value at the phase's
   * end is reported, not a difference. */
  static final String READ_THREADS = "ReadThreads";
  static final Set<String> LEVELS = Set.of(READ_THREADS);

  /** One process, or one node's disk, whose cumulative counters can be read. */
  interface Source {
    /** The node (or client) whose figures these are: several sources may share it. */
    String name();

    /** Cumulative counters now (names above). */
    Map<String, Double> read() throws Exception;

    /** What a warning calls this source. */
    default String label() {
      return name();
    }

    default void close() {
    }
  }

  private final List<Source> sources = new ArrayList<>();
  private final Map<Source, Map<String, Double>> start = new IdentityHashMap<>();
  private final Map<String, Map<String, Double>> delta = new LinkedHashMap<>();

  /** The sources named by the properties, plus this JVM as "client". */
  static NodeCost open(java.util.Properties props) {
    NodeCost cost = new NodeCost();
    double clkTck = Double.parseDouble(props.getProperty("cost.clktck", "100"));
    String spec = props.getProperty("cost.nodes", "").trim();
    String[] nodes = spec.isEmpty() ? new String[0] : spec.split(",");
    String[] disks = props.getProperty("cost.disks", "").split(",", -1);
    for (int i = 0; i < nodes.length; i++) {
      String name = "node" + (i + 1);
      String one = nodes[i];
      try {
        cost.sources.add(source(name, one.trim(), clkTck, props.getProperty("redis.password")));
      } catch (Exception e) {
        System.err.println("[loadgen] warning: no cost figures for " + name + " (" + one + "): "
            + CassandraCQLClient.oneLine(e));
      }
      String disk = i < disks.length ? disks[i].trim() : "";
      if (!disk.isEmpty()) {
        try {
          cost.sources.addAll(disk(name, disk));
        } catch (IllegalArgumentException e) {
          System.err.println("[loadgen] warning: no disk figures for " + name + " (" + disk + "): "
              + CassandraCQLClient.oneLine(e));
        }
      }
    }
    for (int i = nodes.length; i < disks.length; i++) {
      if (!disks[i].trim().isEmpty()) {
        System.err.println("[loadgen] warning: cost.disks entry " + (i + 1) + " (" + disks[i].trim()
            + ") has no cost.nodes source: ignored");
      }
    }
    cost.sources.add(new Self(clkTck));
    return cost;
  }

  /** The sources of one {@code cost.disks} entry, {@code STATFILE} or {@code STATFILE|GROUPDIR@MAJ:MIN},
   * named as the node they belong to. */
  static List<Source> disk(String name, String spec) {
    int bar = spec.indexOf('|');
    String statFile = (bar < 0 ? spec : spec.substring(0, bar)).trim();
    List<Source> found = new ArrayList<>();
    if (!statFile.isEmpty()) {
      found.add(new Device(name, Paths.get(statFile)));
    }
    if (bar >= 0) {
      String group = spec.substring(bar + 1).trim();
      int at = group.lastIndexOf('@');
      if (at <= 0 || !group.substring(at + 1).matches("\\d+:\\d+")) {
        throw new IllegalArgumentException("expected STATFILE or STATFILE|GROUPDIR@MAJ:MIN");
      }
      found.add(new Group(name, Paths.get(group.substring(0, at)), group.substring(at + 1)));
    }
    return found;
  }

  static Source source(String name, String spec, double clkTck, String redisPassword) throws Exception {
    String[] p = spec.split(":");
    switch (p[0]) {
      case "jmx":
        if (p.length < 3) {
          throw new IllegalArgumentException("expected jmx:HOST:PORT[:PID]");
        }
        return new Jmx(name, p[1], Integer.parseInt(p[2]), p.length > 3 ? Long.parseLong(p[3]) : -1, clkTck);
      case "redis":
        if (p.length < 3) {
          throw new IllegalArgumentException("expected redis:HOST:PORT[:PID]");
        }
        return new Redis(name, p[1], Integer.parseInt(p[2]), p.length > 3 ? Long.parseLong(p[3]) : -1, redisPassword);
      case "pid":
        if (p.length < 2) {
          throw new IllegalArgumentException("expected pid:PID");
        }
        long pid = Long.parseLong(p[1]);
        return new Source() {
          public String name() {
            return name;
          }

          public Map<String, Double> read() throws IOException {
            Map<String, Double> m = procTimes(pid, clkTck);
            m.putAll(procIo(pid));
            return m;
          }
        };
      default:
        throw new IllegalArgumentException("unknown cost source '" + p[0] + "' (jmx, redis or pid)");
    }
  }

  /** A source of the tests' own. */
  void addForTest(Source source) {
    sources.add(source);
  }

  void markStart() {
    for (Source s : sources) {
      try {
        start.put(s, s.read());
      } catch (Exception e) {
        System.err.println("[loadgen] warning: cost of " + s.label() + " not read at the phase's start: "
            + CassandraCQLClient.oneLine(e));
      }
    }
  }

  /** The differences since markStart, each source's merged into its node's figures. */
  void markEnd() {
    for (Source s : sources) {
      Map<String, Double> before = start.get(s);
      if (before == null) {
        continue;
      }
      try {
        Map<String, Double> after = s.read();
        Map<String, Double> d = delta.computeIfAbsent(s.name(), k -> new LinkedHashMap<>());
        for (Map.Entry<String, Double> e : after.entrySet()) {
          Double b = before.get(e.getKey());
          if (LEVELS.contains(e.getKey())) {
            if (!e.getValue().isNaN()) {
              d.put(e.getKey(), e.getValue());
            }
          } else if (b != null && !b.isNaN() && !e.getValue().isNaN()) {
            d.put(e.getKey(), e.getValue() - b);
          }
        }
      } catch (Exception e) {
        System.err.println("[loadgen] warning: cost of " + s.label() + " not read at the phase's end: "
            + CassandraCQLClient.oneLine(e));
      }
    }
  }

  void close() {
    for (Source s : sources) {
      s.close();
    }
  }

  void print(PrintStream out, long operations) {
    out.println("[COST], Operations, " + operations);
    for (Map.Entry<String, Map<String, Double>> e : delta.entrySet()) {
      for (Map.Entry<String, Double> m : e.getValue().entrySet()) {
        out.println("[COST], " + e.getKey() + "." + m.getKey() + ", "
            + String.format(Locale.ROOT, "%.3f", m.getValue()));
      }
    }
  }

  Map<String, Map<String, Double>> deltas() {
    return delta;
  }

  // ---------------------------------------------------------------- sources

  /** utime and stime of /proc/PID/stat (fields 14 and 15), in ms. */
  static Map<String, Double> procTimes(long pid, double clkTck) throws IOException {
    String stat = new String(Files.readAllBytes(Paths.get("/proc/" + (pid < 0 ? "self" : Long.toString(pid))
        + "/stat")), StandardCharsets.US_ASCII);
    // the command name (field 2) may hold spaces and parentheses: fields count from the last ')'
    String[] f = stat.substring(stat.lastIndexOf(')') + 2).trim().split("\\s+");
    double user = Long.parseLong(f[11]) * 1000.0 / clkTck;
    double system = Long.parseLong(f[12]) * 1000.0 / clkTck;
    Map<String, Double> m = new LinkedHashMap<>();
    m.put(CPU, user + system);
    m.put(USER, user);
    m.put(SYSTEM, system);
    return m;
  }

  /** read_bytes and write_bytes of /proc/PID/io (the storage layer's; page-cache hits are not reads); empty
   * when the file cannot be read (another user's process without the right to trace it). */
  static Map<String, Double> procIo(long pid) {
    Map<String, Double> m = new LinkedHashMap<>();
    try {
      for (String line : Files.readAllLines(Paths.get("/proc/" + (pid < 0 ? "self" : Long.toString(pid)) + "/io"),
          StandardCharsets.US_ASCII)) {
        if (line.startsWith("read_bytes:")) {
          m.put(READ_BYTES, Double.parseDouble(line.substring(11).trim()));
        } else if (line.startsWith("write_bytes:")) {
          m.put(WRITE_BYTES, Double.parseDouble(line.substring(12).trim()));
        }
      }
    } catch (IOException | RuntimeException e) {
      // no I/O figures
    }
    return m;
  }

  /** A block device's counters from its stat file (Documentation/block/stat.rst; sectors are 512 bytes). */
  static final class Device implements Source {
    private final String name;
    private final Path statFile;

    Device(String name, Path statFile) {
      this.name = name;
      this.statFile = statFile;
    }

    public String name() {
      return name;
    }

    public String label() {
      return name + "'s disk " + statFile;
    }

    public Map<String, Double> read() throws IOException {
      String[] f = new String(Files.readAllBytes(statFile), StandardCharsets.US_ASCII).trim().split("\\s+");
      if (f.length < 10) {
        throw new IOException(statFile + " has " + f.length + " fields, not a block device's stat (10 or more)");
      }
      Map<String, Double> m = new LinkedHashMap<>();
      m.put(DEV_READ_IOS, Double.parseDouble(f[0]));
      m.put(DEV_WRITE_IOS, Double.parseDouble(f[4]));
      m.put(DEV_READ_BYTES, Double.parseDouble(f[2]) * 512);
      m.put(DEV_WRITE_BYTES, Double.parseDouble(f[6]) * 512);
      m.put(DEV_READ_MS, Double.parseDouble(f[3]));
      m.put(DEV_WRITE_MS, Double.parseDouble(f[7]));
      m.put(DEV_BUSY_MS, Double.parseDouble(f[9]));
      return m;
    }
  }

  /** One device's I/O as a blkio cgroup was charged for it: cgroup v1's throttle files, else v2's io.stat. */
  static final class Group implements Source {
    private final String name;
    private final Path dir;
    private final String device;

    Group(String name, Path dir, String device) {
      this.name = name;
      this.dir = dir;
      this.device = device;
    }

    public String name() {
      return name;
    }

    public String label() {
      return name + "'s blkio group " + dir + " (" + device + ")";
    }

    public Map<String, Double> read() throws IOException {
      Map<String, Double> m = new LinkedHashMap<>();
      Path serviced = dir.resolve("blkio.throttle.io_serviced");
      if (Files.exists(serviced)) {
        Map<String, Double> ios = groupCounters(serviced, device);
        Map<String, Double> bytes = groupCounters(dir.resolve("blkio.throttle.io_service_bytes"), device);
        m.put(GROUP_READ_IOS, ios.getOrDefault("Read", 0.0));
        m.put(GROUP_WRITE_IOS, ios.getOrDefault("Write", 0.0));
        m.put(GROUP_READ_BYTES, bytes.getOrDefault("Read", 0.0));
        m.put(GROUP_WRITE_BYTES, bytes.getOrDefault("Write", 0.0));
      } else {
        Map<String, Double> stat = groupCounters(dir.resolve("io.stat"), device);
        m.put(GROUP_READ_IOS, stat.getOrDefault("rios", 0.0));
        m.put(GROUP_WRITE_IOS, stat.getOrDefault("wios", 0.0));
        m.put(GROUP_READ_BYTES, stat.getOrDefault("rbytes", 0.0));
        m.put(GROUP_WRITE_BYTES, stat.getOrDefault("wbytes", 0.0));
      }
      return m;
    }
  }

  /** A cgroup I/O file's counters for one device: v1's "MAJ:MIN Read N" lines as Read -> N, v2's
   * "MAJ:MIN rbytes=N wbytes=N ..." line as rbytes -> N, ...; empty when the device is not listed. */
  static Map<String, Double> groupCounters(Path file, String device) throws IOException {
    Map<String, Double> m = new LinkedHashMap<>();
    for (String line : Files.readAllLines(file, StandardCharsets.US_ASCII)) {
      String[] t = line.trim().split("\\s+");
      if (!t[0].equals(device)) {
        continue;
      }
      if (t.length == 3 && t[1].indexOf('=') < 0) {
        m.put(t[1], Double.parseDouble(t[2]));
        continue;
      }
      for (int i = 1; i < t.length; i++) {
        int eq = t[i].indexOf('=');
        if (eq > 0) {
          try {
            m.put(t[i].substring(0, eq), Double.parseDouble(t[i].substring(eq + 1)));
          } catch (NumberFormatException ignored) {
            // not a counter
          }
        }
      }
    }
    return m;
  }

  /** Collectors whose time is concurrent work, not pauses (ZGC's and Shenandoah's "... Cycles"). */
  static boolean concurrentCollector(String name) {
    return name.endsWith("Cycles");
  }

  static final class Jmx implements Source {
    private final String name;
    private final long pid;
    private final double clkTck;
    private final JMXConnector connector;
    private final MBeanServerConnection mbs;
    private final Set<ObjectName> collectors;

    Jmx(String name, String host, int port, long pid, double clkTck) throws Exception {
      this.name = name;
      this.pid = pid;
      this.clkTck = clkTck;
      NodeInternals.Args a = new NodeInternals.Args();
      a.host = host;
      a.jmxPort = port;
      ExecutorService ex = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "jmx-connect");
        t.setDaemon(true);
        return t;
      });
      try {
        connector = NodeInternals.connect(ex, a);
      } finally {
        ex.shutdown();
      }
      mbs = connector.getMBeanServerConnection();
      collectors = mbs.queryNames(new ObjectName("java.lang:type=GarbageCollector,name=*"), null);
    }

    public String name() {
      return name;
    }

    public Map<String, Double> read() throws Exception {
      Map<String, Double> m = new LinkedHashMap<>();
      Object cpu = mbs.getAttribute(new ObjectName("java.lang:type=OperatingSystem"), "ProcessCpuTime");
      m.put(CPU, cpu instanceof Number && ((Number) cpu).longValue() >= 0 ? ((Number) cpu).doubleValue() / 1e6
          : Double.NaN);
      double time = 0;
      double count = 0;
      for (ObjectName n : collectors) {
        if (concurrentCollector(n.getKeyProperty("name"))) {
          continue;
        }
        time += Math.max(0, ((Number) mbs.getAttribute(n, "CollectionTime")).doubleValue());
        count += Math.max(0, ((Number) mbs.getAttribute(n, "CollectionCount")).doubleValue());
      }
      if (pid > 0) {
        Map<String, Double> proc = procTimes(pid, clkTck);
        m.put(USER, proc.get(USER));
        m.put(SYSTEM, proc.get(SYSTEM));
        m.putAll(procIo(pid));
      }
      m.put(GC_TIME, time);
      m.put(GC_COUNT, count);
      m.putAll(readStage(mbs));
      return m;
    }

    public void close() {
      try {
        connector.close();
      } catch (IOException ignored) {
        // the run is over anyway
      }
    }
  }

  /** A Cassandra node's local reads: the time spent in them so far, summed over its keyspaces, and its read
   * threads; empty for a JVM that is not a Cassandra node (no such MBeans). */
  static Map<String, Double> readStage(MBeanServerConnection mbs) throws Exception {
    Map<String, Double> m = new LinkedHashMap<>();
    Set<ObjectName> keyspaces = mbs.queryNames(
        new ObjectName("org.apache.cassandra.metrics:type=Keyspace,keyspace=*,name=ReadTotalLatency"), null);
    if (keyspaces.isEmpty()) {
      return m;
    }
    double busy = 0;
    for (ObjectName n : keyspaces) {
      busy += ((Number) mbs.getAttribute(n, "Count")).doubleValue();
    }
    m.put(READ_BUSY_US, busy);
    ObjectName pool = new ObjectName(
        "org.apache.cassandra.metrics:type=ThreadPools,path=request,scope=ReadStage,name=MaxPoolSize");
    if (mbs.isRegistered(pool)) {
      m.put(READ_THREADS, ((Number) mbs.getAttribute(pool, "Value")).doubleValue());
    }
    return m;
  }

  static final class Redis implements Source {
    private final String name;
    private final long pid;
    private final Jedis jedis;

    Redis(String name, String host, int port, long pid, String password) {
      this.name = name;
      this.pid = pid;
      this.jedis = new Jedis(host, port, 10000);
      if (password != null && !password.isEmpty()) {
        jedis.auth(password);
      }
    }

    public String name() {
      return name;
    }

    public Map<String, Double> read() {
      Map<String, Double> info = parseInfo(jedis.info("cpu"));
      Map<String, Double> m = new LinkedHashMap<>();
      double user = info.getOrDefault("used_cpu_user", Double.NaN) * 1000.0;
      double system = info.getOrDefault("used_cpu_sys", Double.NaN) * 1000.0;
      m.put(CPU, user + system);
      m.put(USER, user);
      m.put(SYSTEM, system);
      if (pid > 0) {
        m.putAll(procIo(pid));
      }
      return m;
    }

    public void close() {
      jedis.close();
    }
  }

  /** INFO's "key:value" lines with numeric values. */
  static Map<String, Double> parseInfo(String text) {
    Map<String, Double> m = new LinkedHashMap<>();
    for (String line : text.split("\r?\n")) {
      int colon = line.indexOf(':');
      if (colon <= 0 || line.startsWith("#")) {
        continue;
      }
      try {
        m.put(line.substring(0, colon).trim(), Double.parseDouble(line.substring(colon + 1).trim()));
      } catch (NumberFormatException ignored) {
        // not a number
      }
    }
    return m;
  }

  /** This JVM: the YCSB client's own cost. */
  static final class Self implements Source {
    private final double clkTck;

    Self(double clkTck) {
      this.clkTck = clkTck;
    }

    public String name() {
      return "client";
    }

    public Map<String, Double> read() throws IOException {
      Map<String, Double> m = new LinkedHashMap<>();
      java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
      double cpu = os instanceof com.sun.management.OperatingSystemMXBean
          ? ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1e6 : Double.NaN;
      m.put(CPU, cpu);
      try {
        Map<String, Double> proc = procTimes(-1, clkTck);
        m.put(USER, proc.get(USER));
        m.put(SYSTEM, proc.get(SYSTEM));
      } catch (IOException | RuntimeException e) {
        // no /proc: no split
      }
      double time = 0;
      double count = 0;
      for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
        if (!concurrentCollector(gc.getName())) {
          time += Math.max(0, gc.getCollectionTime());
          count += Math.max(0, gc.getCollectionCount());
        }
      }
      m.put(GC_TIME, time);
      m.put(GC_COUNT, count);
      return m;
    }
  }
}
