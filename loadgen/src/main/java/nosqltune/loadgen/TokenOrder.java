package nosqltune.loadgen;

import java.util.function.IntBinaryOperator;

/**
 * The order in which Murmur3Partitioner lays partitions out (by token, then by the key's bytes, unsigned), as the
 * positions of {@code count} items whose tokens are given: a stable merge sort of their numbers, without boxing
 * them. {@code tie} compares two items' keys, for the rare tokens that are equal.
 */
final class TokenOrder {

  private TokenOrder() {
  }

  static int[] of(long[] tokens, int count, IntBinaryOperator tie) {
    int[] order = new int[count];
    for (int i = 0; i < count; i++) {
      order[i] = i;
    }
    sort(order, new int[count], 0, count, tokens, tie);
    return order;
  }

  private static int compare(int x, int y, long[] tokens, IntBinaryOperator tie) {
    int c = Long.compare(tokens[x], tokens[y]);
    return c != 0 ? c : tie.applyAsInt(x, y);
  }

  private static void sort(int[] a, int[] tmp, int lo, int hi, long[] tokens, IntBinaryOperator tie) {
    if (hi - lo <= 16) {
      for (int i = lo + 1; i < hi; i++) {
        int x = a[i];
        int j = i - 1;
        for (; j >= lo && compare(a[j], x, tokens, tie) > 0; j--) {
          a[j + 1] = a[j];
        }
        a[j + 1] = x;
      }
      return;
    }
    int mid = (lo + hi) >>> 1;
    sort(a, tmp, lo, mid, tokens, tie);
    sort(a, tmp, mid, hi, tokens, tie);
    if (compare(a[mid - 1], a[mid], tokens, tie) <= 0) {
      return;
    }
    System.arraycopy(a, lo, tmp, lo, hi - lo);
    int i = lo;
    int j = mid;
    int k = lo;
    while (i < mid && j < hi) {
      a[k++] = compare(tmp[j], tmp[i], tokens, tie) < 0 ? tmp[j++] : tmp[i++];
    }
    while (i < mid) {
      a[k++] = tmp[i++];
    }
    while (j < hi) {
      a[k++] = tmp[j++];
    }
  }
}
