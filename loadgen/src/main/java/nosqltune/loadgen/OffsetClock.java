package nosqltune.loadgen;

import org.apache.cassandra.utils.Clock;

/**
 * A clock for a Cassandra node ({@code -Dcassandra.clock=nosqltune.loadgen.OffsetClock}) that runs
 * {@code -Dnosqltune.clock.offset_ms} milliseconds off the machine's: a trial's node restored from a dataset built
 * days ago is told it is the time the dataset was built, so rows written with a TTL, tombstones within
 * gc_grace_seconds and TimeWindowCompactionStrategy's windows are as old as when they were written, however long
 * the dataset waited in the cache. Only the wall clock moves; the monotonic clock is the machine's.
 */
public final class OffsetClock implements Clock {

  public static final String OFFSET_PROPERTY = "nosqltune.clock.offset_ms";
  private final long offset = Long.getLong(OFFSET_PROPERTY, 0L);

  @Override
  public long nanoTime() {
    return System.nanoTime();
  }

  @Override
  public long currentTimeMillis() {
    return System.currentTimeMillis() + offset;
  }
}
