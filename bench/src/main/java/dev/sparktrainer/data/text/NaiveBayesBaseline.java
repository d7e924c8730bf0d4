package dev.sparktrainer.data.text;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.ml.classification.NaiveBayes;
import org.apache.spark.ml.classification.NaiveBayesModel;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.ml.linalg.Vectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The text baseline ({@code bin/bench-text-baseline}): multinomial Naive Bayes with Laplace
 * smoothing over the token ids that {@code convert --tokenize} wrote, trained on DIR/train and
 * scored on DIR/test, the same split and ids the sequence models train on.
 *
 * <p>Features are token counts over the vocabulary of DIR/vocab.txt without its specials (ids 0
 * {@code <pad>} and 1 {@code <unk>} are skipped, as scikit-learn's {@code CountVectorizer} drops
 * words outside its vocabulary). With smoothing α: {@code log P(c) = log((n_c + α) / (n + Kα))} and
 * {@code log P(w | c) = log((count(w, c) + α) / (tokens(c) + Vα))}; a record's class is the argmax
 * of {@code log P(c) + Σ_w count(w) log P(w | c)} (the lower class on a tie). Spark ML's {@code
 * NaiveBayes} (multinomial, the same smoothing) is fitted on the same vectors as a check: the table
 * gives its accuracy and how many test predictions agree.
 *
 * <p>Usage: {@code NaiveBayesBaseline --data DIR [--ids-column text] [--label-column label]
 * [--alpha 1] [--no-spark-ml]}.
 */
public final class NaiveBayesBaseline {
  private NaiveBayesBaseline() {}

  /** One record: its token ids (specials dropped, shifted by -2) and class. */
  private record Doc(int[] ids, int label, int length) {}

  public static void main(String[] args) throws IOException {
    String data = null;
    String idsColumn = "text";
    String labelColumn = "label";
    double alpha = 1;
    boolean sparkMl = true;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--data" -> data = args[++i];
        case "--ids-column" -> idsColumn = args[++i];
        case "--label-column" -> labelColumn = args[++i];
        case "--alpha" -> alpha = Double.parseDouble(args[++i]);
        case "--no-spark-ml" -> sparkMl = false;
        default ->
            throw new IllegalArgumentException(
                "Unknown argument "
                    + args[i]
                    + " (expected --data DIR, --ids-column, --label-column, --alpha, --no-spark-ml)");
      }
    }
    if (data == null) {
      throw new IllegalArgumentException(
          "--data DIR is required: the output of convert --tokenize (DIR/train, DIR/test,"
              + " DIR/vocab.txt)");
    }
    if (!(alpha > 0)) {
      throw new IllegalArgumentException("Invalid --alpha " + alpha + ": expected > 0");
    }
    SparkSession spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("bench-text-baseline")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate();
    try {
      Path vocabFile = new Path(data, Vocabulary.FILE_NAME);
      FileSystem fs = vocabFile.getFileSystem(spark.sparkContext().hadoopConfiguration());
      Vocabulary vocab = Vocabulary.read(fs, vocabFile);
      int v = vocab.size() - 2;
      List<Doc> train =
          read(spark, new Path(data, "train").toString(), idsColumn, labelColumn, vocab);
      List<Doc> test =
          read(spark, new Path(data, "test").toString(), idsColumn, labelColumn, vocab);
      int k = 0;
      for (Doc d : train) {
        k = Math.max(k, d.label() + 1);
      }
      for (Doc d : test) {
        k = Math.max(k, d.label() + 1);
      }

      // Fit: counts per class and token, then log probabilities.
      long[] docs = new long[k];
      double[][] counts = new double[k][v];
      double[] tokens = new double[k];
      for (Doc d : train) {
        docs[d.label()]++;
        for (int id : d.ids()) {
          counts[d.label()][id]++;
          tokens[d.label()]++;
        }
      }
      double[] logPrior = new double[k];
      double[][] logLikelihood = new double[k][v];
      for (int c = 0; c < k; c++) {
        logPrior[c] = Math.log((docs[c] + alpha) / (train.size() + k * alpha));
        double denominator = Math.log(tokens[c] + v * alpha);
        for (int w = 0; w < v; w++) {
          logLikelihood[c][w] = Math.log(counts[c][w] + alpha) - denominator;
        }
      }
      int[] predicted = new int[test.size()];
      int correct = 0;
      long[] testPerClass = new long[k];
      for (int i = 0; i < test.size(); i++) {
        Doc d = test.get(i);
        int best = 0;
        double bestScore = Double.NEGATIVE_INFINITY;
        for (int c = 0; c < k; c++) {
          double s = logPrior[c];
          for (int id : d.ids()) {
            s += logLikelihood[c][id];
          }
          if (s > bestScore) {
            bestScore = s;
            best = c;
          }
        }
        predicted[i] = best;
        correct += best == d.label() ? 1 : 0;
        testPerClass[d.label()]++;
      }
      int majority = 0;
      for (int c = 1; c < k; c++) {
        majority = docs[c] > docs[majority] ? c : majority;
      }

      System.out.printf(
          Locale.ROOT,
          "data %s: %d classes, train %d records, test %d records, vocabulary %d (+ <pad>, <unk>)%n",
          data,
          k,
          train.size(),
          test.size(),
          v);
      StringBuilder perClass = new StringBuilder();
      for (int c = 0; c < k; c++) {
        perClass.append(c == 0 ? "" : ", ").append(c).append(": ").append(docs[c]).append('/');
        perClass.append(testPerClass[c]);
      }
      System.out.println("records per class (train/test): " + perClass);
      int[] lengths = train.stream().mapToInt(Doc::length).sorted().toArray();
      if (lengths.length > 0) {
        System.out.printf(
            Locale.ROOT,
            "tokens per training record: median %d, 95th percentile %d, max %d, empty %d%n",
            lengths[(lengths.length - 1) / 2],
            lengths[(int) Math.ceil(0.95 * lengths.length) - 1],
            lengths[lengths.length - 1],
            java.util.Arrays.stream(lengths).filter(x -> x == 0).count());
      }
      System.out.printf(Locale.ROOT, "%n%-44s %10s%n", "held-out accuracy", "");
      System.out.printf(
          Locale.ROOT,
          "%-44s %9.2f%%  (%d of %d)%n",
          "Naive Bayes (multinomial, alpha " + alpha + ")",
          100.0 * correct / test.size(),
          correct,
          test.size());
      System.out.printf(
          Locale.ROOT,
          "%-44s %9.2f%%%n",
          "majority class (" + majority + ")",
          100.0 * testPerClass[majority] / test.size());
      if (sparkMl) {
        checkWithSparkMl(spark, train, test, k, v, alpha, predicted);
      }
    } finally {
      spark.stop();
    }
  }

  private static List<Doc> read(
      SparkSession spark, String dir, String idsColumn, String labelColumn, Vocabulary vocab) {
    Dataset<Row> rows =
        spark
            .read()
            .format("tfrecord")
            .schema(
                new StructType()
                    .add(idsColumn, DataTypes.createArrayType(DataTypes.LongType), true)
                    .add(labelColumn, DataTypes.LongType, true))
            .load(dir);
    List<Doc> out = new ArrayList<>();
    Iterator<Row> it = rows.toLocalIterator();
    while (it.hasNext()) {
      Row r = it.next();
      if (r.isNullAt(1)) {
        throw new IllegalArgumentException("A record in " + dir + " has no " + labelColumn);
      }
      List<Long> ids = r.isNullAt(0) ? List.of() : r.getList(0);
      int[] kept = new int[ids.size()];
      int n = 0;
      for (long id : ids) {
        if (id < 0 || id >= vocab.size()) {
          throw new IllegalArgumentException(
              "Token id "
                  + id
                  + " in "
                  + dir
                  + " is outside the vocabulary ("
                  + vocab.size()
                  + ")");
        }
        if (id >= 2) {
          kept[n++] = (int) id - 2;
        }
      }
      long label = r.getLong(1);
      if (label < 0 || label > 10_000) {
        throw new IllegalArgumentException(
            "Label " + label + " in " + dir + ": expected a class index 0..K-1");
      }
      out.add(new Doc(java.util.Arrays.copyOf(kept, n), (int) label, ids.size()));
    }
    return out;
  }

  /** Spark ML's NaiveBayes on the same count vectors: its accuracy and agreement with ours. */
  private static void checkWithSparkMl(
      SparkSession spark, List<Doc> train, List<Doc> test, int k, int v, double alpha, int[] ours) {
    StructType schema =
        new StructType()
            .add("label", DataTypes.DoubleType, false)
            .add("features", SQLDataTypes.VectorType(), false);
    NaiveBayesModel model =
        new NaiveBayes()
            .setModelType("multinomial")
            .setSmoothing(alpha)
            .fit(spark.createDataFrame(vectors(train, v), schema));
    List<Row> scored =
        model
            .transform(spark.createDataFrame(vectors(test, v), schema))
            .select("label", "prediction")
            .collectAsList();
    int correct = 0;
    int agree = 0;
    for (int i = 0; i < scored.size(); i++) {
      int p = (int) scored.get(i).getDouble(1);
      correct += p == (int) scored.get(i).getDouble(0) ? 1 : 0;
      agree += p == ours[i] ? 1 : 0;
    }
    System.out.printf(
        Locale.ROOT,
        "%-44s %9.2f%%  (%d of %d; agrees with ours on %d of %d)%n",
        "check: Spark ML NaiveBayes (same vectors)",
        100.0 * correct / scored.size(),
        correct,
        scored.size(),
        agree,
        scored.size());
  }

  private static List<Row> vectors(List<Doc> docs, int v) {
    List<Row> rows = new ArrayList<>(docs.size());
    for (Doc d : docs) {
      java.util.TreeMap<Integer, Double> counts = new java.util.TreeMap<>();
      for (int id : d.ids()) {
        counts.merge(id, 1.0, Double::sum);
      }
      int[] idx = counts.keySet().stream().mapToInt(Integer::intValue).toArray();
      double[] val = counts.values().stream().mapToDouble(Double::doubleValue).toArray();
      rows.add(RowFactory.create((double) d.label(), Vectors.sparse(v, idx, val)));
    }
    return rows;
  }
}
