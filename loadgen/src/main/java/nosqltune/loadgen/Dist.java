package nosqltune.loadgen;

import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A cassandra-stress distribution over the integers {@code low..high}, as {@code workloads/profile.py} writes it:
 * {@code "KIND LOW HIGH INVERTED [P1 [P2]]"}, e.g. {@code "uniform 1 10 0"}, {@code "gaussian 1 100 0 3"} (the range
 * spans 3 standard deviations either side of its middle), {@code "gaussian 1 100 0 40 5"} (mean 40, deviation 5),
 * {@code "exp 1 1000 1"} (inverted: the mass at the high end), {@code "extreme 1 1000 0 1.5"} (Weibull, shape 1.5),
 * {@code "qextreme 1 1000 0 1.5 10"} (the same in 10 steps), {@code "seq 1 100 0"} (in turn, shared by the
 * threads; drawn like uniform where a seeded draw is asked for), {@code "fixed 5 5 0"}.
 *
 * <p>Skewed draws are cut to the range by drawing again (at most 16 times, then the range's end): exp puts 1% of
 * its mass past the high end before the cut, extreme scales its Weibull so that its 99th percentile is the high end.
 */
public final class Dist {

  public final String kind;
  public final long low;
  public final long high;
  public final boolean inverted;
  private final double p1;
  private final double p2;
  private final int params;
  private final AtomicLong next;

  private Dist(String kind, long low, long high, boolean inverted, double p1, double p2, int params) {
    this.kind = kind;
    this.low = low;
    this.high = high;
    this.inverted = inverted;
    this.p1 = p1;
    this.p2 = p2;
    this.params = params;
    this.next = new AtomicLong(low);
  }

  public static Dist parse(String text) {
    String[] f = text.trim().split("\\s+");
    if (f.length < 4) {
      throw new IllegalArgumentException("a distribution is KIND LOW HIGH INVERTED [P1 [P2]], got '" + text + "'");
    }
    long low = Long.parseLong(f[1]);
    long high = Long.parseLong(f[2]);
    if (low > high) {
      throw new IllegalArgumentException("a distribution's low is above its high: '" + text + "'");
    }
    double p1 = f.length > 4 ? Double.parseDouble(f[4]) : 0;
    double p2 = f.length > 5 ? Double.parseDouble(f[5]) : 0;
    switch (f[0]) {
      case "fixed":
      case "uniform":
      case "gaussian":
      case "exp":
      case "extreme":
      case "qextreme":
      case "seq":
        return new Dist(f[0], low, high, f[3].equals("1") || f[3].equalsIgnoreCase("true"), p1, p2, f.length - 4);
      default:
        throw new IllegalArgumentException("unknown distribution " + f[0]);
    }
  }

  /** A draw from {@code r}. */
  public long sample(SplittableRandom r) {
    long v = draw(r);
    return inverted ? high - (v - low) : v;
  }

  /** The next value in turn (seq), or a draw (every other kind). */
  public long nextInTurn(SplittableRandom r) {
    if (!kind.equals("seq")) {
      return sample(r);
    }
    long span = high - low + 1;
    long v = low + Math.floorMod(next.getAndIncrement() - low, span);
    return inverted ? high - (v - low) : v;
  }

  private long draw(SplittableRandom r) {
    long span = high - low + 1;
    switch (kind) {
      case "fixed":
        return low;
      case "uniform":
      case "seq":
        return span <= 0 ? r.nextLong() : low + r.nextLong(span);
      case "gaussian": {
        double mean = params == 2 ? p1 : (low + high) / 2.0;
        double stdev = params == 2 ? p2 : (high - low) / 2.0 / (params == 1 ? p1 : 3.0);
        return cut(r, () -> mean + r.nextGaussian() * stdev);
      }
      case "exp": {
        double scale = (high - low) / Math.log(100.0);
        return cut(r, () -> low - Math.log(1 - r.nextDouble()) * scale);
      }
      case "extreme":
      case "qextreme": {
        double shape = p1 > 0 ? p1 : 1.0;
        double scale = (high - low) / Math.pow(Math.log(100.0), 1.0 / shape);
        long v = cut(r, () -> low + scale * Math.pow(-Math.log(1 - r.nextDouble()), 1.0 / shape));
        if (kind.equals("qextreme") && p2 >= 1) {   // quantised into p2 steps of the range
          double step = Math.max(1.0, (high - low + 1) / p2);
          v = low + (long) (Math.floor((v - low) / step) * step);
        }
        return v;
      }
      default:
        throw new IllegalStateException(kind);
    }
  }

  private interface Draw {
    double get();
  }

  /** A continuous draw rounded to the nearest integer (so its mean stays), drawn again while outside the range. */
  private long cut(SplittableRandom r, Draw d) {
    for (int i = 0; i < 16; i++) {
      long v = Math.round(d.get());
      if (v >= low && v <= high) {
        return v;
      }
    }
    return d.get() < low ? low : high;
  }

  /** The mean of many draws (an estimate for sizes). */
  public double mean(int draws) {
    SplittableRandom r = new SplittableRandom(7);
    double total = 0;
    for (int i = 0; i < draws; i++) {
      total += sample(r);
    }
    return total / draws;
  }
}
