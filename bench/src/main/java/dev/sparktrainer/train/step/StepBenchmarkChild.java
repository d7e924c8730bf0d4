package dev.sparktrainer.train.step;

import static dev.sparktrainer.train.BenchSupport.required;
import static dev.sparktrainer.train.BenchSupport.toJson;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.jni.JniUtils;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.JobSecret;
import dev.sparktrainer.collective.RingListener;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.optim.Optimizer;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.DistributedTrainer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One rank of one configuration of bin/bench-step, in a child JVM of its own ({@code StepBenchmark
 * child ...}, started by {@link StepConfig#run}): {@link ReplicaSet} + {@link TrainStep} as {@code
 * TrainStepTest} drives them, through their package-private constructors and fields. With 2 workers
 * it prints {@code ADDR host:port} and reads {@code PEERS a,b} for its ring; then warm-up steps,
 * timed steps, the optional phased and profiled steps, and one {@code RESULT json} line. It halts
 * when its parent closes its stdin.
 */
final class StepBenchmarkChild {
  /** The ring's secret, from the parent. */
  static final String SECRET_ENV = "SPARK_TRAINER_RING_SECRET";

  private static final int INIT_SEED = 7;

  /**
   * A sequence model's batches (ids, mask), one per entry of {@link StepModels#SEQUENCE_T}, step
   * {@code s} taking batch {@code s % 16}; null for the other models. Set once per child process.
   */
  private static ByteBuffer[][] sequences;

  private StepBenchmarkChild() {}

  static int run(Map<String, String> o) throws Exception {
    String model = required(o, "model");
    int rank = Integer.parseInt(required(o, "rank"));
    int workers = Integer.parseInt(required(o, "workers"));
    OptimizerPlacement placement = OptimizerPlacement.parse("placement", required(o, "placement"));
    boolean gpu = "gpu".equals(required(o, "device"));
    int batch = Integer.parseInt(required(o, "batch"));
    int image = Integer.parseInt(required(o, "image"));
    int steps = Integer.parseInt(required(o, "steps"));
    int warmup = Integer.parseInt(required(o, "warmup"));
    int threads = Integer.parseInt(required(o, "threads"));
    boolean overlap = "on".equals(required(o, "overlap"));
    boolean uint8 = "uint8".equals(o.getOrDefault("image-transfer", "float32"));
    Precision precision = Precision.parse("precision", o.getOrDefault("precision", "fp32"));
    int phaseSteps = Integer.parseInt(o.getOrDefault("phase-steps", "0"));
    int profileSteps = Integer.parseInt(o.getOrDefault("profile", "0"));
    BufferedReader stdin =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    if ("PyTorch".equals(Engine.getInstance().getEngineName())) {
      JniUtils.setNumThreads(threads); // as BarrierTrainingTask does with the task's CPUs
    }
    Device device = gpu ? Device.gpu() : Device.cpu();
    ModelSpec spec = StepModels.spec(model, image, o.get("model-file"));
    Communicator comm = null;
    try (ReplicaSet replicas = new ReplicaSet(spec, List.of(device), INIT_SEED)) {
      if (workers > 1) {
        RingListener listener = RingListener.bind("127.0.0.1");
        System.out.println("ADDR " + listener.address());
        System.out.flush();
        String line = stdin.readLine();
        if (line == null || !line.startsWith("PEERS ")) {
          throw new IllegalStateException("rank " + rank + ": expected PEERS, got " + line);
        }
        comm =
            Communicator.builder()
                .setRank(rank)
                .setPeers(Arrays.asList(line.substring(6).split(",")))
                .setSecret(JobSecret.fromHex(System.getenv(SECRET_ENV)))
                .setListener(listener)
                .optConnectTimeout(Duration.ofSeconds(60))
                .optOperationTimeout(Duration.ofMinutes(5))
                .optSharedMemory(false)
                .build();
      }
      watchParent(stdin);
      int[] sizes = new int[replicas.trainable.length];
      long params = 0;
      for (int j = 0; j < sizes.length; j++) {
        sizes[j] = replicas.sizes[replicas.trainable[j]];
        params += sizes[j];
      }
      Optimizer adam =
          OptimizerSpec.adam()
              .optLearningRate(StepBenchmark.LEARNING_RATE)
              .build()
              .newOptimizer(sizes);
      // fp32 through the constructor every build has (a --baseline-jar without a precision)
      try (TrainStep step =
          precision == Precision.FP32
              ? new TrainStep(
                  replicas,
                  LossSpec.SOFTMAX_CROSS_ENTROPY,
                  comm,
                  adam,
                  placement,
                  threads,
                  DistributedTrainer.DEFAULT_BUCKET_BYTES,
                  overlap,
                  overlap && workers > 1,
                  Duration.ofMinutes(5))
              : new TrainStep(
                  replicas,
                  LossSpec.SOFTMAX_CROSS_ENTROPY,
                  comm,
                  adam,
                  placement,
                  threads,
                  DistributedTrainer.DEFAULT_BUCKET_BYTES,
                  overlap,
                  overlap && workers > 1,
                  Duration.ofMinutes(5),
                  precision)) {
        long[] shape = StepModels.featureShape(model, image, batch, spec);
        ByteBuffer features =
            uint8 ? StepModels.pixels(shape, 11L + rank) : StepModels.features(shape, 11L + rank);
        ByteBuffer labels = StepModels.labels(batch, StepModels.classes(model, spec), 13L + rank);
        sequences =
            StepModels.sequence(model) ? StepModels.sequenceBatches(batch, 11L + rank) : null;
        double[] acc = new double[7];
        for (int s = 0; s < warmup; s++) {
          step(replicas, step, features, labels, shape, s, acc, uint8);
        }
        if (comm != null) {
          comm.barrier(); // both ranks start the timed steps together
        }
        long[] before = counters(step);
        Object ledgerBefore = StepCompat.ledgerSnapshot(step);
        long t0 = System.nanoTime();
        for (int s = warmup; s < warmup + steps; s++) {
          step(replicas, step, features, labels, shape, s, acc, uint8);
        }
        if (gpu) {
          sync(replicas);
        }
        long t1 = System.nanoTime();
        long[] after = counters(step);
        Object ledgerAfter = StepCompat.ledgerSnapshot(step);

        Map<String, Object> r = new LinkedHashMap<>();
        r.put("seconds", (t1 - t0) / 1e9);
        String[] phases = {
          "compute_ms", "backward_ms", "exposed_ms", "communication_ms", "optimizer_ms"
        };
        for (int k = 0; k < phases.length; k++) {
          r.put(phases[k], (after[k] - before[k]) / 1e6 / steps);
        }
        r.put("tensors", replicas.trainable.length);
        r.put("params", params);
        Integer buckets = StepCompat.gradientBuckets(step);
        r.put("buckets", buckets == null ? (Object) Double.NaN : buckets);
        r.putAll(StepCompat.ledgerFigures(ledgerBefore, ledgerAfter, steps));
        r.put("loss", acc[2] > 0 ? acc[0] / acc[2] : Double.NaN);
        if (phaseSteps > 0) {
          r.putAll(
              phases(replicas, step, features, labels, shape, warmup + steps, phaseSteps, uint8));
        }
        if (profileSteps > 0) {
          profile(
              replicas,
              step,
              features,
              labels,
              shape,
              warmup + steps + phaseSteps,
              profileSteps,
              uint8,
              gpu,
              o.get("profile-out"));
        }
        r.put("step_classes", StepCompat.codeSource(TrainStep.class));
        r.put("pid", ProcessHandle.current().pid());
        System.out.println("RESULT " + toJson(r));
        System.out.flush();
      }
    } finally {
      if (comm != null) {
        comm.close();
      }
    }
    return 0;
  }

  /**
   * {@code n} more steps, each phase closed by a device synchronize: the batch's upload, {@link
   * TrainStep#accumulate} (forward, loss, backward, the gradients' gathering) and {@link
   * TrainStep#update} (the optimizer), in ms per step. Where the time goes, not the speed: the
   * synchronizes take away the overlap of the host's launches with the device's work. With a ring
   * the ranks run the same phases in step (update waits for the all-reduce).
   */
  private static Map<String, Object> phases(
      ReplicaSet replicas,
      TrainStep step,
      ByteBuffer features,
      ByteBuffer labels,
      long[] shape,
      int first,
      int n,
      boolean uint8) {
    long upload = 0;
    long compute = 0;
    long update = 0;
    double[] acc = new double[7];
    sync(replicas);
    for (int s = first; s < first + n; s++) {
      long a = System.nanoTime();
      Batch batch = uploadBatch(replicas, features, labels, shape, uint8, s);
      sync(replicas);
      long b = System.nanoTime();
      try (batch) {
        step.accumulate(batch, 1000 + s, acc, 0, 1);
      }
      sync(replicas);
      long c = System.nanoTime();
      step.update(StepBenchmark.LEARNING_RATE);
      sync(replicas);
      long d = System.nanoTime();
      upload += b - a;
      compute += c - b;
      update += d - c;
    }
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("phase_steps", n);
    r.put("phase_upload_ms", upload / 1e6 / n);
    r.put("phase_compute_ms", compute / 1e6 / n);
    r.put("phase_update_ms", update / 1e6 / n);
    return r;
  }

  /**
   * {@code n} more steps under PyTorch's profiler (DJL's {@code JniUtils.startProfile}, with CUDA
   * events on a GPU), its trace written to {@code file}: every operator's host and device time.
   * Without a file (a rank that is not traced) the same steps run unprofiled.
   */
  private static void profile(
      ReplicaSet replicas,
      TrainStep step,
      ByteBuffer features,
      ByteBuffer labels,
      long[] shape,
      int first,
      int n,
      boolean uint8,
      boolean gpu,
      String file) {
    double[] acc = new double[7];
    sync(replicas);
    if (file == null) { // another rank's steps, run so that the traced rank's all-reduces complete
      for (int s = first; s < first + n; s++) {
        step(replicas, step, features, labels, shape, s, acc, uint8);
      }
      sync(replicas);
      return;
    }
    JniUtils.startProfile(gpu, false, false);
    try {
      for (int s = first; s < first + n; s++) {
        step(replicas, step, features, labels, shape, s, acc, uint8);
      }
      sync(replicas);
    } finally {
      JniUtils.stopProfile(file);
    }
  }

  /**
   * The batch made from the direct buffers on the replicas' device (on CPU the tensors wrap them,
   * on a GPU they are uploaded) in a sub-manager of its own, marked as direct with its upload's
   * bytes.
   */
  private static Batch uploadBatch(
      ReplicaSet replicas,
      ByteBuffer features,
      ByteBuffer labels,
      long[] shape,
      boolean uint8,
      int s) {
    NDManager m = replicas.manager().newSubManager();
    if (sequences != null) {
      // ids int64 and mask float32 [B, T], T this step's (the sequence models' contract)
      ByteBuffer[] b = sequences[s % sequences.length];
      long t = StepModels.SEQUENCE_T[s % sequences.length];
      Shape bt = new Shape(shape[0], t);
      NDList x =
          new NDList(
              m.create(b[0].duplicate().order(ByteOrder.nativeOrder()), bt, DataType.INT64),
              m.create(b[1].duplicate().order(ByteOrder.nativeOrder()), bt, DataType.FLOAT32));
      NDArray y =
          m.create(
              labels.duplicate().order(ByteOrder.nativeOrder()),
              new Shape(shape[0]),
              DataType.INT64);
      long upload = b[0].remaining() + b[1].remaining() + labels.remaining();
      return StepCompat.directBatch(m, x, y, (int) shape[0], upload);
    }
    NDArray x =
        uint8
            ? dev.sparktrainer.device.DeviceImages.toFloat(m, features, new Shape(shape))
            : m.create(
                features.duplicate().order(ByteOrder.nativeOrder()),
                new Shape(shape),
                DataType.FLOAT32);
    NDArray y =
        m.create(
            labels.duplicate().order(ByteOrder.nativeOrder()), new Shape(shape[0]), DataType.INT64);
    long upload = features.remaining() + labels.remaining();
    return StepCompat.directBatch(m, new NDList(x), y, (int) shape[0], upload);
  }

  /**
   * One step over a batch made from the direct buffers (on CPU the tensors wrap them, on a GPU they
   * are uploaded), as the input pipeline hands batches over; with {@code uint8} the features are
   * one byte per pixel, made float32 on the device as the pipeline's image transfer uint8 does.
   */
  private static void step(
      ReplicaSet replicas,
      TrainStep step,
      ByteBuffer features,
      ByteBuffer labels,
      long[] shape,
      int s,
      double[] acc,
      boolean uint8) {
    try (Batch b = uploadBatch(replicas, features, labels, shape, uint8, s)) {
      step.run(b, 1000 + s, StepBenchmark.LEARNING_RATE, acc);
    }
  }

  /** Waits for the device's queued work: one small value read back. */
  private static void sync(ReplicaSet replicas) {
    NDArray a = replicas.params[0][replicas.trainable[0]].getArray();
    try (NDArray flat = a.flatten();
        NDArray one = flat.get(0)) {
      one.getFloat();
    }
  }

  /**
   * When the parent closes this process's stdin (or dies), halt: no orphaned rank keeps running.
   */
  private static void watchParent(BufferedReader stdin) {
    Thread t =
        new Thread(
            () -> {
              try {
                while (stdin.readLine() != null) {
                  // nothing else comes after PEERS
                }
              } catch (IOException e) {
                // the same: the parent is gone
              }
              Runtime.getRuntime().halt(3);
            },
            "bench-step-parent-watch");
    t.setDaemon(true);
    t.start();
  }

  /** The step's timings: compute, backward, exposed, communication, optimizer (ns). */
  private static long[] counters(TrainStep s) {
    StepTimings t = s.timings();
    return new long[] {
      t.computeNanos(),
      t.backwardNanos(),
      t.exposedNanos(),
      t.communicationNanos(),
      t.optimizerNanos()
    };
  }
}
