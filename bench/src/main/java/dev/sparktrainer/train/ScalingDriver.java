package dev.sparktrainer.train;

import static dev.sparktrainer.train.BenchSupport.loadAverage;
import static dev.sparktrainer.train.BenchSupport.required;
import static dev.sparktrainer.train.BenchSupport.toJson;

import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.step.OptimizerPlacement;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.SparkSession;

/**
 * The application bin/bench-scaling submits to its cluster, one per model ({@code ScalingBenchmark
 * driver ...}): trains the runs of {@code --plan} in order, setting the link's rate before each
 * where it changes, and appends one JSON line of figures per run to {@code --results}.
 */
final class ScalingDriver {
  private static final float LEARNING_RATE = 1e-3f;

  /** One training run of the plan, as {@code --plan} carries it ({@link #encode}). */
  record Run(String mode, boolean overlap, String placement, String link, int round) {
    String encode() {
      return mode + "/" + (overlap ? "on" : "off") + "/" + placement + "/" + link + "/" + round;
    }

    static Run decode(String s) {
      String[] f = s.split("/");
      return new Run(f[0], f[1].equals("on"), f[2], f[3], Integer.parseInt(f[4]));
    }
  }

  private ScalingDriver() {}

  static void run(Map<String, String> o) throws Exception {
    String model = required(o, "model");
    ModelSpec spec = ScalingModels.spec(model);
    int batch = Integer.parseInt(required(o, "batch"));
    int epochs = Integer.parseInt(required(o, "epochs"));
    Path results = Path.of(required(o, "results"));
    String linkCommand = required(o, "link-command");
    String link = null;
    SparkSession spark = SparkSession.builder().appName("bench-scaling-" + model).getOrCreate();
    try {
      for (String encoded : required(o, "plan").split(",")) {
        Run run = Run.decode(encoded);
        if (!run.link().equals(link)) {
          ScalingLink.setLink(linkCommand, run.link());
          link = run.link();
        }
        int workers = run.mode().equals("spark-2") ? 2 : 1;
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("mode", run.mode());
        r.put("overlap", run.overlap());
        r.put("placement", run.placement());
        r.put("link", run.link());
        r.put("round", run.round());
        r.put("load_avg_before", loadAverage());
        long t0 = System.nanoTime();
        try {
          DatasetSpec train =
              DatasetSpec.builder()
                  .addPath(required(o, "train-" + workers))
                  .optFormat(DatasetSpec.Format.TFRECORD)
                  .addFeature("pixels", ScalingModels.featureShape(model))
                  .setLabel("label", DatasetSpec.LabelType.INT)
                  .build();
          DistributedTrainerBuilder builder =
              DistributedTrainer.builder()
                  .setTrainingData(
                      train, PipelineOptions.builder().optBatchSize(batch).optSeed(7).build())
                  .setModel(spec)
                  .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
                  .setOptimizer(OptimizerSpec.adam().optLearningRate(LEARNING_RATE).build())
                  .setNumWorkers(workers)
                  .optEpochs(epochs)
                  .optSeed(1)
                  .optRingTransport(RingTransport.TCP)
                  .optOverlap(run.overlap())
                  .optOptimizerPlacement(OptimizerPlacement.parse("placement", run.placement()));
          if (o.containsKey("bucket-mb")) {
            builder.optBucketMb(Integer.parseInt(o.get("bucket-mb")));
          }
          TrainedModel m = builder.build().fit(spark);
          r.putAll(figures(m.history().epochs()));
          for (EpochMetrics e : m.history().epochs()) {
            System.out.println(run.encode() + " epoch " + e.toJson());
          }
        } catch (Exception e) {
          // Recorded and reported; the next run still gets its chance.
          System.err.println(run.encode() + " failed:");
          e.printStackTrace();
          r.put("error", String.valueOf(e).replace('\n', ' '));
        }
        r.put("wall_s", (System.nanoTime() - t0) / 1e9);
        r.put("load_avg_after", loadAverage());
        r.put("time", Instant.now().toString());
        Files.writeString(
            results,
            toJson(r) + "\n",
            StandardCharsets.UTF_8,
            StandardOpenOption.CREATE,
            StandardOpenOption.APPEND);
      }
    } finally {
      spark.stop();
    }
  }

  /**
   * A run's figures over the epochs after the first (all of them when there is one): samples/s, the
   * step-time fractions, and the overlap figures from the summed seconds.
   */
  static Map<String, Object> figures(List<EpochMetrics> all) {
    List<EpochMetrics> measured = all.size() > 1 ? all.subList(1, all.size()) : all;
    double samples = 0;
    double seconds = 0;
    double wait = 0;
    double compute = 0;
    double exposed = 0;
    double optimizer = 0;
    double backward = 0;
    double communication = 0;
    long steps = 0;
    for (EpochMetrics e : measured) {
      samples += e.samples();
      seconds += e.samplesPerSecond() > 0 ? e.samples() / e.samplesPerSecond() : Double.NaN;
      wait += e.dataWaitSeconds();
      compute += e.computeSeconds();
      exposed += e.allReduceSeconds();
      optimizer += e.optimizerSeconds();
      backward += e.backwardSeconds();
      communication += e.communicationSeconds();
      steps += e.steps();
    }
    double step = wait + compute + exposed + optimizer;
    double hidden = Math.max(0, communication - exposed);
    double limit = Math.min(communication, backward);
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("samples_per_s", samples / seconds);
    r.put("data_wait_fraction", wait / step);
    r.put("compute_fraction", compute / step);
    r.put("exposed_comm_fraction", exposed / step);
    r.put("optimizer_fraction", optimizer / step);
    // As EpochMetrics.overlapRatio, over the measured epochs' sums.
    r.put("overlap_ratio", limit > 0 ? Math.min(1, hidden / limit) : Double.NaN);
    r.put("comm_to_backward", backward > 0 ? communication / backward : Double.NaN);
    r.put("step_ms", 1e3 * step / steps);
    r.put("backward_ms", 1e3 * backward / steps);
    r.put("communication_ms", 1e3 * communication / steps);
    r.put("exposed_comm_ms", 1e3 * exposed / steps);
    r.put("optimizer_ms", 1e3 * optimizer / steps);
    r.put("steps", steps / measured.size());
    r.put("measured_epochs", measured.size());
    return r;
  }
}
