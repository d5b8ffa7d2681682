package nosqltune.loadgen;

import com.datastax.oss.driver.api.core.ConsistencyLevel;
import com.datastax.oss.driver.api.core.CqlIdentifier;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.config.ProgrammaticDriverConfigLoaderBuilder;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.BoundStatementBuilder;
import com.datastax.oss.driver.api.core.cql.ColumnDefinition;
import com.datastax.oss.driver.api.core.cql.ColumnDefinitions;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * YCSB binding for Apache Cassandra over CQL, using the 4.x Java driver.
 *
 * <p>The table is expected to exist already (it is created by the Python side):
 * {@code usertable(y_id varchar PRIMARY KEY, field0 varchar, ..., fieldN varchar)}.
 *
 * <p>All instances (one per YCSB client thread) share one {@link CqlSession}. It is reference
 * counted: every successful {@link #init()} takes a reference and every {@link #cleanup()} of an
 * initialized instance drops it; the last one closes the session. {@code init()} is idempotent
 * per instance, so a wrapper that forwards {@code init()} again does no harm.
 *
 * <p>Properties: {@code hosts} (comma list, default 127.0.0.1; an entry may be host:port),
 * {@code port} (9042), {@code cassandra.keyspace} (ycsb), {@code cassandra.localdc}
 * (datacenter1), {@code cassandra.readconsistencylevel} / {@code cassandra.writeconsistencylevel}
 * (ONE), {@code cassandra.connecttimeoutmillis} (5000), {@code cassandra.requesttimeoutmillis}
 * (12000), {@code cassandra.maxconnections} (connections per node, driver default 1),
 * {@code cassandra.maxrequestsperconnection} (driver default 1024), {@code table} (usertable),
 * {@code cassandra.idempotent} (false; true marks every request idempotent, as every operation this binding sends
 * is: the driver then retries a request whose connection closed under it, a node drained for a rolling restart,
 * on the next replica instead of failing the operation; off by default so that trials count failures as before),
 * {@code cassandra.servertimestamps} (false; true lets the node stamp writes with its own clock).
 */
public class CassandraCQLClient extends DB {

  public static final String HOSTS_PROPERTY = "hosts";
  public static final String PORT_PROPERTY = "port";
  public static final String KEYSPACE_PROPERTY = "cassandra.keyspace";
  public static final String LOCAL_DC_PROPERTY = "cassandra.localdc";
  public static final String READ_CL_PROPERTY = "cassandra.readconsistencylevel";
  public static final String WRITE_CL_PROPERTY = "cassandra.writeconsistencylevel";
  public static final String CONNECT_TIMEOUT_PROPERTY = "cassandra.connecttimeoutmillis";
  public static final String REQUEST_TIMEOUT_PROPERTY = "cassandra.requesttimeoutmillis";
  public static final String MAX_CONNECTIONS_PROPERTY = "cassandra.maxconnections";
  public static final String MAX_REQUESTS_PROPERTY = "cassandra.maxrequestsperconnection";
  public static final String TABLE_PROPERTY = "table";
  public static final String IDEMPOTENT_PROPERTY = "cassandra.idempotent";
  public static final String SERVER_TIMESTAMPS_PROPERTY = "cassandra.servertimestamps";

  public static final String KEY_COLUMN = "y_id";

  /** How many error messages are printed to stderr before the rest are only counted. */
  private static final int MAX_PRINTED_ERRORS = 10;

  private static final Object LOCK = new Object();
  private static CqlSession session;
  private static int references;
  /** Prepared statements of the current session, keyed by operation, table and field list. */
  private static final Map<String, PreparedStatement> PREPARED = new ConcurrentHashMap<>();
  private static final AtomicLong ERRORS = new AtomicLong();

  private boolean initialized;
  private CqlSession mySession;
  private ConsistencyLevel readConsistency;
  private ConsistencyLevel writeConsistency;

  @Override
  public void init() throws DBException {
    if (initialized) {
      return;
    }
    Properties p = getProperties();
    readConsistency = parseConsistency(p.getProperty(READ_CL_PROPERTY, "ONE"), READ_CL_PROPERTY);
    writeConsistency = parseConsistency(p.getProperty(WRITE_CL_PROPERTY, "ONE"), WRITE_CL_PROPERTY);
    synchronized (LOCK) {
      if (session == null) {
        session = openSession(p);
        PREPARED.clear();
      }
      references++;
      mySession = session;
    }
    initialized = true;
  }

  @Override
  public void cleanup() throws DBException {
    if (!initialized) {
      return;
    }
    initialized = false;
    mySession = null;
    CqlSession toClose = null;
    synchronized (LOCK) {
      references--;
      if (references <= 0) {
        references = 0;
        toClose = session;
        session = null;
        PREPARED.clear();
      }
    }
    if (toClose != null) {
      try {
        toClose.close();
      } catch (RuntimeException e) {
        throw new DBException("closing the CQL session failed: " + e.getMessage(), e);
      }
    }
  }

  /** Number of failed operations (all instances) since the JVM started. */
  public static long errorCount() {
    return ERRORS.get();
  }

  private static ConsistencyLevel parseConsistency(String value, String property)
      throws DBException {
    try {
      return DefaultConsistencyLevel.valueOf(value.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new DBException("invalid " + property + ": " + value);
    }
  }

  private static int intProperty(Properties p, String name, int dflt) throws DBException {
    String v = p.getProperty(name);
    if (v == null || v.trim().isEmpty()) {
      return dflt;
    }
    try {
      return Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new DBException("invalid integer for " + name + ": " + v);
    }
  }

  private static CqlSession openSession(Properties p) throws DBException {
    int port = intProperty(p, PORT_PROPERTY, 9042);
    int connectTimeout = intProperty(p, CONNECT_TIMEOUT_PROPERTY, 5000);
    int requestTimeout = intProperty(p, REQUEST_TIMEOUT_PROPERTY, 12000);
    int maxConnections = intProperty(p, MAX_CONNECTIONS_PROPERTY, 0);
    int maxRequests = intProperty(p, MAX_REQUESTS_PROPERTY, 0);
    String keyspace = p.getProperty(KEYSPACE_PROPERTY, "ycsb");
    String localDc = p.getProperty(LOCAL_DC_PROPERTY, "datacenter1");
    boolean idempotent = Boolean.parseBoolean(p.getProperty(IDEMPOTENT_PROPERTY, "false").trim());

    List<InetSocketAddress> contactPoints = new ArrayList<>();
    for (String h : p.getProperty(HOSTS_PROPERTY, "127.0.0.1").split(",")) {
      h = h.trim();
      if (h.isEmpty()) {
        continue;
      }
      int hp = port;
      int colon = h.lastIndexOf(':');
      if (colon > 0 && h.indexOf(':') == colon) { // host:port (not an IPv6 literal)
        try {
          hp = Integer.parseInt(h.substring(colon + 1));
        } catch (NumberFormatException e) {
          throw new DBException("invalid host:port in " + HOSTS_PROPERTY + ": " + h);
        }
        h = h.substring(0, colon);
      }
      contactPoints.add(new InetSocketAddress(h, hp));
    }
    if (contactPoints.isEmpty()) {
      throw new DBException("no contact point in property " + HOSTS_PROPERTY);
    }

    Duration connect = Duration.ofMillis(connectTimeout);
    ProgrammaticDriverConfigLoaderBuilder cfg = DriverConfigLoader.programmaticBuilder()
        .withString(DefaultDriverOption.LOAD_BALANCING_LOCAL_DATACENTER, localDc)
        .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, Duration.ofMillis(requestTimeout))
        .withDuration(DefaultDriverOption.CONNECTION_CONNECT_TIMEOUT, connect)
        .withDuration(DefaultDriverOption.CONNECTION_INIT_QUERY_TIMEOUT, connect)
        .withDuration(DefaultDriverOption.CONNECTION_SET_KEYSPACE_TIMEOUT, connect)
        .withDuration(DefaultDriverOption.CONTROL_CONNECTION_TIMEOUT, connect)
        .withDuration(DefaultDriverOption.METADATA_SCHEMA_REQUEST_TIMEOUT,
            Duration.ofMillis(Math.max(requestTimeout, connectTimeout)))
        // Only our keyspace matters for token-aware routing; skip the others.
        .withStringList(DefaultDriverOption.METADATA_SCHEMA_REFRESHED_KEYSPACES,
            Collections.singletonList(keyspace))
        .withBoolean(DefaultDriverOption.RECONNECT_ON_INIT, false)
        .withBoolean(DefaultDriverOption.REQUEST_DEFAULT_IDEMPOTENCE, idempotent)
        // Close fast at the end of a run (the default quiet period is 2 s).
        .withInt(DefaultDriverOption.NETTY_IO_SHUTDOWN_QUIET_PERIOD, 0)
        .withInt(DefaultDriverOption.NETTY_ADMIN_SHUTDOWN_QUIET_PERIOD, 0)
        .withDuration(DefaultDriverOption.HEARTBEAT_TIMEOUT, Duration.ofMillis(requestTimeout));
    if (maxConnections > 0) {
      cfg = cfg.withInt(DefaultDriverOption.CONNECTION_POOL_LOCAL_SIZE, maxConnections)
          .withInt(DefaultDriverOption.CONNECTION_POOL_REMOTE_SIZE, maxConnections);
    }
    if (maxRequests > 0) {
      cfg = cfg.withInt(DefaultDriverOption.CONNECTION_MAX_REQUESTS, maxRequests);
    }
    if (Boolean.parseBoolean(p.getProperty(SERVER_TIMESTAMPS_PROPERTY, "false").trim())) {
      // the node stamps every write with its own clock (a node whose clock is set to its data's time, OffsetClock)
      cfg = cfg.withString(DefaultDriverOption.TIMESTAMP_GENERATOR_CLASS, "ServerSideTimestampGenerator");
    }
    try {
      return CqlSession.builder()
          .addContactPoints(contactPoints)
          .withLocalDatacenter(localDc)
          .withKeyspace(CqlIdentifier.fromCql(keyspace))
          .withConfigLoader(cfg.build())
          .build();
    } catch (RuntimeException e) {
      throw new DBException("cannot connect to Cassandra at " + contactPoints
          + " (keyspace " + keyspace + "): " + oneLine(e), e);
    }
  }

  static String oneLine(Throwable e) {
    String m = e.getMessage();
    if (m == null || m.isEmpty()) {
      m = e.getClass().getName();
    } else {
      m = e.getClass().getSimpleName() + ": " + m;
    }
    return m.replaceAll("\\s*[\\r\\n]+\\s*", " ");
  }

  private Status error(String op, String key, RuntimeException e) {
    countError(op + " " + key, e);
    return Status.ERROR;
  }

  /** Count a failed operation, printing the first few (also for {@link ProfileWorkload}'s statements). */
  static void countError(String what, RuntimeException e) {
    long n = ERRORS.incrementAndGet();
    if (n <= MAX_PRINTED_ERRORS) {
      System.err.println("[cql] " + what + " failed: " + oneLine(e));
      if (n == MAX_PRINTED_ERRORS) {
        System.err.println("[cql] further operation errors are counted but not printed");
      }
    }
  }

  /** The session the initialized instances share (null before the first init, after the last cleanup). */
  static CqlSession sharedSession() {
    synchronized (LOCK) {
      return session;
    }
  }

  private PreparedStatement prepared(String cacheKey, String cql) {
    PreparedStatement ps = PREPARED.get(cacheKey);
    if (ps == null) {
      ps = mySession.prepare(cql);
      PreparedStatement old = PREPARED.putIfAbsent(cacheKey, ps);
      if (old != null) {
        ps = old;
      }
    }
    return ps;
  }

  private static List<String> sorted(Set<String> fields) {
    List<String> list = new ArrayList<>(fields);
    Collections.sort(list);
    return list;
  }

  private static String joinColumns(List<String> cols) {
    return String.join(", ", cols);
  }

  private static void putRow(Row row, Set<String> only, Map<String, ByteIterator> out) {
    ColumnDefinitions defs = row.getColumnDefinitions();
    for (int i = 0; i < defs.size(); i++) {
      ColumnDefinition d = defs.get(i);
      String name = d.getName().asInternal();
      if (KEY_COLUMN.equals(name) && (only == null || !only.contains(KEY_COLUMN))) {
        continue;
      }
      String v = row.getString(i);
      if (v != null) {
        out.put(name, new StringByteIterator(v));
      }
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    try {
      PreparedStatement ps;
      if (fields == null) {
        ps = prepared("R|" + table + "|*", "SELECT * FROM " + table + " WHERE " + KEY_COLUMN + " = ?");
      } else {
        List<String> cols = sorted(fields);
        String c = joinColumns(cols);
        ps = prepared("R|" + table + "|" + c,
            "SELECT " + c + " FROM " + table + " WHERE " + KEY_COLUMN + " = ?");
      }
      BoundStatement bs = ps.bind(key).setConsistencyLevel(readConsistency);
      Row row = mySession.execute(bs).one();
      if (row == null) {
        return Status.NOT_FOUND;
      }
      if (result != null) {
        putRow(row, fields, result);
      }
      return Status.OK;
    } catch (RuntimeException e) {
      return error("read", key, e);
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    try {
      String c = fields == null ? "*" : joinColumns(sorted(fields));
      PreparedStatement ps = prepared("S|" + table + "|" + c,
          "SELECT " + c + " FROM " + table + " WHERE token(" + KEY_COLUMN + ") >= token(?) LIMIT ?");
      BoundStatement bs = ps.bind(startkey, recordcount)
          .setConsistencyLevel(readConsistency)
          .setPageSize(Math.max(1, Math.min(recordcount, 5000)));
      ResultSet rs = mySession.execute(bs);
      for (Row row : rs) {
        HashMap<String, ByteIterator> m = new HashMap<>();
        putRow(row, fields, m);
        if (result != null) {
          result.add(m);
        }
      }
      return Status.OK;
    } catch (RuntimeException e) {
      return error("scan", startkey, e);
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      List<String> cols = sorted(values.keySet());
      StringBuilder sb = new StringBuilder("UPDATE ").append(table).append(" SET ");
      for (int i = 0; i < cols.size(); i++) {
        sb.append(i == 0 ? "" : ", ").append(cols.get(i)).append(" = ?");
      }
      sb.append(" WHERE ").append(KEY_COLUMN).append(" = ?");
      PreparedStatement ps = prepared("U|" + table + "|" + joinColumns(cols), sb.toString());
      BoundStatementBuilder b = ps.boundStatementBuilder();
      int i = 0;
      for (String col : cols) {
        ByteIterator v = values.get(col);
        b.setString(i++, v == null ? null : v.toString());
      }
      b.setString(i, key);
      b.setConsistencyLevel(writeConsistency);
      mySession.execute(b.build());
      return Status.OK;
    } catch (RuntimeException e) {
      return error("update", key, e);
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      List<String> cols = sorted(values.keySet());
      StringBuilder sb = new StringBuilder("INSERT INTO ").append(table).append(" (").append(KEY_COLUMN);
      for (String col : cols) {
        sb.append(", ").append(col);
      }
      sb.append(") VALUES (?");
      for (int i = 0; i < cols.size(); i++) {
        sb.append(", ?");
      }
      sb.append(")");
      PreparedStatement ps = prepared("I|" + table + "|" + joinColumns(cols), sb.toString());
      BoundStatementBuilder b = ps.boundStatementBuilder();
      b.setString(0, key);
      int i = 1;
      for (String col : cols) {
        ByteIterator v = values.get(col);
        b.setString(i++, v == null ? null : v.toString());
      }
      b.setConsistencyLevel(writeConsistency);
      mySession.execute(b.build());
      return Status.OK;
    } catch (RuntimeException e) {
      return error("insert", key, e);
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      PreparedStatement ps = prepared("D|" + table,
          "DELETE FROM " + table + " WHERE " + KEY_COLUMN + " = ?");
      mySession.execute(ps.bind(key).setConsistencyLevel(writeConsistency));
      return Status.OK;
    } catch (RuntimeException e) {
      return error("delete", key, e);
    }
  }
}
