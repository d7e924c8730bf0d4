package dev.sparktrainer.train;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.tracker.Tracker;
import dev.sparktrainer.data.Batch;
import dev.sparktrainer.data.BatchSource;
import dev.sparktrainer.model.CnnSpec;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import java.io.DataInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.zip.GZIPInputStream;
import org.apache.spark.sql.SparkSession;

/**
 * bin/bench-train: samples/s of a plain DJL loop vs the Spark trainer with 1 and 2 workers on
 * Fashion-MNIST (MLP 784-256-128-10, Adam 1e-3, per-worker batch 64; optionally the small CNN).
 * Not a test. Args: --data DIR --out FILE --epochs N --models mlp,cnn --modes plain-djl,spark-1,spark-2
 */
public final class TrainBenchmark {
  private TrainBenchmark() {}

  public static void main(String[] args) throws Exception {
    String data = "/usr/share/datasets/fashion-mnist";
    String out = "target/bench/train.jsonl";
    int epochs = 2;
    List<String> models = List.of("mlp");
    List<String> modes = List.of("plain-djl", "spark-1", "spark-2");
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--data" -> data = args[i + 1];
        case "--out" -> out = args[i + 1];
        case "--epochs" -> epochs = Integer.parseInt(args[i + 1]);
        case "--models" -> models = List.of(args[i + 1].split(","));
        case "--modes" -> modes = List.of(args[i + 1].split(","));
        default -> throw new IllegalArgumentException("Unknown option " + args[i]);
      }
    }
    InMemoryDataset train = idx(data + "/train-images-idx3-ubyte.gz", data + "/train-labels-idx1-ubyte.gz");
    InMemoryDataset test = idx(data + "/t10k-images-idx3-ubyte.gz", data + "/t10k-labels-idx1-ubyte.gz");
    int cores = Runtime.getRuntime().availableProcessors();
    Files.createDirectories(Path.of(out).toAbsolutePath().getParent());
    List<String[]> rows = new ArrayList<>();
    try (PrintStream json = new PrintStream(new java.io.FileOutputStream(out, true), true, "UTF-8")) {
      for (String model : models) {
        ModelSpec spec = model.equals("cnn") ? CnnSpec.of(1, 28, 28, 10) : MlpSpec.of(784, 10, 256, 128);
        for (String mode : modes) {
          double[] r =
              mode.equals("plain-djl")
                  ? plain(spec, train, test, epochs)
                  : spark(spec, train, test, epochs, mode.equals("spark-1") ? 1 : 2, cores);
          String line = String.format(Locale.ROOT,
              "{\"mode\":\"%s\",\"model\":\"%s\",\"samples_per_s\":%.1f,\"test_accuracy\":%.4f,"
                  + "\"wait_fraction\":%.4f,\"allreduce_fraction\":%.4f,\"compute_fraction\":%.4f,"
                  + "\"optimizer_fraction\":%.4f,\"epochs\":%d,\"cores\":%d,\"cluster\":\"%s\"}",
              mode, model, r[0], r[1], r[2], r[3], r[4], r[5], epochs, cores,
              mode.equals("plain-djl") ? "none" : "local-one-jvm");
          json.println(line);
          System.err.println(line);
          rows.add(new String[] {model, mode, String.format(Locale.ROOT, "%.0f", r[0]),
              String.format(Locale.ROOT, "%.4f", r[1]), String.format(Locale.ROOT, "%.3f", r[2]),
              String.format(Locale.ROOT, "%.3f", r[3]), String.format(Locale.ROOT, "%.3f", r[4])});
        }
      }
    }
    System.out.printf("%-5s %-10s %12s %9s %7s %10s %8s %12s%n", "model", "mode", "samples/s", "test_acc",
        "wait", "allreduce", "compute", "vs plain");
    for (String[] r : rows) {
      double base = rows.stream().filter(x -> x[0].equals(r[0]) && x[1].equals("plain-djl"))
          .mapToDouble(x -> Double.parseDouble(x[2])).findFirst().orElse(Double.NaN);
      System.out.printf(Locale.ROOT, "%-5s %-10s %12s %9s %7s %10s %8s %11.2fx%n", r[0], r[1], r[2], r[3], r[4], r[5],
          r[6], Double.parseDouble(r[2]) / base);
    }
  }

  /** samples/s, test accuracy, wait, all-reduce, compute and optimizer fractions of step time. */
  private static double[] spark(ModelSpec spec, InMemoryDataset train, InMemoryDataset test, int epochs, int workers,
      int cores) {
    SparkSession spark = SparkSession.builder()
        .master("local[" + cores + "]")
        .appName("bench-train")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.task.cpus", Integer.toString(cores / workers))
        .getOrCreate();
    try {
      TrainedModel m = DistributedTrainer.builder()
          .setModel(spec)
          .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
          .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-3f).build())
          .setTrainingData(train.trainBatches(64, 1, true))
          .optValidationData(test.evalBatches(1000))
          .setNumWorkers(workers)
          .setEpochs(epochs)
          .optRingHost("127.0.0.1")
          .build()
          .fit(spark);
      // Throughput of the last epoch (the first includes JIT and native warm-up).
      EpochMetrics e = m.history().last();
      double step = e.stepSeconds();
      return new double[] {e.samplesPerSecond(), e.validationAccuracy(), e.dataWaitSeconds() / step,
          e.allReduceSeconds() / step, e.computeSeconds() / step, e.optimizerSeconds() / step};
    } finally {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  /** The baseline: DJL's own Trainer and Adam in one process, same batches. */
  private static double[] plain(ModelSpec spec, InMemoryDataset train, InMemoryDataset test, int epochs) {
    try (Model model = Model.newInstance("plain");
        NDManager manager = NDManager.newBaseManager()) {
      model.setBlock(spec.newBlock());
      DefaultTrainingConfig config = new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
          .optOptimizer(ai.djl.training.optimizer.Optimizer.adam().optLearningRateTracker(Tracker.fixed(1e-3f)).build());
      try (Trainer trainer = model.newTrainer(config);
          BatchSource src = train.trainBatches(64, 1, true).create(0, 1, manager)) {
        trainer.initialize(spec.batchInputShapes(1));
        double samplesPerS = 0;
        for (int e = 0; e < epochs; e++) {
          long n = 0;
          long t0 = System.nanoTime();
          for (Iterator<Batch> it = src.epoch(e, 0); it.hasNext(); ) {
            try (Batch b = it.next();
                GradientCollector gc = trainer.newGradientCollector()) {
              NDList pred = trainer.forward(b.features());
              NDArray l = trainer.getLoss().evaluate(new NDList(b.labels()), pred);
              gc.backward(l);
              n += b.size();
            }
            trainer.step();
          }
          samplesPerS = n / ((System.nanoTime() - t0) / 1e9);
        }
        long correct = 0;
        try (BatchSource ts = test.evalBatches(1000).create(0, 1, manager)) {
          for (Iterator<Batch> it = ts.epoch(0, 0); it.hasNext(); ) {
            try (Batch b = it.next()) {
              NDArray pred = trainer.evaluate(b.features()).head();
              correct += LossSpec.SOFTMAX_CROSS_ENTROPY.correct(b.labels(), pred);
            }
          }
        }
        return new double[] {samplesPerS, correct / (double) test.size(), Double.NaN, 0, Double.NaN, Double.NaN};
      }
    }
  }

  static InMemoryDataset idx(String images, String labels) throws IOException {
    try (DataInputStream im = new DataInputStream(new GZIPInputStream(new FileInputStream(images), 1 << 16));
        DataInputStream lb = new DataInputStream(new GZIPInputStream(new FileInputStream(labels), 1 << 16))) {
      if (im.readInt() != 2051 || lb.readInt() != 2049) {
        throw new IOException("Not IDX image/label files: " + images + ", " + labels);
      }
      int n = im.readInt();
      int h = im.readInt();
      int w = im.readInt();
      if (lb.readInt() != n) {
        throw new IOException("Image and label counts differ");
      }
      byte[] px = new byte[n * h * w];
      im.readFully(px);
      byte[] y = new byte[n];
      lb.readFully(y);
      float[] f = new float[px.length];
      for (int i = 0; i < px.length; i++) {
        f[i] = (px[i] & 0xff) / 255f;
      }
      long[] l = new long[n];
      for (int i = 0; i < n; i++) {
        l[i] = y[i];
      }
      return InMemoryDataset.ofClasses(f, new Shape(h * w), l);
    }
  }
}
