package nosqltune.loadgen;

import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import javax.management.InstanceNotFoundException;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.openmbean.CompositeData;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * Reads a Cassandra node's internals over JMX and runs drain / flush. Plain javax.management:
 * no Cassandra classes needed. The nodes nosqltune starts expose unauthenticated local JMX
 * ({@code -Dcassandra.jmx.local.port=N}); others may ask for credentials and TLS (below).
 *
 * <pre>
 * NodeInternals --jmx-port N [--host 127.0.0.1] stats [--keyspace ycsb] [--table usertable]
 * NodeInternals --jmx-port N drain [--timeout-seconds 60]
 * NodeInternals --jmx-port N flush --keyspace K [--table T ...] [--timeout-seconds 60]
 * NodeInternals --jmx-port N import --keyspace K --table T --directory D [--directory D2 ...] [--verify]
 *     [--keep-level] [--timeout-seconds 60]
 * NodeInternals --jmx-port N requests [--keyspace K --table T]
 * NodeInternals --jmx-port N set --name KNOB --value V [--timeout-seconds 60]
 * NodeInternals --jmx-port N status
 * NodeInternals --jmx-port N rewrite --keyspace K --table T [--throughput MIB_S] [--timeout-seconds 60]
 * </pre>
 *
 * <p>{@code status} serves a rollout: the node's release version and operation mode (NORMAL, JOINING, DRAINED,
 * ...), the nodes it sees live, unreachable and joining, the schema versions the cluster reports (one when it
 * agrees), and the hints it holds for other nodes. {@code rewrite} is {@code nodetool upgradesstables -a} of one
 * table on this node, one SSTable at a time, throttled by {@code --throughput} MiB/s when given (the node's own
 * compaction throughput set back after).
 *
 * <p>A node with JMX authentication or TLS (a cluster nosqltune did not start): {@code --credentials-file F} names
 * a file whose first line that is not a comment is {@code USER PASSWORD} (jmxremote.password's form);
 * {@code --truststore F} a trust store for JMX over TLS, its password in {@code --truststore-password-file F}.
 * Passwords are read from files only, never taken on the command line.
 *
 * <p>{@code requests} and {@code set} serve online re-tuning: the ClientRequest counters a window is made of, and
 * one live knob applied and read back (see {@link NodeRequests}).
 *
 * <p>{@code import} is {@code nodetool import}: the table's {@code importNewSSTables} moves the SSTables
 * of each directory into the table's data directory and makes them live (without {@code --verify}
 * their checksums and tokens are not checked first; without {@code --keep-level} their compaction levels and
 * repair state are reset, as for freshly written data). It fails if any directory could not be imported. Then it
 * asks the node to start the table's background compactions at once (see {@link #startCompactions}).
 *
 * <p>{@code stats} prints one JSON object on stdout; a metric that cannot be read (e.g. the
 * table does not exist yet) is null. Exit codes: 0 ok, 2 bad usage, 3 cannot connect,
 * 4 operation failed or timed out.
 */
public final class NodeInternals {

  static final int EXIT_USAGE = 2;
  static final int EXIT_CONNECT = 3;
  static final int EXIT_OPERATION = 4;

  private static final String STORAGE_SERVICE = "org.apache.cassandra.db:type=StorageService";
  private static final String METRICS = "org.apache.cassandra.metrics";

  private NodeInternals() {
  }

  static final class Failure extends Exception {
    private static final long serialVersionUID = 1L;
    final int code;
    final boolean showUsage;

    Failure(int code, String message) {
      this(code, message, code == EXIT_USAGE);
    }

    Failure(int code, String message, boolean showUsage) {
      super(message);
      this.code = code;
      this.showUsage = showUsage;
    }
  }

  static final class Args {
    String host = "127.0.0.1";
    int jmxPort = -1;
    String command;
    String keyspace;
    List<String> tables = new ArrayList<>();
    List<String> directories = new ArrayList<>();
    boolean verify;
    boolean keepLevel;
    String knobName;
    String knobValue;
    long timeoutSeconds = 60;
    long connectTimeoutSeconds = 5;
    String credentialsFile;
    String truststore;
    String truststorePasswordFile;
    int throughput = -1;
  }

  static void usage(PrintStream err) {
    err.println("Usage: java -cp ... nosqltune.loadgen.NodeInternals --jmx-port N [--host H] COMMAND [options]");
    err.println("  stats [--keyspace ycsb] [--table usertable]   one JSON object with node internals");
    err.println("  drain [--timeout-seconds 60]                   nodetool drain; returns when done");
    err.println("  flush --keyspace K [--table T]... [--timeout-seconds 60]");
    err.println("  import --keyspace K --table T --directory D [--directory D]... [--verify] [--keep-level]"
        + " [--timeout-seconds 60]");
    err.println("                                                 nodetool import: SSTables of D become live");
    err.println("  requests [--keyspace K --table T]              ClientRequest counts and percentiles, JVM uptime;");
    err.println("                                                 with a table: its local read/write latencies");
    err.println("  set --name KNOB --value V [--timeout-seconds 60]  one live knob over JMX, read back");
    err.println("  status                                         version, mode, live/unreachable nodes, schema, hints");
    err.println("  rewrite --keyspace K --table T [--throughput MIB_S] [--timeout-seconds 60]");
    err.println("                                                 nodetool upgradesstables -a, one SSTable at a time");
    err.println("  querylog-on --directory D                     nodetool enablefullquerylog --path D (hourly files,");
    err.println("                                                 blocking, 256 MiB queue, 16 GiB kept)");
    err.println("  querylog-off                                   nodetool disablefullquerylog (the log's queue drained)");
    err.println("  snapshot --keyspace K --table T --name TAG     nodetool snapshot -t TAG K.T (flushed first)");
    err.println("  --connect-timeout-seconds S (default 5)");
    err.println("  --credentials-file F  JMX user and password ('USER PASSWORD', the file's first line)");
    err.println("  --truststore F [--truststore-password-file F]  JMX over TLS");
    err.println("Exit codes: 0 ok, 2 usage, 3 cannot connect, 4 operation failed or timed out");
  }

  static Args parse(String[] argv) throws Failure {
    Args a = new Args();
    for (int i = 0; i < argv.length; i++) {
      String s = argv[i];
      switch (s) {
        case "--jmx-port":
          a.jmxPort = parseInt(value(argv, ++i, s), s);
          break;
        case "--host":
          a.host = value(argv, ++i, s);
          break;
        case "--keyspace":
          a.keyspace = value(argv, ++i, s);
          break;
        case "--table":
          for (String t : value(argv, ++i, s).split(",")) {
            if (!t.trim().isEmpty()) {
              a.tables.add(t.trim());
            }
          }
          break;
        case "--directory":
          a.directories.add(value(argv, ++i, s));
          break;
        case "--keep-level":
          a.keepLevel = true;
          break;
        case "--verify":
          a.verify = true;
          break;
        case "--name":
          a.knobName = value(argv, ++i, s);
          break;
        case "--value":
          a.knobValue = value(argv, ++i, s);
          break;
        case "--timeout-seconds":
          a.timeoutSeconds = parseInt(value(argv, ++i, s), s);
          break;
        case "--connect-timeout-seconds":
          a.connectTimeoutSeconds = parseInt(value(argv, ++i, s), s);
          break;
        case "--credentials-file":
          a.credentialsFile = value(argv, ++i, s);
          break;
        case "--truststore":
          a.truststore = value(argv, ++i, s);
          break;
        case "--truststore-password-file":
          a.truststorePasswordFile = value(argv, ++i, s);
          break;
        case "--throughput":
          a.throughput = parseInt(value(argv, ++i, s), s);
          break;
        case "stats":
        case "drain":
        case "flush":
        case "import":
        case "requests":
        case "set":
        case "status":
        case "rewrite":
        case "querylog-on":
        case "querylog-off":
        case "snapshot":
          if (a.command != null) {
            throw new Failure(EXIT_USAGE, "more than one command: " + a.command + ", " + s);
          }
          a.command = s;
          break;
        default:
          throw new Failure(EXIT_USAGE, "unknown argument: " + s);
      }
    }
    if (a.jmxPort <= 0) {
      throw new Failure(EXIT_USAGE, "--jmx-port is required");
    }
    if (a.command == null) {
      throw new Failure(EXIT_USAGE, "a command (stats, drain, flush, import, requests, set, status, rewrite, querylog-on, "
          + "querylog-off, snapshot) is required");
    }
    if (a.command.equals("set")) {
      if (a.knobName == null || a.knobValue == null) {
        throw new Failure(EXIT_USAGE, "set needs --name and --value");
      }
      NodeRequests.wholeValue(NodeRequests.knob(a.knobName).name, a.knobValue);  // refused before connecting
    }
    if (a.command.equals("import") && (a.keyspace == null || a.tables.size() != 1 || a.directories.isEmpty())) {
      throw new Failure(EXIT_USAGE, "import needs --keyspace, one --table and at least one --directory");
    }
    if (a.command.equals("rewrite") && (a.keyspace == null || a.tables.size() != 1)) {
      throw new Failure(EXIT_USAGE, "rewrite needs --keyspace and one --table");
    }
    if (a.command.equals("snapshot") && (a.keyspace == null || a.tables.size() != 1 || a.knobName == null)) {
      throw new Failure(EXIT_USAGE, "snapshot needs --keyspace, one --table and --name (the snapshot's tag)");
    }
    if (a.command.equals("querylog-on") && a.directories.size() != 1) {
      throw new Failure(EXIT_USAGE, "querylog-on needs one --directory");
    }
    if (a.command.equals("flush") && a.keyspace == null) {
      throw new Failure(EXIT_USAGE, "flush needs --keyspace");
    }
    if (a.timeoutSeconds <= 0 || a.connectTimeoutSeconds <= 0) {
      throw new Failure(EXIT_USAGE, "timeouts must be positive");
    }
    return a;
  }

  private static String value(String[] argv, int i, String opt) throws Failure {
    if (i >= argv.length) {
      throw new Failure(EXIT_USAGE, "missing value for " + opt);
    }
    return argv[i];
  }

  private static int parseInt(String v, String opt) throws Failure {
    try {
      return Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new Failure(EXIT_USAGE, opt + " expects an integer, got: " + v);
    }
  }

  public static void main(String[] argv) {
    PrintStream out = System.out;
    System.setOut(System.err); // stdout carries the JSON only
    for (String s : argv) {
      if (s.equals("-h") || s.equals("--help")) {
        usage(System.err);
        System.exit(0);
      }
    }
    int code = 0;
    ExecutorService ex = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "jmx-call");
      t.setDaemon(true);
      return t;
    });
    JMXConnector connector = null;
    try {
      Args a = parse(argv);
      connector = connect(ex, a);
      MBeanServerConnection mbs = connector.getMBeanServerConnection();
      switch (a.command) {
        case "stats": {
          String ks = a.keyspace == null ? "ycsb" : a.keyspace;
          String table = a.tables.isEmpty() ? "usertable" : a.tables.get(0);
          Map<String, Object> stats = stats(mbs, ks, table);
          out.println(Json.write(stats));
          out.flush();
          break;
        }
        case "drain":
          call(ex, a.timeoutSeconds, "drain", () -> mbs.invoke(new ObjectName(STORAGE_SERVICE), "drain",
              new Object[0], new String[0]));
          System.err.println("drain completed");
          break;
        case "flush": {
          String[] tables = a.tables.toArray(new String[0]);
          call(ex, a.timeoutSeconds, "flush", () -> mbs.invoke(new ObjectName(STORAGE_SERVICE),
              "forceKeyspaceFlush", new Object[] {a.keyspace, tables},
              new String[] {String.class.getName(), String[].class.getName()}));
          System.err.println("flush of " + a.keyspace + (tables.length > 0 ? " " + Arrays.toString(tables) : "")
              + " completed");
          break;
        }
        case "import": {
          List<String> failed = importSSTables(ex, mbs, a);
          if (!failed.isEmpty()) {
            throw new Failure(EXIT_OPERATION, "import into " + a.keyspace + "." + a.tables.get(0)
                + " failed for " + failed + " (the node's log says why)");
          }
          startCompactions(ex, mbs, a);
          System.err.println("import of " + a.directories + " into " + a.keyspace + "." + a.tables.get(0)
              + " completed");
          break;
        }
        case "requests":
          out.println(Json.write(NodeRequests.requests(mbs, a.keyspace, a.tables.isEmpty() ? null : a.tables.get(0))));
          out.flush();
          break;
        case "set":
          out.println(Json.write(NodeRequests.set(ex, mbs, a.knobName, a.knobValue, a.timeoutSeconds)));
          out.flush();
          break;
        case "status":
          out.println(Json.write(status(ex, mbs, a.timeoutSeconds)));
          out.flush();
          break;
        case "rewrite":
          out.println(Json.write(rewrite(ex, mbs, a)));
          out.flush();
          break;
        case "querylog-on":
          // nodetool enablefullquerylog's defaults (BinLogOptions): hourly files, blocking, a 256 MiB queue, 16 GiB
          call(ex, a.timeoutSeconds, "enablefullquerylog", () -> mbs.invoke(new ObjectName(STORAGE_SERVICE),
              "enableFullQueryLogger", new Object[] {a.directories.get(0), "HOURLY", Boolean.TRUE, 268435456,
                  17179869184L, null, 10},
              new String[] {String.class.getName(), String.class.getName(), Boolean.class.getName(), "int", "long",
                  String.class.getName(), "int"}));
          System.err.println("full query log on, in " + a.directories.get(0));
          break;
        case "snapshot":
          call(ex, a.timeoutSeconds, "snapshot", () -> mbs.invoke(new ObjectName(STORAGE_SERVICE),
              "takeTableSnapshot", new Object[] {a.keyspace, a.tables.get(0), a.knobName},
              new String[] {String.class.getName(), String.class.getName(), String.class.getName()}));
          System.err.println("snapshot " + a.knobName + " of " + a.keyspace + "." + a.tables.get(0) + " taken");
          break;
        case "querylog-off":
          call(ex, a.timeoutSeconds, "disablefullquerylog", () -> mbs.invoke(new ObjectName(STORAGE_SERVICE),
              "stopFullQueryLogger", new Object[0], new String[0]));
          System.err.println("full query log off");
          break;
        default:
          throw new Failure(EXIT_USAGE, "unknown command " + a.command);
      }
    } catch (Failure f) {
      System.err.println("error: " + f.getMessage());
      if (f.code == EXIT_USAGE && f.showUsage) {
        usage(System.err);
      }
      code = f.code;
    } catch (Exception e) {
      System.err.println("error: " + CassandraCQLClient.oneLine(e));
      code = EXIT_OPERATION;
    } finally {
      if (connector != null) {
        JMXConnector c = connector;
        Future<?> f = ex.submit(() -> {
          c.close();
          return null;
        });
        try {
          f.get(2, TimeUnit.SECONDS);
        } catch (Exception ignored) {
          // exiting anyway
        }
      }
    }
    out.flush();
    System.exit(code);
  }

  interface JmxCall {
    Object call() throws Exception;
  }

  static Object call(ExecutorService ex, long timeoutSeconds, String what, JmxCall c) throws Failure {
    Future<Object> f = ex.submit(c::call);
    try {
      return f.get(timeoutSeconds, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      f.cancel(true);
      throw new Failure(EXIT_OPERATION, what + " did not complete within " + timeoutSeconds + " s");
    } catch (ExecutionException e) {
      Throwable cause = e.getCause() == null ? e : e.getCause();
      if ((cause instanceof javax.management.MBeanException || cause instanceof javax.management.RuntimeMBeanException)
          && cause.getCause() != null) {
        cause = cause.getCause();
      }
      throw new Failure(EXIT_OPERATION, what + " failed: " + CassandraCQLClient.oneLine(cause));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new Failure(EXIT_OPERATION, what + " interrupted");
    }
  }

  /**
   * The table's importNewSSTables (Cassandra 4.0+): level and repair state reset (kept with --keep-level: restored
   * data keeps its layout), row cache entries invalidated,
   * files moved rather than copied; checksums and tokens verified only with --verify. Returns the directories that
   * failed (the node logs why and leaves their SSTables where they were).
   */
  @SuppressWarnings("unchecked")
  static List<String> importSSTables(ExecutorService ex, MBeanServerConnection mbs, Args a) throws Failure {
    String table = "org.apache.cassandra.db:type=Tables,keyspace=" + quoteIfNeeded(a.keyspace) + ",table="
        + quoteIfNeeded(a.tables.get(0));
    Set<String> directories = new java.util.LinkedHashSet<>(a.directories);
    String b = boolean.class.getName();
    Object failed = call(ex, a.timeoutSeconds, "import", () -> mbs.invoke(new ObjectName(table), "importNewSSTables",
        new Object[] {directories, !a.keepLevel, !a.keepLevel, a.verify, a.verify, true, false, false},
        new String[] {Set.class.getName(), b, b, b, b, b, b, b}));
    return failed == null ? List.of() : (List<String>) failed;
  }

  /**
   * The table's background compactions asked for now (StorageService's enableAutoCompaction, as
   * {@code nodetool enableautocompaction}: it submits them, and compaction stays on). An import makes its SSTables
   * live without asking: left alone, the node's own periodic check first asks 5 minutes after it started (then every
   * minute), so a leveled dataset built by import waited about 5 minutes with the CPU idle.
   */
  static void startCompactions(ExecutorService ex, MBeanServerConnection mbs, Args a) {
    try {
      call(ex, a.timeoutSeconds, "enableAutoCompaction", () -> mbs.invoke(new ObjectName(STORAGE_SERVICE),
          "enableAutoCompaction", new Object[] {a.keyspace, new String[] {a.tables.get(0)}},
          new String[] {String.class.getName(), String[].class.getName()}));
    } catch (Failure f) {   // the SSTables are live: the import stands, its compactions start at the node's own check
      System.err.println("warning: " + f.getMessage() + "; the node starts the compactions at its next periodic check");
    }
  }

  static JMXConnector connect(ExecutorService ex, Args a) throws Failure {
    // Bound the TCP connect of the RMI transport too, in case nothing answers at all.
    long ms = TimeUnit.SECONDS.toMillis(a.connectTimeoutSeconds);
    System.setProperty("sun.rmi.transport.connectionTimeout", String.valueOf(ms));
    System.setProperty("sun.rmi.transport.proxy.connectTimeout", String.valueOf(ms));
    String url = "service:jmx:rmi:///jndi/rmi://" + a.host + ":" + a.jmxPort + "/jmxrmi";
    Map<String, Object> env = secured(a);
    Future<JMXConnector> f = ex.submit(() -> JMXConnectorFactory.connect(new JMXServiceURL(url), env));
    try {
      JMXConnector c = f.get(a.connectTimeoutSeconds, TimeUnit.SECONDS);
      c.getMBeanServerConnection().getMBeanCount(); // make sure it really answers
      return c;
    } catch (TimeoutException e) {
      f.cancel(true);
      throw new Failure(EXIT_CONNECT, "cannot connect to JMX at " + url + ": no answer within "
          + a.connectTimeoutSeconds + " s");
    } catch (ExecutionException e) {
      Throwable cause = e.getCause() == null ? e : e.getCause();
      Throwable root = cause;
      while (root.getCause() != null && root.getCause() != root) {
        root = root.getCause();
      }
      throw new Failure(EXIT_CONNECT, "cannot connect to JMX at " + url + ": " + CassandraCQLClient.oneLine(root));
    } catch (IOException e) {
      throw new Failure(EXIT_CONNECT, "cannot connect to JMX at " + url + ": " + CassandraCQLClient.oneLine(e));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new Failure(EXIT_CONNECT, "interrupted while connecting to " + url);
    }
  }

  /**
   * The connection's environment for a node with JMX authentication ({@code --credentials-file}) or TLS
   * ({@code --truststore}): credentials and the trust store's password are read from their files here.
   */
  static Map<String, Object> secured(Args a) throws Failure {
    Map<String, Object> env = new HashMap<>();
    if (a.credentialsFile != null) {
      String line = firstLine(a.credentialsFile, "--credentials-file");
      String[] parts = line.split("\\s+", 2);
      if (parts.length != 2 || parts[1].isEmpty()) {
        throw new Failure(EXIT_USAGE, "--credentials-file " + a.credentialsFile
            + ": its first line must be 'USER PASSWORD'", false);
      }
      env.put(JMXConnector.CREDENTIALS, new String[] {parts[0], parts[1]});
    }
    if (a.truststore != null) {
      if (!java.nio.file.Files.isReadable(java.nio.file.Paths.get(a.truststore))) {
        throw new Failure(EXIT_USAGE, "--truststore " + a.truststore + ": cannot read it", false);
      }
      System.setProperty("javax.net.ssl.trustStore", a.truststore);
      if (a.truststorePasswordFile != null) {
        System.setProperty("javax.net.ssl.trustStorePassword",
            firstLine(a.truststorePasswordFile, "--truststore-password-file"));
      }
      env.put("com.sun.jndi.rmi.factory.socket", new javax.rmi.ssl.SslRMIClientSocketFactory());
    }
    return env;
  }

  private static String firstLine(String file, String flag) throws Failure {
    try {
      for (String line : java.nio.file.Files.readAllLines(java.nio.file.Paths.get(file))) {
        String t = line.trim();
        if (!t.isEmpty() && !t.startsWith("#")) {
          return t;
        }
      }
    } catch (IOException e) {
      throw new Failure(EXIT_USAGE, flag + " " + file + ": cannot read it (" + e.getMessage() + ")", false);
    }
    throw new Failure(EXIT_USAGE, flag + " " + file + ": it is empty", false);
  }

  /** What a rollout asks of a node before and after each step (the class comment's {@code status}). */
  @SuppressWarnings("unchecked")
  static Map<String, Object> status(ExecutorService ex, MBeanServerConnection mbs, long timeoutSeconds)
      throws Failure {
    ObjectName ss;
    ObjectName proxy;
    ObjectName hints;
    try {
      ss = new ObjectName(STORAGE_SERVICE);
      proxy = new ObjectName("org.apache.cassandra.db:type=StorageProxy");
      hints = new ObjectName("org.apache.cassandra.hints:type=HintsService");
    } catch (javax.management.MalformedObjectNameException e) {
      throw new IllegalStateException(e);
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("version", call(ex, timeoutSeconds, "ReleaseVersion", () -> mbs.getAttribute(ss, "ReleaseVersion")));
    out.put("mode", call(ex, timeoutSeconds, "OperationMode", () -> mbs.getAttribute(ss, "OperationMode")));
    out.put("live", call(ex, timeoutSeconds, "LiveNodes", () -> mbs.getAttribute(ss, "LiveNodes")));
    out.put("unreachable", call(ex, timeoutSeconds, "UnreachableNodes",
        () -> mbs.getAttribute(ss, "UnreachableNodes")));
    out.put("joining", call(ex, timeoutSeconds, "JoiningNodes", () -> mbs.getAttribute(ss, "JoiningNodes")));
    Map<String, List<String>> schemas = (Map<String, List<String>>) call(ex, timeoutSeconds, "SchemaVersions",
        () -> mbs.getAttribute(proxy, "SchemaVersions"));
    out.put("schema_versions", schemas == null ? Map.of() : new LinkedHashMap<>(schemas));
    out.put("hints_in_progress", call(ex, timeoutSeconds, "HintsInProgress",
        () -> mbs.getAttribute(proxy, "HintsInProgress")));
    Object pending;
    try {
      pending = call(ex, timeoutSeconds, "PendingHints", () -> mbs.invoke(hints, "getPendingHints", new Object[0],
          new String[0]));
    } catch (Failure f) {   // an older node without the call: the hints it holds are not known
      pending = null;
    }
    List<Map<String, Object>> held = new ArrayList<>();
    if (pending instanceof List) {
      for (Object o : (List<Object>) pending) {
        held.add(new LinkedHashMap<>((Map<String, Object>) o));
      }
    }
    out.put("pending_hints", pending == null ? null : held);
    out.put("compaction_throughput_mib_s", call(ex, timeoutSeconds, "CompactionThroughputMbPerSec",
        () -> mbs.getAttribute(ss, "CompactionThroughputMbPerSec")));
    return out;
  }

  /**
   * {@code nodetool upgradesstables -a -j 1 K T}: every SSTable of the table rewritten, one at a time, throttled by
   * the node's compaction throughput (set first to {@code --throughput}, MiB/s, when given). Waits for the end.
   */
  static Map<String, Object> rewrite(ExecutorService ex, MBeanServerConnection mbs, Args a) throws Failure {
    ObjectName ss;
    try {
      ss = new ObjectName(STORAGE_SERVICE);
    } catch (javax.management.MalformedObjectNameException e) {
      throw new IllegalStateException(e);
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("throughput_before_mib_s", call(ex, a.timeoutSeconds, "CompactionThroughputMbPerSec",
        () -> mbs.getAttribute(ss, "CompactionThroughputMbPerSec")));
    if (a.throughput >= 0) {
      call(ex, a.timeoutSeconds, "CompactionThroughputMbPerSec", () -> {
        mbs.setAttribute(ss, new javax.management.Attribute("CompactionThroughputMbPerSec", a.throughput));
        return null;
      });
    }
    long started = System.nanoTime();
    Object status;
    try {
      status = call(ex, a.timeoutSeconds, "upgradeSSTables", () -> mbs.invoke(ss, "upgradeSSTables",
          new Object[] {a.keyspace, false, Long.MAX_VALUE, 1, new String[] {a.tables.get(0)}},
          new String[] {String.class.getName(), boolean.class.getName(), long.class.getName(), int.class.getName(),
              String[].class.getName()}));
    } finally {   // the node's own throughput again, the rewrite done or not
      Object before = out.get("throughput_before_mib_s");
      if (a.throughput >= 0 && before instanceof Integer) {
        call(ex, a.timeoutSeconds, "CompactionThroughputMbPerSec", () -> {
          mbs.setAttribute(ss, new javax.management.Attribute("CompactionThroughputMbPerSec", before));
          return null;
        });
      }
    }
    out.put("status", status);   // 0: done; 1: aborted; 2: an SSTable could not be rewritten
    out.put("seconds", (System.nanoTime() - started) / 1e9);
    if (!Integer.valueOf(0).equals(status)) {
      throw new Failure(EXIT_OPERATION, "upgradesstables of " + a.keyspace + "." + a.tables.get(0)
          + " ended with status " + status + " (the node's log says why)");
    }
    return out;
  }

  // ---------------------------------------------------------------- sampling during a run

  /**
   * A few node gauges read once a second during PhasedClient's measured phase ({@code internals.jmx.port}):
   * live SSTables, SSTables per read (the mean of the node's recent, decaying histogram), live data on disk,
   * pending compactions. A failed read gives NaN for that second (warned once); it never fails the run.
   */
  static final class Sampler implements PhasedClient.Probe {
    private final JMXConnector connector;
    private final MBeanServerConnection mbs;
    private final String table;
    private boolean warned;

    private Sampler(JMXConnector connector, String keyspace, String table) throws IOException {
      this.connector = connector;
      this.mbs = connector.getMBeanServerConnection();
      this.table = METRICS + ":type=Table,keyspace=" + quoteIfNeeded(keyspace) + ",scope=" + quoteIfNeeded(table)
          + ",name=";
    }

    /** Connected to the node's JMX port, or null (with a warning) when it cannot be reached. */
    static Sampler open(String host, int port, String keyspace, String table) {
      ExecutorService ex = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "jmx-connect");
        t.setDaemon(true);
        return t;
      });
      Args a = new Args();
      a.host = host;
      a.jmxPort = port;
      try {
        return new Sampler(connect(ex, a), keyspace, table);
      } catch (Failure | IOException e) {
        System.err.println("[loadgen] warning: no node internals over the run: " + e.getMessage());
        return null;
      } finally {
        ex.shutdown();
      }
    }

    @Override
    public Map<String, Double> sample() {
      Map<String, Double> m = new LinkedHashMap<>();
      try {
        m.put("SSTables", number(attr(mbs, table + "LiveSSTableCount", "Value"), 1));
        m.put("SSTablesPerRead", number(attr(mbs, table + "SSTablesPerReadHistogram", "Mean"), 1));
        m.put("DiskUsed(MB)", number(attr(mbs, table + "LiveDiskSpaceUsed", "Count"), 1.0 / (1 << 20)));
        m.put("PendingCompactions", number(attr(mbs, METRICS + ":type=Compaction,name=PendingTasks", "Value"), 1));
      } catch (IOException e) {
        if (!warned) {
          warned = true;
          System.err.println("[loadgen] warning: node internals not read: " + CassandraCQLClient.oneLine(e));
        }
        for (String k : new String[] {"SSTables", "SSTablesPerRead", "DiskUsed(MB)", "PendingCompactions"}) {
          m.putIfAbsent(k, Double.NaN);
        }
      }
      return m;
    }

    private static double number(Object v, double scale) {
      return v instanceof Number ? ((Number) v).doubleValue() * scale : Double.NaN;
    }

    void close() {
      try {
        connector.close();
      } catch (IOException ignored) {
        // the run is over anyway
      }
    }
  }

  // ---------------------------------------------------------------- stats

  static Map<String, Object> stats(MBeanServerConnection mbs, String ks, String table) throws IOException {
    Map<String, Object> o = new LinkedHashMap<>();
    o.put("keyspace", ks);
    o.put("table", table);
    String t = METRICS + ":type=Table,keyspace=" + quoteIfNeeded(ks) + ",scope=" + quoteIfNeeded(table) + ",name=";
    o.put("live_sstable_count", attr(mbs, t + "LiveSSTableCount", "Value"));
    o.put("sstables_per_read", histogram(mbs, t + "SSTablesPerReadHistogram"));
    o.put("live_disk_space_used_bytes", attr(mbs, t + "LiveDiskSpaceUsed", "Count"));
    o.put("total_disk_space_used_bytes", attr(mbs, t + "TotalDiskSpaceUsed", "Count"));
    o.put("table_pending_compactions", attr(mbs, t + "PendingCompactions", "Value"));
    o.put("memtable_live_data_size_bytes", attr(mbs, t + "MemtableLiveDataSize", "Value"));
    o.put("memtable_off_heap_size_bytes", attr(mbs, t + "MemtableOffHeapSize", "Value"));
    o.put("memtable_switch_count", attr(mbs, t + "MemtableSwitchCount", "Count"));
    o.put("pending_flushes", attr(mbs, t + "PendingFlushes", "Count"));
    o.put("table_read_latency_us", latency(mbs, t + "ReadLatency"));
    o.put("table_write_latency_us", latency(mbs, t + "WriteLatency"));
    o.put("estimated_partition_count", attr(mbs, t + "EstimatedPartitionCount", "Value"));
    o.put("bloom_filter_false_ratio", attr(mbs, t + "BloomFilterFalseRatio", "Value"));
    o.put("bloom_filter_disk_bytes", attr(mbs, t + "BloomFilterDiskSpaceUsed", "Value"));
    o.put("bloom_filter_off_heap_bytes", attr(mbs, t + "BloomFilterOffHeapMemoryUsed", "Value"));
    o.put("compression_ratio", attr(mbs, t + "CompressionRatio", "Value"));

    String c = METRICS + ":type=Compaction,name=";
    o.put("pending_compactions", attr(mbs, c + "PendingTasks", "Value"));
    o.put("completed_compactions", attr(mbs, c + "CompletedTasks", "Value"));
    o.put("bytes_compacted", attr(mbs, c + "BytesCompacted", "Count"));

    o.put("key_cache_hit_rate", attr(mbs, METRICS + ":type=Cache,scope=KeyCache,name=HitRate", "Value"));
    o.put("row_cache_hit_rate", attr(mbs, METRICS + ":type=Cache,scope=RowCache,name=HitRate", "Value"));

    Map<String, Object> gc = new LinkedHashMap<>();
    long totalCount = 0;
    long totalTime = 0;
    boolean anyGc = false;
    Set<ObjectName> names;
    try {
      names = new TreeSet<>(mbs.queryNames(new ObjectName("java.lang:type=GarbageCollector,name=*"), null));
    } catch (javax.management.MalformedObjectNameException e) {
      throw new IllegalStateException(e);
    }
    for (ObjectName n : names) {
      Object count = attr(mbs, n.toString(), "CollectionCount");
      Object time = attr(mbs, n.toString(), "CollectionTime");
      Map<String, Object> one = new LinkedHashMap<>();
      one.put("count", count);
      one.put("time_ms", time);
      gc.put(n.getKeyProperty("name"), one);
      if (count instanceof Number && ((Number) count).longValue() >= 0) {
        totalCount += ((Number) count).longValue();
        anyGc = true;
      }
      if (time instanceof Number && ((Number) time).longValue() >= 0) {
        totalTime += ((Number) time).longValue();
        anyGc = true;
      }
    }
    o.put("gc", gc);
    o.put("gc_total_time_ms", anyGc ? totalTime : null);
    o.put("gc_total_count", anyGc ? totalCount : null);
    Object heap = attr(mbs, "java.lang:type=Memory", "HeapMemoryUsage");
    Object used = null;
    Object committed = null;
    Object max = null;
    if (heap instanceof CompositeData) {
      CompositeData cd = (CompositeData) heap;
      used = cd.get("used");
      committed = cd.get("committed");
      max = cd.get("max");
    }
    o.put("heap_used_bytes", used);
    o.put("heap_committed_bytes", committed);
    o.put("heap_max_bytes", max);
    return o;
  }

  static String quoteIfNeeded(String v) {
    for (char ch : v.toCharArray()) {
      if (ch == ',' || ch == '=' || ch == ':' || ch == '"' || ch == '*' || ch == '?' || ch == '\n') {
        return ObjectName.quote(v);
      }
    }
    return v;
  }

  /** One attribute, or null when the MBean / attribute does not exist or cannot be read. */
  static Object attr(MBeanServerConnection mbs, String name, String attribute) throws IOException {
    try {
      return mbs.getAttribute(new ObjectName(name), attribute);
    } catch (InstanceNotFoundException e) {
      return null;
    } catch (IOException e) {
      throw e; // connection lost: that is a real failure
    } catch (Exception e) {
      return null;
    }
  }

  static Map<String, Object> histogram(MBeanServerConnection mbs, String name) throws IOException {
    Object mean = attr(mbs, name, "Mean");
    if (mean == null) {
      return null;
    }
    Map<String, Object> h = new LinkedHashMap<>();
    h.put("mean", mean);
    h.put("p50", attr(mbs, name, "50thPercentile"));
    h.put("p95", attr(mbs, name, "95thPercentile"));
    h.put("p99", attr(mbs, name, "99thPercentile"));
    h.put("max", attr(mbs, name, "Max"));
    h.put("count", attr(mbs, name, "Count"));
    return h;
  }

  /** A Cassandra latency timer, converted to microseconds whatever its DurationUnit. */
  static Map<String, Object> latency(MBeanServerConnection mbs, String name) throws IOException {
    Object mean = attr(mbs, name, "Mean");
    if (mean == null) {
      return null;
    }
    Object unit = attr(mbs, name, "DurationUnit");
    double f = 1.0;
    if (unit != null) {
      switch (unit.toString().toLowerCase(Locale.ROOT)) {
        case "nanoseconds":
          f = 1e-3;
          break;
        case "milliseconds":
          f = 1e3;
          break;
        case "seconds":
          f = 1e6;
          break;
        default:
          f = 1.0;
      }
    }
    Map<String, Object> h = new LinkedHashMap<>();
    h.put("mean", scale(mean, f));
    h.put("p50", scale(attr(mbs, name, "50thPercentile"), f));
    h.put("p95", scale(attr(mbs, name, "95thPercentile"), f));
    h.put("p99", scale(attr(mbs, name, "99thPercentile"), f));
    h.put("max", scale(attr(mbs, name, "Max"), f));
    h.put("count", attr(mbs, name, "Count"));
    return h;
  }

  private static Object scale(Object v, double f) {
    if (v instanceof Number) {
      return ((Number) v).doubleValue() * f;
    }
    return null;
  }

  /** Minimal JSON writer for maps, lists, numbers, booleans, strings and null. */
  static final class Json {
    private Json() {
    }

    static String write(Object v) {
      StringBuilder sb = new StringBuilder();
      write(sb, v);
      return sb.toString();
    }

    private static void write(StringBuilder sb, Object v) {
      if (v == null) {
        sb.append("null");
      } else if (v instanceof Map) {
        sb.append('{');
        boolean first = true;
        for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
          if (!first) {
            sb.append(", ");
          }
          first = false;
          string(sb, String.valueOf(e.getKey()));
          sb.append(": ");
          write(sb, e.getValue());
        }
        sb.append('}');
      } else if (v instanceof Iterable) {
        sb.append('[');
        boolean first = true;
        for (Object x : (Iterable<?>) v) {
          if (!first) {
            sb.append(", ");
          }
          first = false;
          write(sb, x);
        }
        sb.append(']');
      } else if (v instanceof Double || v instanceof Float) {
        double d = ((Number) v).doubleValue();
        sb.append(Double.isNaN(d) || Double.isInfinite(d) ? "null" : String.valueOf(d));
      } else if (v instanceof Number || v instanceof Boolean) {
        sb.append(v);
      } else {
        string(sb, v.toString());
      }
    }

    private static void string(StringBuilder sb, String s) {
      sb.append('"');
      for (int i = 0; i < s.length(); i++) {
        char ch = s.charAt(i);
        switch (ch) {
          case '"':
            sb.append("\\\"");
            break;
          case '\\':
            sb.append("\\\\");
            break;
          case '\n':
            sb.append("\\n");
            break;
          case '\r':
            sb.append("\\r");
            break;
          case '\t':
            sb.append("\\t");
            break;
          default:
            if (ch < 0x20) {
              sb.append(String.format(Locale.ROOT, "\\u%04x", (int) ch));
            } else {
              sb.append(ch);
            }
        }
      }
      sb.append('"');
    }
  }
}
