package dev.sparktrainer.data;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.max;
import static org.apache.spark.sql.functions.min;
import static org.apache.spark.sql.functions.when;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.ArrayType;

/**
 * One pass over a DataFrame's sequence and int64 columns: what the command line ({@code train}) and
 * the Estimator both need before building a sequence model — each column's lengths (median, 95th
 * percentile, longest; how many exceed the maximum length) and, for ids, the smallest and largest
 * id, from which the default vocabulary size and maximum length come.
 */
public final class SequenceStatistics {
  private SequenceStatistics() {}

  /**
   * What one pass found in a sequence column (lengths as stored, before any truncation; a null is
   * an empty sequence).
   *
   * @param minId the smallest id (0 for a float column, or no id at all)
   * @param maxId the largest id (-1 for a float column, or no id at all)
   * @param longer how many sequences are longer than the maximum length asked for (0 without one)
   */
  public record Stats(
      String column,
      long records,
      long longest,
      long median,
      long p95,
      long minId,
      long maxId,
      long longer) {

    /** The default vocabulary size of an ids column: the largest id + 1, at least 2. */
    public long defaultVocabSize() {
      return Math.max(2, maxId + 1);
    }

    /** The default maximum length: the longest sequence, at least 1. */
    public int defaultMaxLength() {
      return (int) Math.min(Integer.MAX_VALUE, Math.max(1, longest));
    }

    /**
     * Fails unless every id is in {@code [0, vocab)}, naming the column, {@code where} the data is,
     * the ids' range, and {@code source} (where the vocabulary size came from).
     */
    public void checkVocabulary(String where, long vocab, String source) {
      if (minId < 0 || maxId >= vocab) {
        throw new IllegalArgumentException(
            "Feature column '"
                + column
                + "' in "
                + where
                + " holds ids "
                + minId
                + ".."
                + maxId
                + ": outside the vocabulary 0.."
                + (vocab - 1)
                + " ("
                + source
                + ")");
      }
    }
  }

  /**
   * The statistics of {@code columns} of {@code df} (each a number or an array of numbers; {@code
   * ids.get(i)}: whether column {@code i} holds ids) in one aggregation; {@code maxLength} > 0
   * counts the sequences longer than it.
   */
  public static Map<String, Stats> of(
      Dataset<Row> df, List<String> columns, List<Boolean> ids, int maxLength) {
    Map<String, Stats> out = new LinkedHashMap<>();
    if (columns.isEmpty()) {
      return out;
    }
    List<Column> aggs = new ArrayList<>();
    for (String name : columns) {
      Column c = col(name);
      boolean array = df.schema().apply(name).dataType() instanceof ArrayType;
      Column len =
          array
              ? when(c.isNull(), 0).otherwise(functions.size(c))
              : when(c.isNull(), 0).otherwise(1);
      Column lo = array ? functions.array_min(c) : c;
      Column hi = array ? functions.array_max(c) : c;
      aggs.add(functions.count(functions.lit(1)));
      aggs.add(max(len));
      aggs.add(
          functions.percentile_approx(
              len, functions.array(functions.lit(0.5), functions.lit(0.95)), functions.lit(10000)));
      aggs.add(min(lo));
      aggs.add(max(hi));
      aggs.add(
          functions.sum(
              when(len.gt(maxLength > 0 ? maxLength : Integer.MAX_VALUE), 1).otherwise(0)));
    }
    Row r = df.agg(aggs.get(0), aggs.subList(1, aggs.size()).toArray(new Column[0])).first();
    for (int i = 0; i < columns.size(); i++) {
      int at = 6 * i;
      List<Object> pct = r.getList(at + 2);
      boolean isIds = ids.get(i);
      out.put(
          columns.get(i),
          new Stats(
              columns.get(i),
              r.getLong(at),
              r.isNullAt(at + 1) ? 0 : ((Number) r.get(at + 1)).longValue(),
              pct == null || pct.isEmpty() ? 0 : ((Number) pct.get(0)).longValue(),
              pct == null || pct.size() < 2 ? 0 : ((Number) pct.get(1)).longValue(),
              !isIds || r.isNullAt(at + 3) ? 0 : ((Number) r.get(at + 3)).longValue(),
              !isIds || r.isNullAt(at + 4) ? -1 : ((Number) r.get(at + 4)).longValue(),
              r.isNullAt(at + 5) ? 0 : ((Number) r.get(at + 5)).longValue()));
    }
    return out;
  }
}
