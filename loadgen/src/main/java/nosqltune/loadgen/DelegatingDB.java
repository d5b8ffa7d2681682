package nosqltune.loadgen;

import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.atomic.AtomicLong;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * Forwards every operation to a binding that has already been initialized.
 *
 * <p>{@link #init()} does nothing, so {@code site.ycsb.DBWrapper.init()} (which calls
 * {@code init()} on what it wraps, then reads its error-reporting properties) can be called
 * without initializing the binding a second time. {@link #cleanup()} forwards only when
 * {@code forwardCleanup} is set, so that the binding is cleaned up exactly once.
 *
 * <p>When {@code failures} is given, every non-OK status is counted there (used for the
 * warm-up phase, whose operations are not recorded in YCSB's measurements).
 */
final class DelegatingDB extends DB {
  private final DB delegate;
  private final boolean forwardCleanup;
  private final AtomicLong failures;
  private final org.HdrHistogram.Recorder latencies;

  DelegatingDB(DB delegate, boolean forwardCleanup, AtomicLong failures) {
    this(delegate, forwardCleanup, failures, null);
  }

  /** {@code latencies}: every operation's latency in microseconds, for per-second percentiles (may be null). */
  DelegatingDB(DB delegate, boolean forwardCleanup, AtomicLong failures, org.HdrHistogram.Recorder latencies) {
    this.delegate = delegate;
    this.forwardCleanup = forwardCleanup;
    this.failures = failures;
    this.latencies = latencies;
  }

  private Status timed(long startNs, Status s) {
    if (latencies != null) {
      latencies.recordValue(Math.max(0, (System.nanoTime() - startNs) / 1000));
    }
    return count(s);
  }

  @Override
  public void setProperties(Properties p) {
    delegate.setProperties(p);
  }

  @Override
  public Properties getProperties() {
    return delegate.getProperties();
  }

  @Override
  public void init() {
    // already initialized
  }

  @Override
  public void cleanup() throws DBException {
    if (forwardCleanup) {
      delegate.cleanup();
    }
  }

  private Status count(Status s) {
    if (failures != null && (s == null || !s.isOk())) {
      failures.incrementAndGet();
    }
    return s;
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    long st = System.nanoTime();
    return timed(st, delegate.read(table, key, fields, result));
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    long st = System.nanoTime();
    return timed(st, delegate.scan(table, startkey, recordcount, fields, result));
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    long st = System.nanoTime();
    return timed(st, delegate.update(table, key, values));
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    long st = System.nanoTime();
    return timed(st, delegate.insert(table, key, values));
  }

  @Override
  public Status delete(String table, String key) {
    long st = System.nanoTime();
    return timed(st, delegate.delete(table, key));
  }
}
