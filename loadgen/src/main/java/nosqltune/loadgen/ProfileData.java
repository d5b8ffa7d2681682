package nosqltune.loadgen;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.UUID;

/**
 * The data of a cassandra-stress user profile, as the Python side read and checked it ({@code workloads/profile.py})
 * and handed it over as {@code profile.*} properties: the table's columns with their distributions, and every
 * partition's rows, made from the partition's number alone so that the dataset writer and the trial's client
 * agree on what exists without sharing anything but the properties.
 *
 * <p>Partitions are numbered 1..{@code profile.partitions}. A partition's key is its number written in mixed radix
 * over the partition key columns' populations (the last column varies fastest), so two numbers never make the
 * same key while the populations last. Its rows are the product of its clustering columns' {@code cluster} draws,
 * each level's values distinct under their parent and drawn from the column's {@code population}; every regular
 * and static value is drawn from its column's {@code population} (which value) and {@code size} (how long), with
 * a random stream seeded by the partition, the row and the column. A value's seed becomes a typed value the same
 * way everywhere ({@link #value}): text of the drawn size, numbers, times from a fixed base, UUIDs, collections of
 * the drawn size.
 *
 * <p>Values are neutral Java objects (String, Long, Integer, Double, ByteBuffer, UUID, Boolean, BigInteger,
 * BigDecimal, InetAddress, List, Set, Map); times as {@link Millis} (a timestamp), {@link Days} (a date) and
 * {@link Nanos} (a time of day), which each sink converts to its own types.
 */
public final class ProfileData {

  /** The base of generated times: 2026-01-01T00:00:00Z; a seed of s is s seconds (timestamps) or days (dates) past. */
  public static final long BASE_MILLIS = 1767225600000L;
  public static final int BASE_DAYS = (int) (BASE_MILLIS / 86_400_000L);
  /** The most rows one partition may be given (a profile whose clusters multiply past this is cut here). */
  public static final int MAX_ROWS = 1_000_000;
  private static final char[] ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789".toCharArray();

  /** A timestamp as milliseconds since the epoch. */
  public static final class Millis {
    public final long value;

    Millis(long value) {
      this.value = value;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Millis && ((Millis) o).value == value;
    }

    @Override
    public int hashCode() {
      return Long.hashCode(value);
    }
  }

  /** A date as days since the epoch. */
  public static final class Days {
    public final int value;

    Days(int value) {
      this.value = value;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Days && ((Days) o).value == value;
    }

    @Override
    public int hashCode() {
      return value;
    }
  }

  /** A time of day as nanoseconds since midnight. */
  public static final class Nanos {
    public final long value;

    Nanos(long value) {
      this.value = value;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Nanos && ((Nanos) o).value == value;
    }

    @Override
    public int hashCode() {
      return Long.hashCode(value);
    }
  }

  /** One column: its CQL type, its role in the key and its distributions. */
  public static final class Column {
    public final String name;
    public final String type;
    public final String role;   // partition | clustering | regular | static
    public final Dist size;
    public final Dist population;
    public final Dist cluster;
    final int index;

    Column(String name, String type, String role, Dist size, Dist population, Dist cluster, int index) {
      this.name = name;
      this.type = type;
      this.role = role;
      this.size = size;
      this.population = population;
      this.cluster = cluster;
      this.index = index;
    }
  }

  public final String keyspace;
  public final String table;
  public final List<Column> columns = new ArrayList<>();
  public final List<Column> partitionKey = new ArrayList<>();
  public final List<Column> clustering = new ArrayList<>();
  public final List<Column> values = new ArrayList<>();   // regular and static
  public final long partitions;
  public final long seed;

  public ProfileData(Properties p) {
    keyspace = required(p, "profile.keyspace");
    table = required(p, "profile.table");
    partitions = Long.parseLong(required(p, "profile.partitions"));
    seed = Long.parseLong(p.getProperty("profile.seed", "1"));
    int i = 0;
    for (String name : required(p, "profile.columns").split(",")) {
      String at = "profile.column." + name + ".";
      Column c = new Column(name, required(p, at + "type"), required(p, at + "role"),
          Dist.parse(required(p, at + "size")), Dist.parse(required(p, at + "population")),
          Dist.parse(required(p, at + "cluster")), i++);
      columns.add(c);
      (c.role.equals("partition") ? partitionKey : c.role.equals("clustering") ? clustering : values).add(c);
    }
    if (partitionKey.isEmpty()) {
      throw new IllegalArgumentException("profile.columns: no partition key column");
    }
  }

  static String required(Properties p, String name) {
    String v = p.getProperty(name);
    if (v == null || v.trim().isEmpty()) {
      throw new IllegalArgumentException("missing property " + name);
    }
    return v.trim();
  }

  /** The column names in the table's order (the order of {@link #row} values). */
  public List<String> columnNames() {
    List<String> out = new ArrayList<>();
    for (Column c : columns) {
      out.add(c.name);
    }
    return out;
  }

  // --- partitions and rows -------------------------------------------------------------------------------------

  /** The seeds of partition {@code number}'s key columns: its number in mixed radix over their populations. */
  long[] keySeeds(long number) {
    long[] out = new long[partitionKey.size()];
    long rest = number - 1;
    for (int j = partitionKey.size() - 1; j >= 0; j--) {
      Dist pop = partitionKey.get(j).population;
      long span = pop.high - pop.low + 1;
      out[j] = pop.low + Math.floorMod(rest, span);
      rest = Math.floorDiv(rest, span);
    }
    return out;
  }

  /** How many distinct partitions the key columns' populations allow (at most Long.MAX_VALUE). */
  public long keySpace() {
    long out = 1;
    for (Column c : partitionKey) {
      long span = c.population.high - c.population.low + 1;
      if (out > Long.MAX_VALUE / Math.max(1, span)) {
        return Long.MAX_VALUE;
      }
      out *= span;
    }
    return out;
  }

  /**
   * The clustering seeds of partition {@code number}'s rows, one array per row (empty arrays for a table
   * without clustering columns: one row).
   */
  public List<long[]> rowSeeds(long number) {
    List<long[]> rows = new ArrayList<>();
    rows.add(new long[0]);
    for (int level = 0; level < clustering.size(); level++) {
      Column c = clustering.get(level);
      List<long[]> next = new ArrayList<>();
      for (long[] parent : rows) {
        SplittableRandom r = random(number, Arrays.hashCode(parent), c.index, 7);
        int count = (int) Math.max(1, c.cluster.sample(r));
        Set<Long> seen = new LinkedHashSet<>();
        long span = c.population.high - c.population.low + 1;
        for (int tries = 0; seen.size() < Math.min(count, span) && tries < count * 4L; tries++) {
          seen.add(c.population.sample(r));
        }
        for (long s : seen) {
          long[] child = Arrays.copyOf(parent, level + 1);
          child[level] = s;
          next.add(child);
          if (next.size() >= MAX_ROWS) {
            break;
          }
        }
        if (next.size() >= MAX_ROWS) {
          break;
        }
      }
      rows = next;
    }
    return rows;
  }

  /** Partition {@code number}'s key: its key columns' values, in {@link #partitionKey}'s order. */
  public Object[] keyValues(long number) {
    long[] key = keySeeds(number);
    Object[] out = new Object[partitionKey.size()];
    for (int j = 0; j < out.length; j++) {
      Column c = partitionKey.get(j);
      out[j] = value(c, key[j], sizeOf(c, key[j]));
    }
    return out;
  }

  /**
   * One row of partition {@code number}: every column's value in the table's order. {@code version} varies the
   * regular and static values (0: the dataset's; an insert in a trial passes its own, so that it overwrites the
   * row with new values, not the same bytes).
   */
  public Object[] row(long number, long[] clusteringSeeds, long version) {
    return row(number, keyValues(number), clusteringSeeds, version);
  }

  /** {@link #row} with the partition's key values given ({@link #keyValues}: made once for all its rows). */
  public Object[] row(long number, Object[] key, long[] clusteringSeeds, long version) {
    Object[] out = new Object[columns.size()];
    for (int j = 0; j < partitionKey.size(); j++) {
      out[partitionKey.get(j).index] = key[j];
    }
    for (int j = 0; j < clustering.size(); j++) {
      Column c = clustering.get(j);
      out[c.index] = value(c, clusteringSeeds[j], sizeOf(c, clusteringSeeds[j]));
    }
    int rowHash = Arrays.hashCode(clusteringSeeds);
    for (Column c : values) {
      SplittableRandom r = c.role.equals("static") ? random(number, 0, c.index, version)
          : random(number, rowHash, c.index, version);
      long s = c.population.sample(r);
      out[c.index] = value(c, s, (int) Math.max(0, c.size.sample(r)));
    }
    return out;
  }

  private int sizeOf(Column c, long seed) {
    return (int) Math.max(0, c.size.sample(new SplittableRandom(mix(seed, c.index, 11, this.seed))));
  }

  private SplittableRandom random(long number, long row, int column, long version) {
    return new SplittableRandom(mix(number, row, column, version ^ this.seed));
  }

  static long mix(long a, long b, long c, long d) {
    long h = a * 0x9E3779B97F4A7C15L;
    h ^= Long.rotateLeft(b * 0xC2B2AE3D27D4EB4FL, 29);
    h ^= Long.rotateLeft(c * 0x165667B19E3779F9L, 41);
    h ^= d * 0x27D4EB2F165667C5L;
    h ^= h >>> 31;
    h *= 0x94D049BB133111EBL;
    return h ^ (h >>> 29);
  }

  // --- values ----------------------------------------------------------------------------------------------------

  /** The value of a column for a seed and a size (characters, bytes or elements). */
  public static Object value(Column c, long seed, int size) {
    return value(c.type, seed, size);
  }

  static Object value(String type, long seed, int size) {
    String t = type.trim().toLowerCase();
    if (t.startsWith("frozen<")) {
      t = t.substring("frozen<".length(), t.length() - 1).trim();
    }
    if (t.startsWith("set<") || t.startsWith("list<")) {
      String inner = t.substring(t.indexOf('<') + 1, t.length() - 1);
      List<Object> items = new ArrayList<>();
      Set<Object> seen = new HashSet<>();
      for (int i = 0; i < size; i++) {
        Object item = value(inner, mix(seed, i, 3, 5), 8);
        if (t.startsWith("list<") || seen.add(item)) {
          items.add(item);
        }
      }
      return t.startsWith("set<") ? new LinkedHashSet<>(items) : items;
    }
    if (t.startsWith("map<")) {
      String[] kv = splitPair(t.substring(4, t.length() - 1));
      Map<Object, Object> out = new LinkedHashMap<>();
      for (int i = 0; i < size; i++) {
        out.put(value(kv[0], mix(seed, i, 13, 17), 8), value(kv[1], mix(seed, i, 19, 23), 8));
      }
      return out;
    }
    switch (t) {
      case "text":
      case "varchar":
      case "ascii":
        return text(seed, size);
      case "blob": {
        byte[] b = new byte[size];
        SplittableRandom r = new SplittableRandom(seed);
        for (int i = 0; i < size; i++) {
          b[i] = (byte) r.nextInt(256);
        }
        return ByteBuffer.wrap(b);
      }
      case "int":
        return (int) seed;
      case "bigint":
        return seed;
      case "smallint":
        return (short) seed;
      case "tinyint":
        return (byte) seed;
      case "varint":
        return BigInteger.valueOf(seed);
      case "decimal":
        return BigDecimal.valueOf(seed, 2);
      case "float":
        return (float) (seed + (Math.floorMod(mix(seed, 1, 2, 3), 1000) / 1000.0));
      case "double":
        return seed + (Math.floorMod(mix(seed, 1, 2, 3), 1_000_000) / 1_000_000.0);
      case "boolean":
        return (seed & 1) == 1;
      case "uuid":
        return new UUID((mix(seed, 29, 31, 37) & ~0xF000L) | 0x4000L,
            (mix(seed, 41, 43, 47) & 0x3FFFFFFFFFFFFFFFL) | 0x8000000000000000L);
      case "timeuuid":
        return timeUuid(BASE_MILLIS + seed * 1000L, seed);
      case "timestamp":
        return new Millis(BASE_MILLIS + seed * 1000L);
      case "date":
        return new Days(BASE_DAYS + (int) seed);
      case "time":
        return new Nanos(Math.floorMod(seed, 86_400L) * 1_000_000_000L);
      case "inet":
        try {
          int v = (int) mix(seed, 53, 59, 61);
          return InetAddress.getByAddress(new byte[] {(byte) (v >>> 24), (byte) (v >>> 16), (byte) (v >>> 8), (byte) v});
        } catch (UnknownHostException e) {
          throw new IllegalStateException(e);
        }
      default:
        throw new IllegalArgumentException("unsupported type " + type);
    }
  }

  private static String[] splitPair(String text) {
    int depth = 0;
    for (int i = 0; i < text.length(); i++) {
      char ch = text.charAt(i);
      if (ch == '<') {
        depth++;
      } else if (ch == '>') {
        depth--;
      } else if (ch == ',' && depth == 0) {
        return new String[] {text.substring(0, i).trim(), text.substring(i + 1).trim()};
      }
    }
    throw new IllegalArgumentException("a map type needs two types: " + text);
  }

  static String text(long seed, int size) {
    char[] out = new char[size];
    SplittableRandom r = new SplittableRandom(seed);
    for (int i = 0; i < size; i++) {
      out[i] = ALPHABET[r.nextInt(ALPHABET.length)];
    }
    return new String(out);
  }

  /** A version 1 (time-based) UUID for a time in milliseconds, its clock sequence and node from the seed. */
  static UUID timeUuid(long millis, long seed) {
    long ticks = (millis + 12_219_292_800_000L) * 10_000L + Math.floorMod(seed, 10_000L);   // 100 ns since 1582
    long msb = (ticks << 32) | ((ticks >>> 16) & 0xFFFF0000L) | 0x1000L | ((ticks >>> 48) & 0x0FFFL);
    long lsb = (mix(seed, 67, 71, 73) & 0x3FFFFFFFFFFFFFFFL) | 0x8000000000000000L;
    return new UUID(msb, lsb);
  }

  /** INSERT of every column, in the table's order (the writer's and the client's), with {@code suffix} after it. */
  public String insertStatement(String suffix) {
    StringBuilder insert = new StringBuilder("INSERT INTO " + keyspace + "." + table + " (");
    StringBuilder marks = new StringBuilder();
    for (int i = 0; i < columns.size(); i++) {
      insert.append(i == 0 ? "" : ", ").append('"').append(columns.get(i).name).append('"');
      marks.append(i == 0 ? "?" : ", ?");
    }
    return insert + ") VALUES (" + marks + ")" + suffix;
  }

  /** A neutral value with {@code scalar} applied to it, or to each element of a set, list or map. */
  public static Object map(Object v, java.util.function.UnaryOperator<Object> scalar) {
    if (v instanceof Set) {
      Set<Object> out = new LinkedHashSet<>();
      for (Object o : (Set<?>) v) {
        out.add(map(o, scalar));
      }
      return out;
    }
    if (v instanceof List) {
      List<Object> out = new ArrayList<>();
      for (Object o : (List<?>) v) {
        out.add(map(o, scalar));
      }
      return out;
    }
    if (v instanceof Map) {
      Map<Object, Object> out = new LinkedHashMap<>();
      for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
        out.put(map(e.getKey(), scalar), map(e.getValue(), scalar));
      }
      return out;
    }
    return scalar.apply(v);
  }

  /** An estimate: the mean rows of a partition over {@code sample} partitions. */
  public double meanRows(int sample) {
    long total = 0;
    int n = (int) Math.min(sample, partitions);
    for (int i = 1; i <= n; i++) {
      total += rowSeeds(i).size();
    }
    return n == 0 ? 0 : (double) total / n;
  }
}
