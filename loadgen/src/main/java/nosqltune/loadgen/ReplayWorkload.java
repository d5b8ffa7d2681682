package nosqltune.loadgen;

import com.datastax.oss.driver.api.core.ConsistencyLevel;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.cql.BoundStatementBuilder;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.cql.Statement;
import java.io.BufferedReader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import site.ycsb.DB;
import site.ycsb.Status;
import site.ycsb.Workload;
import site.ycsb.WorkloadException;
import site.ycsb.measurements.Measurements;

/**
 * A YCSB workload that replays a captured workload (a full query log made into a capture by {@code nosqltune
 * capture}) against the node, on the session {@link CassandraCQLClient} opened (run it with that binding as
 * {@code -db}): the log's statements in their order, each kind as the prepared statement it was, bound to the values
 * sampled for it in turn (the raw bytes the log holds, so no type is guessed), at its consistency level; a statement
 * the log had with its values in the text is sent as text, its literals written back.
 *
 * <p>The pace ({@code replay.pace}): {@code recorded} starts each statement when it started in the log, counted from
 * the window's first (its intended start is that moment, so a node that falls behind shows it in the intended
 * latencies); {@code xF} the same F times faster; {@code max} as fast as the client's threads get answers.
 *
 * <p>Each statement is measured under its kind's name in upper case (as {@link ProfileWorkload} measures a query),
 * so the client's output carries a latency section per kind; a read that finds no row is measured apart as
 * {@code NAME-MISS} (a key the data lacks), not as a failure.
 *
 * <p>Properties: {@code replay.plan} (the file the Python side writes from the capture: lines {@code K idx cl
 * literals name cql}, {@code V idx value,value,...} with values in hex and {@code -} for null,
 * literals as the hex of their text, then {@code E t_ms kind}, tab-separated), {@code replay.start} (the index of
 * the window's first statement), {@code replay.pace}.
 */
public class ReplayWorkload extends Workload {

  static final class Kind {
    String name;
    String measured;
    ConsistencyLevel consistency;
    boolean literals;
    boolean read;
    String cql;
    final List<ByteBuffer[]> values = new ArrayList<>();
    final AtomicInteger next = new AtomicInteger();
    volatile PreparedStatement prepared;
  }

  private final List<Kind> kinds = new ArrayList<>();
  private long[] times;
  private int[] kindOf;
  private int start;
  private double speed;          // 0: as fast as answered
  private final AtomicLong claimed = new AtomicLong();
  private volatile long clockStart;   // nanoTime of the window's first statement

  @Override
  public void init(Properties p) throws WorkloadException {
    String plan = p.getProperty("replay.plan");
    if (plan == null) {
      throw new WorkloadException("replay.plan is required");
    }
    String pace = p.getProperty("replay.pace", "recorded").trim().toLowerCase(Locale.ROOT);
    try {
      speed = pace.equals("max") ? 0 : pace.equals("recorded") ? 1 : Double.parseDouble(pace.substring(1));
    } catch (RuntimeException e) {
      throw new WorkloadException("replay.pace: recorded, xF or max, not " + pace);
    }
    if (!pace.equals("max") && !(speed > 0)) {
      throw new WorkloadException("replay.pace: recorded, xF (F > 0) or max, not " + pace);
    }
    start = Integer.parseInt(p.getProperty("replay.start", "0").trim());
    try {
      read(plan);
    } catch (IOException | RuntimeException e) {
      throw new WorkloadException("replay.plan " + plan + ": " + e, e);
    }
    if (times.length == 0 || start < 0 || start >= times.length) {
      throw new WorkloadException("replay.start " + start + " is outside the plan's " + times.length + " statements");
    }
  }

  private void read(String plan) throws IOException {
    List<long[]> events = new ArrayList<>();
    try (BufferedReader in = Files.newBufferedReader(Paths.get(plan), StandardCharsets.UTF_8)) {
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isEmpty()) {
          continue;
        }
        String[] f = line.split("\t", -1);
        switch (f[0]) {
          case "K": {
            Kind k = new Kind();
            if (Integer.parseInt(f[1]) != kinds.size()) {
              throw new IllegalArgumentException("kinds out of order at " + f[1]);
            }
            k.consistency = DefaultConsistencyLevel.valueOf(f[2]);
            k.literals = f[3].equals("1");
            k.name = f[4];
            k.measured = f[4].toUpperCase(Locale.ROOT);
            k.cql = f[5];
            k.read = k.cql.trim().toLowerCase(Locale.ROOT).startsWith("select");
            kinds.add(k);
            break;
          }
          case "V": {
            Kind k = kinds.get(Integer.parseInt(f[1]));
            String[] hex = f[2].isEmpty() ? new String[0] : f[2].split(",", -1);
            ByteBuffer[] row = new ByteBuffer[hex.length];
            for (int i = 0; i < hex.length; i++) {
              row[i] = hex[i].equals("-") ? null : ByteBuffer.wrap(bytes(hex[i]));
            }
            k.values.add(row);
            break;
          }
          case "E":
            events.add(new long[] {Long.parseLong(f[1]), Integer.parseInt(f[2])});
            break;
          default:
            throw new IllegalArgumentException("unknown line " + f[0]);
        }
      }
    }
    times = new long[events.size()];
    kindOf = new int[events.size()];
    for (int i = 0; i < times.length; i++) {
      times[i] = events.get(i)[0];
      kindOf[i] = (int) events.get(i)[1];
      if (kindOf[i] < 0 || kindOf[i] >= kinds.size() || kinds.get(kindOf[i]).values.isEmpty()) {
        throw new IllegalArgumentException("statement " + i + " names kind " + kindOf[i] + ", which has no values");
      }
    }
  }

  static byte[] bytes(String hex) {
    byte[] out = new byte[hex.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  /** The load phase does not go through this workload: the data comes from a snapshot or a profile. */
  @Override
  public boolean doInsert(DB db, Object state) {
    return false;
  }

  @Override
  public boolean doTransaction(DB db, Object state) {
    long n = claimed.getAndIncrement();
    int i = (int) ((start + n) % times.length);   // past the log's end the replay starts again from its start
    Kind kind = kinds.get(kindOf[i]);
    Measurements m = Measurements.getMeasurements();
    long intended;
    if (n == 0) {
      clockStart = System.nanoTime();
    }
    while (clockStart == 0) {
      Thread.onSpinWait();
    }
    if (speed > 0) {
      long lap = (start + n) / times.length;   // each pass over the log continues after the last one's span
      long span = times[times.length - 1] - times[0] + 1;
      long offsetMs = times[i] - times[start] + lap * span;
      intended = clockStart + (long) (offsetMs * 1e6 / speed);
      long wait;
      while ((wait = intended - System.nanoTime()) > 0 && !isStopRequested()) {
        LockSupport.parkNanos(wait);
      }
    } else {
      intended = m.getIntendedtartTimeNs();   // sic: YCSB 0.17's name
    }
    long begin = System.nanoTime();
    Status status;
    boolean miss = false;
    try {
      CqlSession session = CassandraCQLClient.sharedSession();
      if (session == null) {
        throw new IllegalStateException("no CQL session: run with -db nosqltune.loadgen.CassandraCQLClient");
      }
      ResultSet rs = session.execute(statement(session, kind));
      if (kind.read) {
        int rows = 0;
        for (Row ignored : rs) {   // every row read, as a client reads them
          rows++;
        }
        miss = rows == 0;
      }
      status = Status.OK;
    } catch (RuntimeException e) {
      CassandraCQLClient.countError(kind.name, e);
      status = Status.ERROR;
    }
    long end = System.nanoTime();
    String measured = !status.isOk() ? kind.measured + "-FAILED" : miss ? kind.measured + "-MISS" : kind.measured;
    m.measure(measured, (int) ((end - begin) / 1000));
    m.measureIntended(measured, (int) ((end - (intended == 0 ? begin : intended)) / 1000));
    m.reportStatus(kind.measured, status);
    return status.isOk();
  }

  private Statement<?> statement(CqlSession session, Kind kind) {
    ByteBuffer[] values = kind.values.get(Math.floorMod(kind.next.getAndIncrement(), kind.values.size()));
    if (kind.literals) {
      String[] literals = new String[values.length];
      for (int i = 0; i < values.length; i++) {
        literals[i] = StandardCharsets.UTF_8.decode(values[i].duplicate()).toString();
      }
      return SimpleStatement.newInstance(fill(kind.cql, literals)).setConsistencyLevel(kind.consistency);
    }
    PreparedStatement ps = kind.prepared;
    if (ps == null) {
      ps = session.prepare(kind.cql);
      kind.prepared = ps;
    }
    BoundStatementBuilder b = ps.boundStatementBuilder();
    for (int i = 0; i < values.length && i < ps.getVariableDefinitions().size(); i++) {
      if (values[i] == null) {
        b.setToNull(i);
      } else {
        b.setBytesUnsafe(i, values[i].duplicate());
      }
    }
    return b.setConsistencyLevel(kind.consistency).build();
  }

  /** The text's {@code ?} markers (outside quotes) given their literals back, in order. */
  static String fill(String template, String[] literals) {
    StringBuilder out = new StringBuilder(template.length() + 32);
    int next = 0;
    char quote = 0;
    for (int i = 0; i < template.length(); i++) {
      char c = template.charAt(i);
      if (quote != 0) {
        if (c == quote) {
          quote = 0;
        }
        out.append(c);
      } else if (c == '\'' || c == '"') {
        quote = c;
        out.append(c);
      } else if (c == '?' && next < literals.length) {
        out.append(literals[next++]);
      } else {
        out.append(c);
      }
    }
    return out.toString();
  }
}
