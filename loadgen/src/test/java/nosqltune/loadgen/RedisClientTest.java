package nosqltune.loadgen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import site.ycsb.ByteIterator;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/** The Redis binding against a real redis-server (Debian's, installed by scripts/setup.sh). */
class RedisClientTest {

  static Process server;
  static int port;
  static Path dir;

  static String redisServer() {
    for (String d : System.getenv().getOrDefault("PATH", "/usr/bin").split(File.pathSeparator)) {
      File f = new File(d, "redis-server");
      if (f.canExecute()) {
        return f.getPath();
      }
    }
    return null;
  }

  @BeforeAll
  static void start() throws Exception {
    String exe = redisServer();
    Assumptions.assumeTrue(exe != null, "redis-server is not installed (scripts/setup.sh installs it)");
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    dir = Files.createTempDirectory("redis-test");
    server = new ProcessBuilder(exe, "--port", String.valueOf(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", dir.toString()).redirectErrorStream(true)
        .redirectOutput(dir.resolve("log").toFile()).start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (System.nanoTime() < deadline) {
      try (java.net.Socket sock = new java.net.Socket("127.0.0.1", port)) {
        sock.getOutputStream().write("PING\r\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        byte[] reply = new byte[7];
        int n = sock.getInputStream().read(reply);
        if (n > 0 && new String(reply, 0, n, java.nio.charset.StandardCharsets.US_ASCII).startsWith("+PONG")) {
          return;
        }
      } catch (java.io.IOException notYet) {
        // not listening yet
      }
      Thread.sleep(50);
    }
    throw new IllegalStateException("redis-server did not start: " + Files.readString(dir.resolve("log")));
  }

  @AfterAll
  static void stop() throws Exception {
    if (server != null) {
      server.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
    if (dir != null) {
      try (java.util.stream.Stream<Path> files = Files.walk(dir)) {
        files.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
      }
    }
  }

  static RedisClient client(int p) throws DBException {
    RedisClient c = new RedisClient();
    Properties props = new Properties();
    props.setProperty(RedisClient.PORT_PROPERTY, String.valueOf(p));
    c.setProperties(props);
    c.init();
    return c;
  }

  static Map<String, ByteIterator> record(String prefix) {
    Map<String, String> m = new HashMap<>();
    for (int i = 0; i < 3; i++) {
      m.put("field" + i, prefix + i);
    }
    return StringByteIterator.getByteIteratorMap(m);
  }

  @Test
  void insertReadUpdateScanDelete() throws Exception {
    RedisClient c = client(port);
    for (int i = 0; i < 20; i++) {
      assertEquals(Status.OK, c.insert("usertable", "user" + i, record("v" + i + "-")));
    }
    Map<String, ByteIterator> got = new HashMap<>();
    assertEquals(Status.OK, c.read("usertable", "user7", null, got));
    assertEquals(3, got.size());
    assertEquals("v7-1", got.get("field1").toString());

    Set<String> one = new HashSet<>();
    one.add("field2");
    got.clear();
    assertEquals(Status.OK, c.read("usertable", "user7", one, got));
    assertEquals(1, got.size());
    assertEquals("v7-2", got.get("field2").toString());

    Map<String, String> change = new HashMap<>();
    change.put("field0", "new");
    assertEquals(Status.OK, c.update("usertable", "user7", StringByteIterator.getByteIteratorMap(change)));
    got.clear();
    c.read("usertable", "user7", null, got);
    assertEquals("new", got.get("field0").toString());
    assertEquals("v7-1", got.get("field1").toString()); // an update leaves the other fields alone

    // a scan returns the next records in the index's order, starting with the start key
    Vector<HashMap<String, ByteIterator>> rows = new Vector<>();
    assertEquals(Status.OK, c.scan("usertable", "user3", 5, null, rows));
    assertTrue(rows.size() >= 1 && rows.size() <= 5, "rows " + rows.size());
    assertEquals("v3-1", rows.get(0).get("field1").toString());

    assertEquals(Status.OK, c.delete("usertable", "user7"));
    assertEquals(Status.NOT_FOUND, c.read("usertable", "user7", null, new HashMap<>()));
    assertEquals(Status.NOT_FOUND, c.read("usertable", "nobody", one, new HashMap<>()));
    c.cleanup();
  }

  @Test
  void errorRepliesInsidePipelinesAreErrors() throws Exception {
    RedisClient c = client(port);
    // a scan restricted to some fields goes through the same pipeline
    for (int i = 0; i < 5; i++) {
      assertEquals(Status.OK, c.insert("usertable", "fields" + i, record("f" + i + "-")));
    }
    Set<String> one = new HashSet<>();
    one.add("field1");
    Vector<HashMap<String, ByteIterator>> rows = new Vector<>();
    assertEquals(Status.OK, c.scan("usertable", "fields0", 3, one, rows));
    assertTrue(!rows.isEmpty() && rows.get(0).keySet().equals(one), "rows " + rows);
    // Redis refuses writes over its memory limit with an error reply (noeviction): the pipelined insert
    // must report it, not count it as done
    try (redis.clients.jedis.Jedis admin = new redis.clients.jedis.Jedis("127.0.0.1", port)) {
      admin.configSet("maxmemory-policy", "noeviction");
      admin.configSet("maxmemory", "1");
      try {
        assertEquals(Status.ERROR, c.insert("usertable", "refused", record("x")));
        assertEquals(Status.ERROR, c.update("usertable", "fields1", record("y")));
      } finally {
        admin.configSet("maxmemory", "0");
      }
    }
    assertEquals(Status.NOT_FOUND, c.read("usertable", "refused", null, new HashMap<>()));
    c.cleanup();
  }

  @Test
  void noServerIsAClearError() throws Exception {
    int closed;
    try (ServerSocket s = new ServerSocket(0)) {
      closed = s.getLocalPort();
    }
    DBException e = assertThrows(DBException.class, () -> client(closed));
    assertTrue(e.getMessage().contains("cannot connect to Redis at 127.0.0.1:" + closed), e.getMessage());
  }
}
