package nosqltune.loadgen;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.Response;
import redis.clients.jedis.exceptions.JedisException;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * YCSB binding for Redis, over Jedis: one connection per YCSB client thread.
 *
 * <p>A record is one Redis hash (key = the YCSB key, one hash field per YCSB field). Scans need an
 * order: every key is also a member of the sorted set {@code _ycsb_index}, scored by a hash of the
 * key, so a scan returns the next records in hash order, as a scan over Cassandra's tokens does.
 *
 * <p>Properties: {@code redis.host} (127.0.0.1), {@code redis.port} (6379), {@code redis.timeout}
 * (connect and socket timeout in ms, 10000), {@code redis.password} (none).
 */
public class RedisClient extends DB {

  public static final String HOST_PROPERTY = "redis.host";
  public static final String PORT_PROPERTY = "redis.port";
  public static final String TIMEOUT_PROPERTY = "redis.timeout";
  public static final String PASSWORD_PROPERTY = "redis.password";
  static final String INDEX = "_ycsb_index";

  private Jedis jedis;

  @Override
  public void init() throws DBException {
    if (jedis != null) {
      return; // init is idempotent per instance, as for the Cassandra binding
    }
    Properties p = getProperties();
    String host = p.getProperty(HOST_PROPERTY, "127.0.0.1");
    int port = Integer.parseInt(p.getProperty(PORT_PROPERTY, "6379"));
    int timeout = Integer.parseInt(p.getProperty(TIMEOUT_PROPERTY, "10000"));
    try {
      Jedis j = new Jedis(host, port, timeout);
      String password = p.getProperty(PASSWORD_PROPERTY);
      if (password != null && !password.isEmpty()) {
        j.auth(password);
      }
      j.ping();
      jedis = j;
    } catch (JedisException e) {
      throw new DBException("cannot connect to Redis at " + host + ":" + port + ": "
          + CassandraCQLClient.oneLine(e));
    }
  }

  @Override
  public void cleanup() throws DBException {
    if (jedis != null) {
      jedis.close();
      jedis = null;
    }
  }

  /** A pipeline's sync() keeps error replies (e.g. OOM under maxmemory) as values; get() raises them. */
  private static Status checked(List<Response<?>> replies) {
    for (Response<?> reply : replies) {
      reply.get();
    }
    return Status.OK;
  }

  static double score(String key) {
    return key.hashCode();
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    try {
      if (fields == null) {
        Map<String, String> all = jedis.hgetAll(key);
        if (all.isEmpty()) {
          return Status.NOT_FOUND;
        }
        StringByteIterator.putAllAsByteIterators(result, all);
      } else {
        List<String> names = new ArrayList<>(fields);
        List<String> values = jedis.hmget(key, names.toArray(new String[0]));
        boolean any = false;
        for (int i = 0; i < names.size(); i++) {
          if (values.get(i) != null) {
            result.put(names.get(i), new StringByteIterator(values.get(i)));
            any = true;
          }
        }
        if (!any) {
          return Status.NOT_FOUND;
        }
      }
      return Status.OK;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      Pipeline pipe = jedis.pipelined();
      List<Response<?>> replies = List.of(pipe.hset(key, StringByteIterator.getStringMap(values)),
          pipe.zadd(INDEX, score(key), key));
      pipe.sync();
      return checked(replies);
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      jedis.hset(key, StringByteIterator.getStringMap(values));
      return Status.OK;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      Pipeline pipe = jedis.pipelined();
      List<Response<?>> replies = List.of(pipe.del(key), pipe.zrem(INDEX, key));
      pipe.sync();
      return checked(replies);
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    try {
      List<String> keys = jedis.zrangeByScore(INDEX, score(startkey), Double.POSITIVE_INFINITY, 0, recordcount);
      // one round trip for all the scanned records, not one per record
      Pipeline pipe = jedis.pipelined();
      List<Response<Map<String, String>>> all = new ArrayList<>();
      List<Response<List<String>>> some = new ArrayList<>();
      List<String> names = fields == null ? null : new ArrayList<>(fields);
      for (String key : keys) {
        if (names == null) {
          all.add(pipe.hgetAll(key));
        } else {
          some.add(pipe.hmget(key, names.toArray(new String[0])));
        }
      }
      pipe.sync();
      for (Response<Map<String, String>> reply : all) {
        Map<String, String> record = reply.get();  // get() throws on an error reply
        if (!record.isEmpty()) {
          HashMap<String, ByteIterator> row = new HashMap<>();
          StringByteIterator.putAllAsByteIterators(row, record);
          result.add(row);
        }
      }
      for (Response<List<String>> reply : some) {
        List<String> values = reply.get();
        HashMap<String, ByteIterator> row = new HashMap<>();
        for (int i = 0; i < names.size(); i++) {
          if (values.get(i) != null) {
            row.put(names.get(i), new StringByteIterator(values.get(i)));
          }
        }
        if (!row.isEmpty()) {
          result.add(row);
        }
      }
      return Status.OK;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }
}
