package nosqltune.loadgen;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/** The data of a profile against its distributions: sizes, rows per partition, distinct keys, determinism. */
class ProfileDataTest {

  /** A time-series-like table: (sensor, day) partitions, clustering by ts, a text and a set column. */
  static Properties profile(long partitions) {
    Properties p = new Properties();
    p.setProperty("profile.keyspace", "ks");
    p.setProperty("profile.table", "t");
    p.setProperty("profile.partitions", Long.toString(partitions));
    p.setProperty("profile.columns", "sensor,day,ts,status,tags,reading");
    String[][] columns = {
        {"sensor", "bigint", "partition", "uniform 4 8 0", "uniform 1 1000 0", "fixed 1 1 0"},
        {"day", "date", "partition", "uniform 4 8 0", "uniform 1 7 0", "fixed 1 1 0"},
        {"ts", "timestamp", "clustering", "uniform 4 8 0", "uniform 1 86400 0", "uniform 20 40 0"},
        {"status", "text", "regular", "uniform 16 48 0", "uniform 1 100000000000 0", "fixed 1 1 0"},
        {"tags", "set<text>", "regular", "uniform 2 6 0", "uniform 1 100000000000 0", "fixed 1 1 0"},
        {"reading", "double", "regular", "uniform 4 8 0", "uniform 1 100000000000 0", "fixed 1 1 0"},
    };
    for (String[] c : columns) {
      String at = "profile.column." + c[0] + ".";
      p.setProperty(at + "type", c[1]);
      p.setProperty(at + "role", c[2]);
      p.setProperty(at + "size", c[3]);
      p.setProperty(at + "population", c[4]);
      p.setProperty(at + "cluster", c[5]);
    }
    return p;
  }

  @Test
  void rowsPerPartitionFollowTheClusterDistribution() {
    ProfileData data = new ProfileData(profile(500));
    double total = 0;
    for (long n = 1; n <= 500; n++) {
      List<long[]> rows = data.rowSeeds(n);
      assertTrue(rows.size() >= 20 && rows.size() <= 40, "rows of partition " + n + ": " + rows.size());
      Set<Long> distinct = new HashSet<>();
      for (long[] r : rows) {
        assertTrue(r[0] >= 1 && r[0] <= 86400);
        distinct.add(r[0]);
      }
      assertEquals(rows.size(), distinct.size(), "clustering values are distinct within a partition");
      total += rows.size();
    }
    assertEquals(30.0, total / 500, 1.5);   // uniform(20..40)
  }

  @Test
  void valuesHaveTheirSizesAndAPartitionIsTheSameEveryTime() {
    ProfileData data = new ProfileData(profile(50));
    for (long n = 1; n <= 50; n++) {
      for (long[] seeds : data.rowSeeds(n)) {
        Object[] row = data.row(n, seeds, 0);
        int status = ((String) row[3]).length();
        assertTrue(status >= 16 && status <= 48, "status of " + status + " characters");
        int tags = ((Collection<?>) row[4]).size();
        assertTrue(tags >= 1 && tags <= 6, tags + " tags");
        assertArrayEquals(row, data.row(n, seeds, 0), "the same partition, row and version: the same values");
      }
    }
    assertEquals(data.rowSeeds(7).size(), new ProfileData(profile(50)).rowSeeds(7).size());
    long[] first = data.rowSeeds(3).get(0);
    Object[] v0 = data.row(3, first, 0);
    Object[] v1 = data.row(3, first, 1);
    assertEquals(v0[0], v1[0]);                       // the key stays
    assertTrue(!v0[3].equals(v1[3]), "another version writes other values");
  }

  @Test
  void partitionNumbersAreDistinctKeysWithinThePopulations() {
    ProfileData data = new ProfileData(profile(7000));
    assertEquals(7000L, data.keySpace());
    Set<String> keys = new HashSet<>();
    for (long n = 1; n <= 7000; n++) {
      long[] k = data.keySeeds(n);
      assertTrue(k[0] >= 1 && k[0] <= 1000 && k[1] >= 1 && k[1] <= 7);
      keys.add(Arrays.toString(k));
    }
    assertEquals(7000, keys.size());
  }

  @Test
  void distributionsStayInTheirRangesWithTheirShapes() {
    SplittableRandom r = new SplittableRandom(1);
    double uniform = 0;
    double exp = 0;
    double inverted = 0;
    double gauss = 0;
    int n = 20000;
    Dist u = Dist.parse("uniform 1 100 0");
    Dist e = Dist.parse("exp 1 100 0");
    Dist i = Dist.parse("exp 1 100 1");
    Dist g = Dist.parse("gaussian 1 100 0 40 5");
    Dist x = Dist.parse("extreme 1 1000 0 1.5");
    for (int k = 0; k < n; k++) {
      long a = u.sample(r);
      long b = e.sample(r);
      long c = i.sample(r);
      long d = g.sample(r);
      long f = x.sample(r);
      assertTrue(a >= 1 && a <= 100 && b >= 1 && b <= 100 && c >= 1 && c <= 100 && d >= 1 && d <= 100);
      assertTrue(f >= 1 && f <= 1000);
      uniform += a;
      exp += b;
      inverted += c;
      gauss += d;
    }
    assertEquals(50.5, uniform / n, 1.5);
    assertTrue(exp / n < 30, "exp leans to its low end: " + exp / n);
    assertTrue(inverted / n > 70, "an inverted exp to its high end: " + inverted / n);
    assertEquals(40.0, gauss / n, 0.5);
    assertEquals(5L, Dist.parse("fixed 5 5 0").sample(r));
    Dist seq = Dist.parse("seq 1 3 0");
    assertEquals(List.of(1L, 2L, 3L, 1L), List.of(seq.nextInTurn(r), seq.nextInTurn(r), seq.nextInTurn(r),
        seq.nextInTurn(r)));
  }

  @Test
  void uuidsHaveTheirVersions() {
    assertEquals(1, ((UUID) ProfileData.value("timeuuid", 42, 0)).version());
    assertEquals(4, ((UUID) ProfileData.value("uuid", 42, 0)).version());
    assertEquals(12, ((String) ProfileData.value("text", 42, 12)).length());
  }
}
