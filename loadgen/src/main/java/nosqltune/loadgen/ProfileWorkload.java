package nosqltune.loadgen;

import com.datastax.oss.driver.api.core.ConsistencyLevel;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.cql.BatchStatement;
import com.datastax.oss.driver.api.core.cql.BatchStatementBuilder;
import com.datastax.oss.driver.api.core.cql.BatchType;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.cql.Statement;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import site.ycsb.DB;
import site.ycsb.Status;
import site.ycsb.Workload;
import site.ycsb.WorkloadException;
import site.ycsb.measurements.Measurements;

/**
 * A YCSB workload that runs a cassandra-stress user profile's operations against the node, with prepared
 * statements on the session {@link CassandraCQLClient} opened (run it with that binding as {@code -db}):
 * {@code insert} writes rows of {@code profile.insert.partitions} partitions (each partition's share of its rows
 * drawn from {@code profile.insert.select}, as one batch of {@code profile.insert.batchtype} when more than one
 * row), and each query binds its {@code ?} markers to the values of one row of a partition ({@code samerow}) or of
 * any rows of it ({@code multirow}). The rows are {@link ProfileData}'s, the same the dataset was written with.
 * Partitions are picked with {@code profile.keys} (a {@link Dist} over 1..partitions).
 *
 * <p>Each operation is measured under its own name (the profile's query names, and INSERT), as YCSB's DB wrapper
 * measures READ and UPDATE, so the client's output carries a latency section per query kind.
 *
 * <p>Properties: the {@code profile.*} of {@link ProfileData}; {@code profile.keys}; {@code profile.ops}
 * ({@code NAME:WEIGHT,...}); {@code profile.insert.partitions}, {@code profile.insert.select}
 * ({@code KIND LOW HIGH INVERTED [P...] / DIVISOR}), {@code profile.insert.batchtype}; {@code profile.queries}
 * (names), {@code profile.query.NAME.cql}, {@code .bound} (the columns of its markers, in order),
 * {@code .fields}; the consistency levels of CassandraCQLClient.
 */
public class ProfileWorkload extends Workload {

  private ProfileData data;
  private Dist keys;
  private String[] opNames;
  private double[] cumulative;
  private Dist insertPartitions;
  private Dist select;
  private double selectDivisor;
  private BatchType batchType;
  private final Map<String, String> cql = new LinkedHashMap<>();
  private final Map<String, int[]> bound = new LinkedHashMap<>();
  private final Map<String, Boolean> sameRow = new LinkedHashMap<>();
  private final Map<String, PreparedStatement> prepared = new ConcurrentHashMap<>();
  private ConsistencyLevel readConsistency;
  private ConsistencyLevel writeConsistency;
  private final AtomicLong versions = new AtomicLong(1);

  @Override
  public void init(Properties p) throws WorkloadException {
    try {
      data = new ProfileData(p);
      keys = Dist.parse(ProfileData.required(p, "profile.keys"));
      String[] ops = ProfileData.required(p, "profile.ops").split(",");
      opNames = new String[ops.length];
      cumulative = new double[ops.length];
      double total = 0;
      for (int i = 0; i < ops.length; i++) {
        String[] kv = ops[i].split(":");
        opNames[i] = kv[0].trim();
        total += Double.parseDouble(kv[1].trim());
        cumulative[i] = total;
      }
      insertPartitions = Dist.parse(ProfileData.required(p, "profile.insert.partitions"));
      String[] share = ProfileData.required(p, "profile.insert.select").split("/");
      select = Dist.parse(share[0]);
      selectDivisor = Double.parseDouble(share[1].trim());
      batchType = p.getProperty("profile.insert.batchtype", "UNLOGGED").trim().equalsIgnoreCase("LOGGED")
          ? BatchType.LOGGED : BatchType.UNLOGGED;
      List<String> names = data.columnNames();
      cql.put("insert", data.insertStatement(""));
      String queries = p.getProperty("profile.queries", "").trim();
      for (String q : queries.isEmpty() ? new String[0] : queries.split(",")) {
        String at = "profile.query." + q + ".";
        cql.put(q, ProfileData.required(p, at + "cql"));
        String columns = p.getProperty(at + "bound", "").trim();
        String[] cols = columns.isEmpty() ? new String[0] : columns.split(",");
        int[] idx = new int[cols.length];
        for (int i = 0; i < cols.length; i++) {
          idx[i] = names.indexOf(cols[i].trim());
          if (idx[i] < 0) {
            throw new WorkloadException("query " + q + " binds unknown column " + cols[i]);
          }
        }
        bound.put(q, idx);
        sameRow.put(q, !p.getProperty(at + "fields", "samerow").trim().equalsIgnoreCase("multirow"));
      }
      for (String op : opNames) {
        if (!cql.containsKey(op)) {
          throw new WorkloadException("profile.ops names " + op + ", which is not insert nor a query");
        }
      }
      readConsistency = DefaultConsistencyLevel.valueOf(
          p.getProperty(CassandraCQLClient.READ_CL_PROPERTY, "ONE").trim().toUpperCase(Locale.ROOT));
      writeConsistency = DefaultConsistencyLevel.valueOf(
          p.getProperty(CassandraCQLClient.WRITE_CL_PROPERTY, "ONE").trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new WorkloadException("profile: " + e.getMessage(), e);
    }
  }

  @Override
  public Object initThread(Properties p, int id, int threads) {
    return new SplittableRandom(ProfileData.mix(id, threads, 97, data.seed));
  }

  /** The load phase does not go through this workload: a profile's dataset is written as SSTables. */
  @Override
  public boolean doInsert(DB db, Object state) {
    return false;
  }

  @Override
  public boolean doTransaction(DB db, Object state) {
    SplittableRandom r = (SplittableRandom) state;
    double pick = r.nextDouble() * cumulative[cumulative.length - 1];
    int i = 0;
    while (i < cumulative.length - 1 && pick >= cumulative[i]) {
      i++;
    }
    String op = opNames[i];
    Measurements m = Measurements.getMeasurements();
    long intended = m.getIntendedtartTimeNs();   // sic: YCSB 0.17's name
    long start = System.nanoTime();
    Status status;
    try {
      CqlSession session = CassandraCQLClient.sharedSession();
      if (session == null) {
        throw new IllegalStateException("no CQL session: run with -db nosqltune.loadgen.CassandraCQLClient");
      }
      Statement<?> statement = op.equals("insert") ? insert(session, r) : query(session, op, r);
      ResultSet rs = session.execute(statement);
      if (!op.equals("insert")) {
        int rows = 0;
        for (Row ignored : rs) {   // every row read, as a client reads them
          rows++;
        }
      }
      status = Status.OK;
    } catch (RuntimeException e) {
      CassandraCQLClient.countError(op, e);
      status = Status.ERROR;
    }
    long end = System.nanoTime();
    String name = op.equals("insert") ? "INSERT" : op.toUpperCase(Locale.ROOT);
    String measured = status.isOk() ? name : name + "-FAILED";
    m.measure(measured, (int) ((end - start) / 1000));
    m.measureIntended(measured, (int) ((end - (intended == 0 ? start : intended)) / 1000));
    m.reportStatus(name, status);
    return status.isOk();
  }

  private PreparedStatement prepare(CqlSession session, String op) {
    return prepared.computeIfAbsent(op, k -> session.prepare(cql.get(k)));
  }

  private Statement<?> insert(CqlSession session, SplittableRandom r) {
    PreparedStatement ps = prepare(session, "insert");
    long parts = Math.max(1, insertPartitions.sample(r));
    List<BoundStatement> rows = new ArrayList<>();
    for (long n = 0; n < parts; n++) {
      long number = keys.nextInTurn(r);
      List<long[]> seeds = data.rowSeeds(number);
      double share = Math.min(1.0, Math.max(0.0, select.sample(r) / selectDivisor));
      long version = versions.getAndIncrement();
      int before = rows.size();
      for (long[] s : seeds) {
        if (r.nextDouble() < share) {
          rows.add(bind(ps, data.row(number, s, version)).setConsistencyLevel(writeConsistency));
        }
      }
      if (rows.size() == before) {   // at least one row of each partition visited
        rows.add(bind(ps, data.row(number, seeds.get(r.nextInt(seeds.size())), version))
            .setConsistencyLevel(writeConsistency));
      }
    }
    if (rows.size() == 1) {
      return rows.get(0);
    }
    BatchStatementBuilder batch = BatchStatement.builder(batchType).setConsistencyLevel(writeConsistency);
    for (BoundStatement b : rows) {
      batch.addStatement(b);
    }
    return batch.build();
  }

  private Statement<?> query(CqlSession session, String op, SplittableRandom r) {
    PreparedStatement ps = prepare(session, op);
    long number = keys.nextInTurn(r);
    List<long[]> seeds = data.rowSeeds(number);
    int[] columns = bound.get(op);
    Object[] values = new Object[columns.length];
    Object[] row = data.row(number, seeds.get(r.nextInt(seeds.size())), 0);
    for (int i = 0; i < columns.length; i++) {
      if (!sameRow.get(op) && i > 0) {
        row = data.row(number, seeds.get(r.nextInt(seeds.size())), 0);
      }
      values[i] = row[columns[i]];
    }
    boolean write = !cql.get(op).trim().toLowerCase(Locale.ROOT).startsWith("select");
    return bind(ps, values).setConsistencyLevel(write ? writeConsistency : readConsistency);
  }

  private static BoundStatement bind(PreparedStatement ps, Object[] values) {
    Object[] driver = new Object[values.length];
    for (int i = 0; i < values.length; i++) {
      driver[i] = toDriver(values[i]);
    }
    return ps.bind(driver);
  }

  /** {@link ProfileData}'s neutral values as the driver's Java types. */
  static Object toDriver(Object value) {
    return ProfileData.map(value, v -> v instanceof ProfileData.Millis ? Instant.ofEpochMilli(((ProfileData.Millis) v).value)
        : v instanceof ProfileData.Days ? LocalDate.ofEpochDay(((ProfileData.Days) v).value)
        : v instanceof ProfileData.Nanos ? LocalTime.ofNanoOfDay(((ProfileData.Nanos) v).value) : v);
  }
}
