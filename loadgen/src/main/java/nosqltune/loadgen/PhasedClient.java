package nosqltune.loadgen;

import java.io.FileInputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.htrace.core.HTraceConfiguration;
import org.apache.htrace.core.Tracer;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.DBWrapper;
import site.ycsb.Utils;
import site.ycsb.Workload;
import site.ycsb.measurements.Measurements;
import site.ycsb.measurements.exporter.MeasurementsExporter;
import site.ycsb.measurements.exporter.TextMeasurementsExporter;

/**
 * YCSB client with an in-JVM warm-up phase before the measured phase.
 *
 * <p>Command line as YCSB's {@code site.ycsb.Client}: {@code -P file} (repeatable, later files
 * win), {@code -p key=value} (repeatable, overrides files), {@code -load} or {@code -t},
 * {@code -threads N}, {@code -target N} (total ops/s), {@code -db class}, {@code -s} (status on
 * stderr every {@code status.interval} s), {@code -l label}.
 *
 * <p>In {@code -t} mode a warm-up phase runs first on the same threads, DB instances, session
 * and workload state, through the same wrappers as the measured phase (so that the client's
 * measuring code is compiled before the measured phase starts), and the measurements are reset
 * after it: nothing it recorded, nor what a workload records itself (READ-MODIFY-WRITE), reaches
 * the results. It is controlled by {@code warmup.operations}
 * (default 0), {@code warmup.maxseconds} (default 60, 0 = no time cap), {@code warmup.steady.window}
 * (seconds, default 0 = off), {@code warmup.steady.cv} (default 0.05) and {@code warmup.steady.drift}
 * (default off), and {@code warmup.minseconds} (default 0). The warm-up runs if
 * {@code warmup.operations > 0} or the steady window is on; it ends when at least
 * {@code warmup.minseconds} have passed, at least {@code warmup.operations} operations are done and (if
 * the window is on) the coefficient
 * of variation of the last {@code window} one-second throughput samples is at most the cv and, if the
 * drift is given, the mean of those samples is within the drift of the mean of the {@code window}
 * samples before them (a slow climb, such as the JIT's after a cold boot, has a small cv but a drift),
 * or at {@code warmup.maxseconds}, whichever comes first.
 *
 * <p>Only results go to stdout (anything else printing to {@code System.out} is redirected to
 * stderr): {@code [WARMUP]} lines, then YCSB's own text export of the measured phase, then
 * {@code [INTERVALS], Throughput(ops/sec), s1 s2 ...}: the throughput of each full second of
 * the measured phase (each sample is the operations completed in that tick divided by the tick's
 * actual length); the last, partial second is left out. Last, {@code [COST]} lines: the CPU and GC time
 * the datastore's processes ({@code cost.nodes}, see {@link NodeCost}) and this client spent in the measured
 * phase, and its operation count.
 */
public final class PhasedClient {

  static final String DEFAULT_DB = "nosqltune.loadgen.CassandraCQLClient";
  static final String DEFAULT_WORKLOAD = "site.ycsb.workloads.CoreWorkload";

  private PhasedClient() {
  }

  /** Raised for a bad command line: usage and exit code 2. */
  static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String m) {
      super(m);
    }
  }

  static void usage(PrintStream err) {
    err.println("Usage: java -cp ... nosqltune.loadgen.PhasedClient [options]");
    err.println("  -P file        load properties from a file (repeatable; later files win)");
    err.println("  -p name=value  set a property (repeatable; overrides files)");
    err.println("  -load | -t     run the load phase, or the transaction phase (default -t)");
    err.println("  -threads N     client threads (property threadcount, default 1)");
    err.println("  -target N      total target ops/s (property target, default unlimited)");
    err.println("  -db class      DB binding (property db, default " + DEFAULT_DB + ")");
    err.println("  -s             print status on stderr every status.interval seconds (default 10)");
    err.println("  -l label       label for the status lines");
    err.println("Warm-up (-t only): warmup.operations (0), warmup.maxseconds (60),");
    err.println("  warmup.steady.window (seconds, 0 = off), warmup.steady.cv (0.05),");
    err.println("  warmup.steady.drift (off: the last window's mean within it of the window before),");
    err.println("  warmup.minseconds (0)");
  }

  static Properties parseArguments(String[] args) throws UsageException {
    Properties fileProps = new Properties();
    Properties cmdProps = new Properties();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      switch (a) {
        case "-P": {
          String f = value(args, ++i, a);
          try (InputStream in = new FileInputStream(f)) {
            fileProps.load(in);
          } catch (IOException e) {
            throw new UsageException("cannot read property file " + f + ": " + e.getMessage());
          }
          break;
        }
        case "-p": {
          String kv = value(args, ++i, a);
          int eq = kv.indexOf('=');
          if (eq <= 0) {
            throw new UsageException("-p expects name=value, got: " + kv);
          }
          cmdProps.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
          break;
        }
        case "-load":
          cmdProps.setProperty("dotransactions", "false");
          break;
        case "-t":
          cmdProps.setProperty("dotransactions", "true");
          break;
        case "-threads":
          cmdProps.setProperty("threadcount", value(args, ++i, a));
          break;
        case "-target":
          cmdProps.setProperty("target", value(args, ++i, a));
          break;
        case "-db":
          cmdProps.setProperty("db", value(args, ++i, a));
          break;
        case "-s":
          cmdProps.setProperty("status", "true");
          break;
        case "-l":
          cmdProps.setProperty("label", value(args, ++i, a));
          break;
        default:
          throw new UsageException("unknown argument: " + a);
      }
    }
    Properties props = new Properties();
    props.putAll(fileProps);
    props.putAll(cmdProps);
    if (props.getProperty("workload") == null) {
      props.setProperty("workload", DEFAULT_WORKLOAD);
    }
    if (props.getProperty("db") == null) {
      props.setProperty("db", DEFAULT_DB);
    }
    if (props.getProperty("hdrhistogram.percentiles") == null) {
      props.setProperty("hdrhistogram.percentiles", "50,95,99");
    }
    return props;
  }

  private static String value(String[] args, int i, String opt) throws UsageException {
    if (i >= args.length) {
      throw new UsageException("missing value for " + opt);
    }
    return args[i];
  }

  static long longProp(Properties p, String name, long dflt) throws UsageException {
    String v = p.getProperty(name);
    if (v == null || v.trim().isEmpty()) {
      return dflt;
    }
    try {
      return Long.parseLong(v.trim());
    } catch (NumberFormatException e) {
      throw new UsageException("property " + name + " must be an integer, got: " + v);
    }
  }

  static double doubleProp(Properties p, String name, double dflt) throws UsageException {
    String v = p.getProperty(name);
    if (v == null || v.trim().isEmpty()) {
      return dflt;
    }
    try {
      return Double.parseDouble(v.trim());
    } catch (NumberFormatException e) {
      throw new UsageException("property " + name + " must be a number, got: " + v);
    }
  }

  /** Coefficient of variation (population standard deviation / mean) of the last n samples. */
  static double cvOfLast(List<Double> samples, int n) {
    if (n <= 0 || samples.size() < n) {
      return Double.NaN;
    }
    List<Double> w = samples.subList(samples.size() - n, samples.size());
    double sum = 0;
    for (double x : w) {
      sum += x;
    }
    double mean = sum / n;
    if (mean <= 0) {
      return Double.POSITIVE_INFINITY;
    }
    double ss = 0;
    for (double x : w) {
      ss += (x - mean) * (x - mean);
    }
    return Math.sqrt(ss / n) / mean;
  }

  /**
   * How far the mean of the last n samples is from the mean of the n before them, as a share of the
   * earlier mean (positive while climbing); NaN with fewer than 2n samples.
   */
  static double driftOfLast(List<Double> samples, int n) {
    if (n <= 0 || samples.size() < 2 * n) {
      return Double.NaN;
    }
    double last = 0;
    double before = 0;
    for (int i = 0; i < n; i++) {
      last += samples.get(samples.size() - 1 - i);
      before += samples.get(samples.size() - 1 - n - i);
    }
    if (before <= 0) {
      return Double.POSITIVE_INFINITY;
    }
    return last / before - 1;
  }

  /** Splits total operations over threads like YCSB: the first (total % threads) get one more. */
  static long share(long total, int threads, int id) {
    if (total <= 0) {
      return 0; // 0 = unlimited
    }
    long s = total / threads;
    if (id < total % threads) {
      s++;
    }
    return s;
  }

  /** Something sampled once a second beside the throughput: name -> value (NaN when unavailable). */
  interface Probe {
    Map<String, Double> sample();
  }

  /** Per-second latency percentile of the measured operations, from the recorder DelegatingDB fills. */
  static Probe latencyProbe(org.HdrHistogram.Recorder latencies) {
    return () -> {
      org.HdrHistogram.Histogram h = latencies.getIntervalHistogram();
      Map<String, Double> m = new LinkedHashMap<>();
      m.put("P99(ms)", h.getTotalCount() > 0 ? h.getValueAtPercentile(99.0) / 1000.0 : Double.NaN);
      return m;
    };
  }

  /** Samples an operation counter (and any probes) every second; optionally prints status lines to stderr. */
  static final class Monitor extends Thread {
    private final String phase;
    private final String label;
    private final AtomicLong counter;
    private final long startNs;
    private final int statusInterval;
    private final boolean status;
    private final List<Double> samples = Collections.synchronizedList(new ArrayList<>());
    final List<Probe> probes = new ArrayList<>();
    private final Map<String, List<Double>> series = new LinkedHashMap<>();
    private volatile boolean stopped;

    Monitor(String phase, String label, AtomicLong counter, long startNs, boolean status,
            int statusInterval) {
      super("monitor-" + phase);
      setDaemon(true);
      this.phase = phase;
      this.label = label;
      this.counter = counter;
      this.startNs = startNs;
      this.status = status;
      this.statusInterval = Math.max(1, statusInterval);
      this.lastOps = counter.get();
      this.lastNs = startNs;
    }

    private long lastOps;
    private long lastNs;

    @Override
    public void run() {
      long statusOps = lastOps;
      long statusNs = startNs;
      for (long tick = 1; !stopped; tick++) {
        long deadline = startNs + tick * 1_000_000_000L;
        long now;
        while ((now = System.nanoTime()) < deadline && !stopped) {
          LockSupport.parkNanos(deadline - now);
        }
        if (stopped) {
          break; // the partial last interval: see finish()
        }
        long ops = sample(now);
        if (status && tick % statusInterval == 0) {
          double cur = (ops - statusOps) * 1e9 / (now - statusNs);
          statusOps = ops;
          statusNs = now;
          System.err.printf(Locale.ROOT, "%s[status] phase=%s elapsed=%ds ops=%d current=%.1f ops/s%n",
              label.isEmpty() ? "" : label + " ", phase, tick, ops, cur);
        }
      }
    }

    /** One sample of the interval since the last one, ending at {@code now}: the throughput and every probe. */
    private long sample(long now) {
      long ops = counter.get();
      samples.add((ops - lastOps) * 1e9 / Math.max(1L, now - lastNs));
      lastOps = ops;
      lastNs = now;
      for (Probe probe : probes) {
        Map<String, Double> values = probe.sample();
        synchronized (series) {
          for (Map.Entry<String, Double> e : values.entrySet()) {
            List<Double> list = series.computeIfAbsent(e.getKey(), k -> new ArrayList<>());
            while (list.size() < samples.size() - 1) {
              list.add(Double.NaN); // keep the series aligned with the throughput samples
            }
            list.add(e.getValue());
          }
        }
      }
      return ops;
    }

    Map<String, List<Double>> series() {
      synchronized (series) {
        Map<String, List<Double>> copy = new LinkedHashMap<>();
        series.forEach((k, v) -> copy.put(k, new ArrayList<>(v)));
        return copy;
      }
    }

    List<Double> samples() {
      synchronized (samples) {
        return new ArrayList<>(samples);
      }
    }

    double cv(int window) {
      return cvOfLast(samples(), window);
    }

    List<Double> finish() {
      stopped = true;
      LockSupport.unpark(this);
      try {
        join(5000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      // A phase that ended within its first second has no full-second sample: it gets one, over its whole
      // length, so every measured phase has a series of at least one sample whatever the machine's speed.
      // Longer phases leave their partial last second out (fewer threads are busy in it).
      if (!isAlive() && samples.isEmpty()) {
        sample(System.nanoTime());
      }
      return samples();
    }
  }

  /** One client thread, alive through both phases. */
  static final class Worker implements Runnable {
    final int id;
    final int threadCount;
    final DB raw;
    final Workload workload;
    final Properties props;
    final boolean doTransactions;
    final long measureOps;
    final double targetPerThread;
    final Run run;
    DB warmDb;
    volatile DB measuredDb;
    Object state;
    volatile Throwable failure;
    volatile boolean measuredCompleted;

    Worker(int id, int threadCount, DB raw, Workload workload, Properties props, boolean doTransactions,
           long measureOps, double targetPerThread, Run run) {
      this.id = id;
      this.threadCount = threadCount;
      this.raw = raw;
      this.workload = workload;
      this.props = props;
      this.doTransactions = doTransactions;
      this.measureOps = measureOps;
      this.targetPerThread = targetPerThread;
      this.run = run;
    }

    @Override
    public void run() {
      try {
        try {
          state = workload.initThread(props, id, threadCount);
        } finally {
          run.initDone.countDown();
        }
        run.warmGo.await();
        if (run.warmupEnabled && !run.abort) {
          loop(warmDb, run.warmOps, 0, false);
        }
      } catch (Throwable t) {
        fail(t);
      } finally {
        run.warmDone.countDown();
      }
      try {
        run.measureGo.await();
        if (!run.abort && failure == null) {
          loop(measuredDb, run.measuredOps, measureOps, true);
          measuredCompleted = true;
        }
      } catch (Throwable t) {
        fail(t);
      } finally {
        Measurements.getMeasurements().setIntendedStartTimeNs(0);
        run.measureDone.countDown();
      }
    }

    private void fail(Throwable t) {
      if (failure == null) {
        failure = t;
      }
      run.abort = true;
      System.err.println("[loadgen] thread " + id + " failed: " + CassandraCQLClient.oneLine(t));
      t.printStackTrace(System.err);
    }

    private boolean stopRequested(boolean measured) {
      if (run.abort) {
        return true;
      }
      return measured ? (run.measureStop || workload.isStopRequested()) : run.warmStop;
    }

    private void loop(DB db, AtomicLong counter, long limit, boolean measured) {
      long tickNs = targetPerThread > 0 ? (long) (1e9 / targetPerThread) : 0;
      Measurements m = Measurements.getMeasurements();
      long start = System.nanoTime();
      if (tickNs >= 1_000_000L) {
        // spread the threads' first operations, as YCSB does for targets <= 1 op/ms per thread
        sleepUntil(start + ThreadLocalRandom.current().nextLong(tickNs));
        start = System.nanoTime();
      }
      long done = 0;
      while ((limit == 0 || done < limit) && !stopRequested(measured)) {
        boolean ok = doTransactions ? workload.doTransaction(db, state) : workload.doInsert(db, state);
        if (!ok) {
          // YCSB's ClientThread stops the thread here too (e.g. an insert that failed).
          System.err.println("[loadgen] thread " + id + ": workload reported a failed "
              + (doTransactions ? "transaction" : "insert") + "; this thread stops "
              + (measured ? "(measured phase)" : "(warm-up)"));
          break;
        }
        done++;
        counter.incrementAndGet();
        if (tickNs > 0) {
          long deadline = start + done * tickNs;
          sleepUntil(deadline);
          if (measured) {
            m.setIntendedStartTimeNs(deadline);
          }
        }
      }
    }

    private static void sleepUntil(long deadline) {
      long now;
      while ((now = System.nanoTime()) < deadline) {
        LockSupport.parkNanos(deadline - now);
      }
    }
  }

  /** State shared by the coordinator and the workers. */
  static final class Run {
    final CountDownLatch initDone;
    final CountDownLatch warmGo = new CountDownLatch(1);
    final CountDownLatch warmDone;
    final CountDownLatch measureGo = new CountDownLatch(1);
    final CountDownLatch measureDone;
    final AtomicLong warmOps = new AtomicLong();
    final AtomicLong warmErrors = new AtomicLong();
    final AtomicLong measuredOps = new AtomicLong();
    volatile boolean warmupEnabled;
    volatile boolean warmStop;
    volatile boolean measureStop;
    volatile boolean abort;

    Run(int threads) {
      initDone = new CountDownLatch(threads);
      warmDone = new CountDownLatch(threads);
      measureDone = new CountDownLatch(threads);
    }
  }

  /** An OutputStream that flushes instead of closing (the text exporter closes its stream). */
  static OutputStream nonClosing(OutputStream out) {
    return new FilterOutputStream(out) {
      @Override
      public void write(byte[] b, int off, int len) throws IOException {
        out.write(b, off, len);
      }

      @Override
      public void close() throws IOException {
        out.flush();
      }
    };
  }

  /** Drops everything recorded so far in YCSB's Measurements singleton. */
  static void resetMeasurements() {
    Measurements m = Measurements.getMeasurements();
    for (String name : new String[] {"opToMesurementMap", "opToIntendedMesurementMap"}) {
      try {
        Field f = Measurements.class.getDeclaredField(name);
        f.setAccessible(true);
        ((Map<?, ?>) f.get(m)).clear();
      } catch (ReflectiveOperationException | RuntimeException e) {
        System.err.println("[loadgen] warning: could not reset measurements (" + name + "): " + e);
      }
    }
  }

  static String formatDouble(double d) {
    if (Double.isNaN(d) || Double.isInfinite(d)) {
      return String.valueOf(d);
    }
    return String.format(Locale.ROOT, "%.1f", d);
  }

  public static void main(String[] args) {
    final PrintStream results = System.out;
    // Only results go to stdout: whatever else writes to System.out ends up on stderr.
    System.setOut(System.err);
    int code;
    try {
      code = run(args, results);
    } catch (UsageException e) {
      System.err.println("error: " + e.getMessage());
      usage(System.err);
      code = 2;
    } catch (Throwable t) {
      System.err.println("error: " + CassandraCQLClient.oneLine(t));
      code = 1;
    }
    results.flush();
    System.err.flush();
    System.exit(code);
  }

  static int run(String[] args, PrintStream results) throws Exception {
    for (String a : args) {
      if (a.equals("-h") || a.equals("-help") || a.equals("--help")) {
        usage(System.err);
        return 0;
      }
    }
    Properties props = parseArguments(args);
    final boolean doTransactions = Boolean.parseBoolean(props.getProperty("dotransactions", "true"));
    final boolean status = Boolean.parseBoolean(props.getProperty("status", "false"));
    final String label = props.getProperty("label", "");
    final int statusInterval = (int) longProp(props, "status.interval", 10);
    final long maxExecutionTime = longProp(props, "maxexecutiontime", 0);
    final int internalsPort = (int) longProp(props, "internals.jmx.port", 0);
    int threadCount = (int) longProp(props, "threadcount", 1);
    if (threadCount <= 0) {
      throw new UsageException("threadcount must be positive");
    }
    final double target = doubleProp(props, "target", 0);
    final String dbName = props.getProperty("db");

    long opCount;
    if (doTransactions) {
      opCount = longProp(props, "operationcount", 0);
    } else if (props.containsKey("insertcount")) {
      opCount = longProp(props, "insertcount", 0);
    } else {
      opCount = longProp(props, "recordcount", 0);
    }
    if (opCount > 0 && threadCount > opCount) {
      System.err.println("[loadgen] warning: threadcount " + threadCount + " > operation count "
          + opCount + "; using " + opCount + " threads");
      threadCount = (int) opCount;
    }
    if (opCount <= 0 && maxExecutionTime <= 0) {
      System.err.println("[loadgen] warning: no operation count and no maxexecutiontime: runs until killed");
    }

    final long warmupMinOps = doTransactions ? longProp(props, "warmup.operations", 0) : 0;
    final double warmupMaxSeconds = doubleProp(props, "warmup.maxseconds", 60);
    final int steadyWindow = doTransactions ? (int) longProp(props, "warmup.steady.window", 0) : 0;
    final double steadyCv = doubleProp(props, "warmup.steady.cv", 0.05);
    final double steadyDrift = doubleProp(props, "warmup.steady.drift", Double.NaN);
    final double warmupMinSeconds = doubleProp(props, "warmup.minseconds", 0);
    final boolean warmupEnabled = doTransactions && (warmupMinOps > 0 || steadyWindow > 0);

    // Measurements must be configured before the workload is built (CoreWorkload grabs it).
    Measurements.setProperties(props);

    ClassLoader cl = PhasedClient.class.getClassLoader();
    Workload workload;
    try {
      workload = (Workload) cl.loadClass(props.getProperty("workload")).getDeclaredConstructor().newInstance();
      workload.init(props);
    } catch (Exception e) {
      System.err.println("error: workload initialization failed: " + CassandraCQLClient.oneLine(e));
      return 1;
    }
    Tracer tracer = new Tracer.Builder("YCSB " + workload.getClass().getSimpleName())
        .conf(HTraceConfiguration.fromMap(Collections.<String, String>emptyMap()))
        .build();

    // One binding instance per thread, initialized once, here (fails fast if the node is down).
    List<DB> dbs = new ArrayList<>();
    try {
      for (int i = 0; i < threadCount; i++) {
        DB db = (DB) cl.loadClass(dbName).getDeclaredConstructor().newInstance();
        Properties copy = new Properties();
        copy.putAll(props);
        db.setProperties(copy);
        db.init();
        dbs.add(db);
      }
    } catch (DBException e) {
      System.err.println("error: DB initialization failed: " + CassandraCQLClient.oneLine(e));
      cleanupQuietly(dbs);
      return 1;
    } catch (ReflectiveOperationException | ClassCastException e) {
      System.err.println("error: cannot instantiate DB class " + dbName + ": " + CassandraCQLClient.oneLine(e));
      cleanupQuietly(dbs);
      return 1;
    }

    final Run run = new Run(threadCount);
    run.warmupEnabled = warmupEnabled;
    final double targetPerThread = target > 0 ? target / threadCount : 0;
    List<Worker> workers = new ArrayList<>();
    List<Thread> threads = new ArrayList<>();
    // The warm-up's operations go through the measured phase's wrappers (YCSB's DBWrapper, a per-second latency
    // recorder) into measurements dropped when it ends: the client's measuring code is compiled by the time the
    // measured phase starts, which then does not begin on the client's cold code (a tiered JVM interprets it).
    org.HdrHistogram.Recorder warmLatencies = new org.HdrHistogram.Recorder(3);
    for (int i = 0; i < threadCount; i++) {
      Worker w = new Worker(i, threadCount, dbs.get(i), workload, props, doTransactions,
          share(opCount, threadCount, i), targetPerThread, run);
      // not init(): it would only read the error-latency properties (for measurements that are dropped) and print
      // them, a second line per thread beside the measured wrapper's
      DBWrapper warm = new DBWrapper(new DelegatingDB(dbs.get(i), false, run.warmErrors, warmLatencies), tracer);
      w.warmDb = warm;
      workers.add(w);
      Thread t = new Thread(w, "client-" + i);
      t.setDaemon(true);
      threads.add(t);
      t.start();
    }
    run.initDone.await();
    if (run.abort) {
      return abortRun(run, workers, dbs);
    }

    // ---- warm-up ----
    long warmStartNs = System.nanoTime();
    long warmEndNs = warmStartNs;
    boolean steady = false;
    double lastCv = Double.NaN;
    double lastDrift = Double.NaN;
    if (warmupEnabled) {
      System.err.println("[loadgen] warm-up: min operations " + warmupMinOps + ", max "
          + warmupMaxSeconds + " s, steady window " + steadyWindow + " s, cv <= " + steadyCv
          + (Double.isNaN(steadyDrift) ? "" : ", drift <= " + steadyDrift)
          + (warmupMinSeconds > 0 ? ", at least " + warmupMinSeconds + " s" : ""));
      Monitor mon = new Monitor("warmup", label, run.warmOps, warmStartNs, status, statusInterval);
      mon.start();
      run.warmGo.countDown();
      while (true) {
        long ops = run.warmOps.get();
        double elapsed = (System.nanoTime() - warmStartNs) / 1e9;
        boolean opsReached = ops >= warmupMinOps && elapsed >= warmupMinSeconds;
        if (steadyWindow > 0) {
          lastCv = mon.cv(steadyWindow);
          boolean level = true;
          if (!Double.isNaN(steadyDrift)) {
            lastDrift = driftOfLast(mon.samples(), steadyWindow);
            level = Math.abs(lastDrift) <= steadyDrift;
          }
          if (opsReached && lastCv <= steadyCv && level) {
            steady = true;
            break;
          }
        } else if (opsReached) {
          break;
        }
        if (warmupMaxSeconds > 0 && elapsed >= warmupMaxSeconds) {
          break;
        }
        if (run.abort || run.warmDone.getCount() == 0) {
          break;
        }
        Thread.sleep(10);
      }
      run.warmStop = true;
      run.warmDone.await();
      warmEndNs = System.nanoTime();
      mon.finish();
      if (run.abort) {
        return abortRun(run, workers, dbs);
      }
      System.err.printf(Locale.ROOT, "[loadgen] warm-up done: %d ops in %.1f s, steady=%s, errors=%d%n",
          run.warmOps.get(), (warmEndNs - warmStartNs) / 1e9, steady, run.warmErrors.get());
    } else {
      run.warmGo.countDown();
      run.warmDone.await();
    }

    // ---- measured phase ----
    // Drop anything recorded so far, e.g. during the warm-up: READ-MODIFY-WRITE and VERIFY,
    // which CoreWorkload measures itself, outside DBWrapper.
    resetMeasurements();
    List<DBWrapper> wrappers = new ArrayList<>();
    org.HdrHistogram.Recorder latencies = new org.HdrHistogram.Recorder(3);
    for (Worker w : workers) {
      DBWrapper wrapper = new DBWrapper(new DelegatingDB(w.raw, true, null, latencies), tracer);
      wrapper.init(); // reads reportlatencyforeacherror / latencytrackederrors; no second binding init
      wrappers.add(wrapper);
      w.measuredDb = wrapper;
    }
    Thread terminator = null;
    if (maxExecutionTime > 0) {
      terminator = new Thread(() -> {
        try {
          Thread.sleep(TimeUnit.SECONDS.toMillis(maxExecutionTime));
          System.err.println("[loadgen] maxexecutiontime reached: stopping");
          run.measureStop = true;
          workload.requestStop();
        } catch (InterruptedException ignored) {
          // run ended first
        }
      }, "terminator");
      terminator.setDaemon(true);
    }
    System.err.println("[loadgen] " + (doTransactions ? "transaction" : "load") + " phase: "
        + (opCount > 0 ? opCount + " operations" : "unlimited operations") + ", " + threadCount + " threads"
        + (target > 0 ? ", target " + target + " ops/s" : ""));
    // The node's JMX connection and the cost probes are opened before the per-second series starts (a JMX connect
    // takes a good part of a second in a fresh JVM): the series' first second holds operations from its start,
    // as RunTime does, not the time the probes took to open.
    NodeInternals.Sampler node = internalsPort > 0
        ? NodeInternals.Sampler.open("127.0.0.1", internalsPort, props.getProperty("internals.keyspace", "ycsb"),
            props.getProperty("internals.table", "usertable"))
        : null;
    NodeCost cost = NodeCost.open(props);
    long measureStartNs = System.nanoTime();
    Monitor mon = new Monitor(doTransactions ? "run" : "load", label, run.measuredOps, measureStartNs,
        status, statusInterval);
    mon.probes.add(latencyProbe(latencies));
    if (node != null) {
      mon.probes.add(node);
    }
    cost.markStart();
    mon.start();
    long st = System.currentTimeMillis();
    if (terminator != null) {
      terminator.start();
    }
    run.measureGo.countDown();
    run.measureDone.await();
    long en = System.currentTimeMillis();
    cost.markEnd();
    cost.close();
    List<Double> samples = mon.finish();
    Map<String, List<Double>> series = mon.series();
    if (node != null) {
      node.close();
    }
    if (terminator != null) {
      terminator.interrupt();
    }
    if (run.abort) {
      return abortRun(run, workers, dbs);
    }
    long opsDone = run.measuredOps.get();

    // Cleanup through the wrappers, as YCSB's client threads do (records [CLEANUP]); the
    // binding's cleanup runs exactly once. Not part of RunTime.
    for (DBWrapper w : wrappers) {
      try {
        w.cleanup();
      } catch (DBException | RuntimeException e) {
        System.err.println("[loadgen] warning: DB cleanup failed: " + CassandraCQLClient.oneLine(e));
      }
    }
    try {
      workload.cleanup();
    } catch (Exception e) {
      System.err.println("[loadgen] warning: workload cleanup failed: " + CassandraCQLClient.oneLine(e));
    }

    long runtime = en - st;
    long warmMs = warmupEnabled ? TimeUnit.NANOSECONDS.toMillis(warmEndNs - warmStartNs) : 0;
    long warmOps = run.warmOps.get();
    // Our own lines, in the exporter's "[SECTION], metric, value" shape, before YCSB's block.
    results.println("[WARMUP], Operations, " + warmOps);
    results.println("[WARMUP], RunTime(ms), " + warmMs);
    results.println("[WARMUP], Throughput(ops/sec), " + (warmMs > 0 ? 1000.0 * warmOps / warmMs : 0.0));
    if (steadyWindow > 0) {
      results.println("[WARMUP], WindowCV, " + lastCv);
      if (!Double.isNaN(steadyDrift)) {
        results.println("[WARMUP], WindowDrift, " + lastDrift);
      }
    }
    results.println("[WARMUP], Steady, " + steady);
    results.println("[WARMUP], Errors, " + run.warmErrors.get());
    results.flush();
    MeasurementsExporter exporter = new TextMeasurementsExporter(nonClosing(results));
    try {
      writeYcsbBlock(exporter, opsDone, runtime);
    } finally {
      exporter.close();
    }
    cost.print(results, opsDone);
    StringBuilder sb = new StringBuilder("[INTERVALS], Throughput(ops/sec), ");
    for (int i = 0; i < samples.size(); i++) {
      if (i > 0) {
        sb.append(' ');
      }
      sb.append(formatDouble(samples.get(i)));
    }
    results.println(sb.toString().trim());
    for (Map.Entry<String, List<Double>> e : series.entrySet()) {
      StringBuilder line = new StringBuilder("[INTERVALS], " + e.getKey() + ", ");
      for (int i = 0; i < e.getValue().size(); i++) {
        double v = e.getValue().get(i);
        line.append(i > 0 ? " " : "").append(Double.isNaN(v) ? "NaN" : String.format(Locale.ROOT, "%.3f", v));
      }
      results.println(line.toString().trim());
    }
    results.flush();
    System.err.printf(Locale.ROOT, "[loadgen] done: %d ops in %d ms (%.1f ops/s)%n",
        opsDone, runtime, runtime > 0 ? 1000.0 * opsDone / runtime : 0.0);
    return 0;
  }

  /** The block YCSB's Client.exportMeasurements writes (0.17.0), minus the optional JVM stats. */
  private static void writeYcsbBlock(MeasurementsExporter exporter, long opsDone, long runtime)
      throws IOException {
    exporter.write("OVERALL", "RunTime(ms)", runtime);
    double throughput = 1000.0 * opsDone / runtime;
    exporter.write("OVERALL", "Throughput(ops/sec)", throughput);
    Map<String, Long[]> gcs = Utils.getGCStatst();
    long totalGcCount = 0;
    long totalGcTime = 0;
    for (Map.Entry<String, Long[]> e : gcs.entrySet()) {
      exporter.write("TOTAL_GCS_" + e.getKey(), "Count", e.getValue()[0]);
      exporter.write("TOTAL_GC_TIME_" + e.getKey(), "Time(ms)", e.getValue()[1]);
      exporter.write("TOTAL_GC_TIME_%_" + e.getKey(), "Time(%)", ((double) e.getValue()[1] / runtime) * 100.0);
      totalGcCount += e.getValue()[0];
      totalGcTime += e.getValue()[1];
    }
    exporter.write("TOTAL_GCs", "Count", totalGcCount);
    exporter.write("TOTAL_GC_TIME", "Time(ms)", totalGcTime);
    exporter.write("TOTAL_GC_TIME_%", "Time(%)", ((double) totalGcTime / runtime) * 100.0);
    Measurements.getMeasurements().exportMeasurements(exporter);
  }

  private static int abortRun(Run run, List<Worker> workers, List<DB> dbs) {
    run.abort = true;
    run.warmStop = true;
    run.measureStop = true;
    run.warmGo.countDown();
    run.measureGo.countDown();
    String msg = "a client thread failed";
    for (Worker w : workers) {
      if (w.failure != null) {
        msg = "client thread " + w.id + " failed: " + CassandraCQLClient.oneLine(w.failure);
        break;
      }
    }
    System.err.println("error: " + msg);
    cleanupQuietly(dbs);
    return 1;
  }

  private static void cleanupQuietly(List<DB> dbs) {
    for (DB db : dbs) {
      try {
        db.cleanup();
      } catch (Exception | LinkageError e) {
        // exiting anyway
      }
    }
  }
}
