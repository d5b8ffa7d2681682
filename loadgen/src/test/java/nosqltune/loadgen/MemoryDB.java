package nosqltune.loadgen;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * In-memory binding for tests; counts init/cleanup calls to catch double initialization, and the reads not called
 * through YCSB's DBWrapper (the measured phase's wrapper, which the warm-up runs through too).
 */
public class MemoryDB extends DB {
  static final Map<String, Map<String, String>> DATA = new ConcurrentHashMap<>();
  static final AtomicInteger INITS = new AtomicInteger();
  static final AtomicInteger CLEANUPS = new AtomicInteger();
  static final AtomicInteger DOUBLE_INITS = new AtomicInteger();
  static final AtomicInteger UNWRAPPED_READS = new AtomicInteger();

  private boolean initialized;

  static void reset() {
    DATA.clear();
    INITS.set(0);
    CLEANUPS.set(0);
    DOUBLE_INITS.set(0);
    UNWRAPPED_READS.set(0);
  }

  @Override
  public void init() throws DBException {
    if (initialized) {
      DOUBLE_INITS.incrementAndGet();
    }
    initialized = true;
    INITS.incrementAndGet();
  }

  @Override
  public void cleanup() {
    CLEANUPS.incrementAndGet();
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    if (!StackWalker.getInstance().walk(s -> s.anyMatch(f -> f.getClassName().equals("site.ycsb.DBWrapper")))) {
      UNWRAPPED_READS.incrementAndGet();
    }
    Map<String, String> row = DATA.get(key);
    if (row == null) {
      return Status.NOT_FOUND;
    }
    for (Map.Entry<String, String> e : row.entrySet()) {
      if (fields == null || fields.contains(e.getKey())) {
        result.put(e.getKey(), new StringByteIterator(e.getValue()));
      }
    }
    return Status.OK;
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    return Status.OK;
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    Map<String, String> row = DATA.computeIfAbsent(key, k -> new ConcurrentHashMap<>());
    values.forEach((k, v) -> row.put(k, v.toString()));
    return Status.OK;
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    return update(table, key, values);
  }

  @Override
  public Status delete(String table, String key) {
    return DATA.remove(key) == null ? Status.NOT_FOUND : Status.OK;
  }
}
