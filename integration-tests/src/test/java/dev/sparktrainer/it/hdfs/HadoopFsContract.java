package dev.sparktrainer.it.hdfs;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.expr;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.checkpoint.CheckpointStore;
import dev.sparktrainer.data.DatasetPlan;
import dev.sparktrainer.data.DatasetPlanner;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.data.Split;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.PipelineSource;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.DistributedTrainerBuilder;
import dev.sparktrainer.train.TrainedModel;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.TrainingCallback;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.zip.GZIPInputStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import scala.collection.Iterable;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What the product needs from a Hadoop FileSystem that holds training data, run against a real one:
 * the {@code tfrecord} data source writing (through Spark's commit protocol) and reading every
 * record type and compression, partitioned writes, split reads of a big uncompressed file, the
 * input pipeline planning and streaming shards, and distributed training whose checkpoints live on
 * the same FileSystem, resumed by a second run of the same job.
 *
 * <p>HDFS ({@link HdfsIT}, a MiniDFSCluster) is the reference; {@code s3.S3IT} runs the same
 * contract on {@code s3a://} against an S3 API server. A subclass starts the storage and one local
 * Spark session whose Hadoop configuration reaches it, and names the root every test writes under.
 */
public abstract class HadoopFsContract {
  /** The session under test: {@code local[2]}, its Hadoop configuration pointing at the storage. */
  protected abstract SparkSession spark();

  /** A directory URI on the storage under test, e.g. {@code hdfs://127.0.0.1:port/it}. */
  protected abstract String root();

  /** The usual Spark settings of the project's tests; the subclass adds its storage settings. */
  protected static SparkSession.Builder sessionBuilder(String appName) {
    return SparkSession.builder()
        .master("local[2]")
        .appName(appName)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.barrier.sync.timeout", "120s");
  }

  protected final Configuration hadoopConf() {
    return spark().sessionState().newHadoopConf();
  }

  protected final FileSystem fs() throws IOException {
    return new Path(root()).getFileSystem(hadoopConf());
  }

  // ---------------------------------------------------------------------------------------------
  // The data source: write with Spark's commit protocol, read back exactly.

  private static final StructType EXAMPLE_SCHEMA =
      new StructType()
          .add("id", DataTypes.LongType)
          .add("small", DataTypes.IntegerType)
          .add("flag", DataTypes.BooleanType)
          .add("score", DataTypes.FloatType)
          .add("weight", DataTypes.DoubleType)
          .add("name", DataTypes.StringType)
          .add("blob", DataTypes.BinaryType)
          .add("ints", DataTypes.createArrayType(DataTypes.LongType, false))
          .add("floats", DataTypes.createArrayType(DataTypes.FloatType, false))
          .add("tags", DataTypes.createArrayType(DataTypes.StringType, false))
          .add("split", DataTypes.StringType);

  /** Examples with every kind of value the source maps, nulls (absent features) and empty lists. */
  private Dataset<Row> examples(int n) {
    Random rnd = new Random(11);
    List<Row> rows = new ArrayList<>();
    String[] words = {"", "ascii", "héllo wörld", "日本語", "emoji \uD83D\uDE80"};
    for (int i = 0; i < n; i++) {
      byte[] blob = new byte[rnd.nextInt(64)];
      rnd.nextBytes(blob);
      long[] ints = new long[i % 4];
      for (int j = 0; j < ints.length; j++) {
        ints[j] = rnd.nextLong() >> rnd.nextInt(64);
      }
      float[] floats = new float[i % 6];
      for (int j = 0; j < floats.length; j++) {
        floats[j] = j == 0 && i % 7 == 0 ? Float.NaN : rnd.nextFloat() * 2000 - 1000;
      }
      List<String> tags = new ArrayList<>();
      for (int j = 0; j < i % 3; j++) {
        tags.add(words[(i + j) % words.length]);
      }
      rows.add(
          RowFactory.create(
              (long) i,
              i % 5 == 0 ? null : rnd.nextInt(),
              i % 2 == 0,
              i % 9 == 0 ? null : rnd.nextFloat(),
              (double) (float) rnd.nextGaussian(), // TFRecord floats are float32
              words[i % words.length],
              blob,
              boxed(ints),
              boxed(floats),
              tags.toArray(new String[0]),
              i % 3 == 0 ? "train" : "test"));
    }
    return spark().createDataFrame(rows, EXAMPLE_SCHEMA);
  }

  @Test
  public void dataSourceWritesAndReadsEveryRecordTypeAndCompression() throws IOException {
    String base = root() + "/datasource";
    Dataset<Row> df = examples(300).cache();
    for (String compression : new String[] {"none", "gzip", "zlib"}) {
      String dir = base + "/example-" + compression;
      df.repartition(3).write().format("tfrecord").option("compression", compression).save(dir);
      String ext =
          compression.equals("none")
              ? ".tfrecord"
              : compression.equals("gzip") ? ".tfrecord.gz" : ".tfrecord.deflate";
      assertThat(partFiles(dir)).as(dir).hasSize(3).allMatch(p -> p.getName().endsWith(ext));
      assertThat(fs().exists(new Path(dir, "_SUCCESS")))
          .as("commit protocol marker in " + dir)
          .isTrue();
      Dataset<Row> back = spark().read().format("tfrecord").schema(EXAMPLE_SCHEMA).load(dir);
      assertSameRows(back, df);
      // columnar and row read paths agree, on this storage too
      assertSameRows(
          spark()
              .read()
              .format("tfrecord")
              .schema(EXAMPLE_SCHEMA)
              .option("columnar", "false")
              .load(dir),
          df);
      // an inferred schema finds every feature
      assertThat(spark().read().format("tfrecord").load(dir).columns())
          .contains("id", "blob", "floats", "tags");
    }

    // SequenceExample: context features and feature lists
    StructType seqSchema =
        new StructType()
            .add("id", DataTypes.LongType)
            .add("lang", DataTypes.StringType)
            .add(
                "tokens",
                DataTypes.createArrayType(
                    DataTypes.createArrayType(DataTypes.LongType, false), false))
            .add(
                "frames",
                DataTypes.createArrayType(
                    DataTypes.createArrayType(DataTypes.FloatType, false), false));
    List<Row> seqRows = new ArrayList<>();
    Random rnd = new Random(5);
    for (int i = 0; i < 120; i++) {
      Long[][] tokens = new Long[i % 5][];
      Float[][] frames = new Float[i % 4][];
      for (int t = 0; t < tokens.length; t++) {
        tokens[t] = boxed(rnd.longs(t % 3, -1000, 1000).toArray());
      }
      for (int t = 0; t < frames.length; t++) {
        float[] f = new float[1 + t];
        for (int j = 0; j < f.length; j++) {
          f[j] = rnd.nextFloat();
        }
        frames[t] = boxed(f);
      }
      seqRows.add(RowFactory.create((long) i, i % 2 == 0 ? "en" : "fr", tokens, frames));
    }
    Dataset<Row> seq = spark().createDataFrame(seqRows, seqSchema);
    String seqDir = base + "/sequence-gzip";
    seq.repartition(2)
        .write()
        .format("tfrecord")
        .option("recordType", "SequenceExample")
        .option("compression", "gzip")
        .save(seqDir);
    assertThat(partFiles(seqDir)).allMatch(p -> p.getName().endsWith(".tfrecord.gz"));
    assertSameRows(
        spark()
            .read()
            .format("tfrecord")
            .option("recordType", "SequenceExample")
            .schema(seqSchema)
            .load(seqDir),
        seq);

    // ByteArray: opaque records, byte for byte
    Dataset<Row> raw = df.select(col("blob").as("byteArray"));
    String rawDir = base + "/bytes";
    raw.write().format("tfrecord").option("recordType", "ByteArray").save(rawDir);
    assertSameRows(
        spark().read().format("tfrecord").option("recordType", "ByteArray").load(rawDir), raw);
    df.unpersist();
  }

  @Test
  public void partitionedWritesAndAFailedWriteLeavesNoOutput() throws IOException {
    String dir = root() + "/partitioned";
    Dataset<Row> df = examples(200);
    df.write().format("tfrecord").partitionBy("split").mode(SaveMode.Overwrite).save(dir);
    Set<String> partitions = new HashSet<>();
    for (FileStatus st : fs().listStatus(new Path(dir))) {
      if (st.isDirectory()) {
        partitions.add(st.getPath().getName());
      }
    }
    assertThat(partitions).containsExactlyInAnyOrder("split=train", "split=test");
    // the partition column comes back from the directory names
    assertSameRows(spark().read().format("tfrecord").schema(EXAMPLE_SCHEMA).load(dir), df);
    assertThat(spark().read().format("tfrecord").load(dir).where("split = 'train'").count())
        .isEqualTo(67);
    // overwrite replaces, append adds
    df.limit(10).write().format("tfrecord").partitionBy("split").mode(SaveMode.Append).save(dir);
    assertThat(spark().read().format("tfrecord").load(dir).count()).isEqualTo(210);

    // A task that fails (a null inside a list cannot be written) fails the job: nothing is
    // committed.
    String failed = root() + "/failed-write";
    StructType s =
        new StructType()
            .add("id", DataTypes.LongType)
            .add("xs", DataTypes.createArrayType(DataTypes.LongType, true));
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      rows.add(
          RowFactory.create((long) i, i == 37 ? new Long[] {1L, null} : new Long[] {(long) i}));
    }
    Dataset<Row> bad = spark().createDataFrame(rows, s).repartition(2);
    assertThatThrownBy(() -> bad.write().format("tfrecord").save(failed))
        .hasStackTraceContaining("null");
    // Nothing committed: no part file outside the committer's _temporary tree. (The other task,
    // killed
    // when the job failed, may still commit its attempt into _temporary/0/task_... after the job's
    // abort has deleted that tree — Spark's commit protocol on an object store; readers never list
    // it.)
    assertThat(partFiles(failed))
        .as("part files committed by the failed job in " + failed)
        .filteredOn(p -> !p.toString().contains("/_temporary/"))
        .isEmpty();
  }

  // ---------------------------------------------------------------------------------------------
  // Big uncompressed files: split reads are exactly-once, and the input pipeline plans and streams.

  private static final int BIG_RECORDS = 20_000;

  /** One uncompressed file of {@link #BIG_RECORDS} Examples (id, label, 0-400 bytes of padding). */
  private String bigFile(String dir) throws IOException {
    if (partFiles(dir).isEmpty()) {
      spark()
          .range(0, BIG_RECORDS, 1, 2)
          .select(
              col("id"),
              col("id").mod(10).as("label"),
              expr("substring(repeat(sha2(cast(id as string), 256), 7), 1, cast(pmod(hash(id), 400) as int))")
                  .cast("binary")
                  .as("pad"))
          .coalesce(1)
          .write()
          .format("tfrecord")
          .save(dir);
    }
    List<Path> parts = partFiles(dir);
    assertThat(parts).hasSize(1);
    return parts.get(0).toString();
  }

  @Test
  public void splitReadsOfABigFileReadEveryRecordExactlyOnce() throws IOException {
    String dir = root() + "/big";
    String file = bigFile(dir);
    long size = fs().getFileStatus(new Path(file)).getLen();
    assertThat(size).isGreaterThan(2L << 20);
    checkSpansSeveralBlocks(new Path(file));
    String old = spark().conf().get("spark.sql.files.maxPartitionBytes");
    try {
      spark().conf().set("spark.sql.files.maxPartitionBytes", String.valueOf(200_000));
      Dataset<Row> df =
          spark().read().format("tfrecord").schema("id bigint, label bigint").load(dir);
      assertThat(df.rdd().getNumPartitions())
          .as("splits of a %d-byte file", size)
          .isGreaterThanOrEqualTo((int) (size / 200_000));
      Row r =
          df.selectExpr("count(*)", "count(distinct id)", "sum(id)", "min(id)", "max(id)").first();
      assertThat(r.getLong(0)).isEqualTo(BIG_RECORDS);
      assertThat(r.getLong(1)).isEqualTo(BIG_RECORDS);
      assertThat(r.getLong(2)).isEqualTo((long) BIG_RECORDS * (BIG_RECORDS - 1) / 2);
      assertThat(r.getLong(3)).isZero();
      assertThat(r.getLong(4)).isEqualTo(BIG_RECORDS - 1);
    } finally {
      spark().conf().set("spark.sql.files.maxPartitionBytes", old);
    }
  }

  /**
   * HDFS checks that the big file really spans several blocks; other stores have nothing to check.
   */
  protected void checkSpansSeveralBlocks(Path file) throws IOException {}

  @Test
  public void inputPipelinePlansAndStreamsShardsExactlyOnce() throws IOException {
    String file = bigFile(root() + "/big");
    DatasetSpec spec =
        DatasetSpec.builder()
            .addPath(root() + "/big")
            .addFeature("id", 1)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    long splitSize = 300_000;
    PipelineOptions options =
        PipelineOptions.builder()
            .optBatchSize(64)
            .optDropRemainder(false)
            .optShuffleBuffer(256)
            .optSplitSizeBytes(splitSize)
            .optSeed(9)
            .build();
    DatasetPlan plan = DatasetPlanner.plan(spec, options, spark()); // counts with a Spark job
    long size = fs().getFileStatus(new Path(file)).getLen();
    assertThat(plan.totalRecords()).isEqualTo(BIG_RECORDS);
    assertThat(plan.splits()).hasSize((int) ((size + splitSize - 1) / splitSize));
    for (Split s : plan.splits()) {
      assertThat(s.path()).isEqualTo(file);
    }
    Configuration conf = hadoopConf();
    Set<Long> seen = new HashSet<>();
    try (NDManager manager = NDManager.newBaseManager()) {
      for (int rank = 0; rank < 2; rank++) {
        Set<Long> mine = new HashSet<>();
        long values = 0;
        try (PipelineSource in =
            PipelineSource.create(plan, options, null, rank, 2, manager, conf)) {
          Iterator<Batch> it = in.epoch(1, 0);
          long steps = 0;
          while (it.hasNext()) {
            try (Batch b = it.next()) {
              float[] ids = b.features().get(0).toFloatArray();
              long[] labels = b.labels().toLongArray();
              for (int i = 0; i < ids.length; i++) {
                long id = (long) ids[i];
                assertThat(labels[i]).as("label of record %d", id).isEqualTo(id % 10);
                mine.add(id);
              }
              values += ids.length;
              steps++;
            }
          }
          assertThat(steps).isEqualTo(in.stepsPerEpoch());
          assertThat(mine)
              .as("records of worker %d", rank)
              .hasSize((int) in.pipeline().shard().records());
          assertThat(values).isGreaterThanOrEqualTo(in.pipeline().shard().records());
        }
        for (long id : mine) {
          assertThat(seen.add(id)).as("record %d read by both workers", id).isTrue();
        }
      }
    }
    assertThat(seen).hasSize(BIG_RECORDS);
  }

  // ---------------------------------------------------------------------------------------------
  // Training on this storage, checkpoints on it, and a second run of the same job resuming.

  /** Rank 0's start events (local mode: the task runs in this JVM). */
  static final ConcurrentLinkedQueue<long[]> STARTS = new ConcurrentLinkedQueue<>();

  /** Epochs rank 0 finished, per run. */
  static final ConcurrentLinkedQueue<Integer> EPOCHS = new ConcurrentLinkedQueue<>();

  /** Records where rank 0 starts (global step) and which epochs it runs. */
  static final class RecordingCallback implements TrainingCallback {
    private static final long serialVersionUID = 1L;

    @Override
    public Listener start(
        int numWorkers,
        int epochs,
        long stepsPerEpoch,
        long globalStep,
        int attempt,
        Configuration hadoopConf) {
      STARTS.add(new long[] {globalStep, stepsPerEpoch, attempt});
      return new Listener() {
        @Override
        public void onEpochEnd(EpochMetrics metrics) {
          EPOCHS.add(metrics.epoch());
        }
      };
    }
  }

  private DistributedTrainerBuilder digitsJob(String data, int epochs) {
    PipelineOptions options =
        PipelineOptions.builder().optBatchSize(32).optShuffleBuffer(500).optSeed(5).build();
    DatasetSpec train =
        DatasetSpec.builder()
            .addPath(data + "/train")
            .addFeature("pixels", 64)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    DatasetSpec test =
        DatasetSpec.builder()
            .addPath(data + "/test")
            .addFeature("pixels", 64)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    return DistributedTrainer.builder()
        .setModel(MlpSpec.of(64, 10, 64))
        .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.adam().optLearningRate(1e-2f).build())
        .setTrainingData(train, options)
        .optValidationData(test, options)
        .setNumWorkers(2)
        .optEpochs(epochs)
        .optSeed(3)
        .optRingHost("127.0.0.1")
        .optCallback(new RecordingCallback());
  }

  @Test
  public void trainsOnShardsHereWithCheckpointsHereAndResumes() throws IOException {
    String data = root() + "/digits";
    writeDigits(data);
    String ckpt = root() + "/jobs/digits/ckpt";
    String out = root() + "/jobs/digits/model";
    Configuration conf = hadoopConf();
    CheckpointStore store = new CheckpointStore(ckpt, conf, 3);

    STARTS.clear();
    EPOCHS.clear();
    TrainedModel first = digitsJob(data, 1).optCheckpointDir(ckpt).build().fit(spark());
    assertThat(first.history().epochs()).hasSize(1);
    long stepsPerEpoch = first.history().last().steps();
    assertThat(STARTS)
        .singleElement()
        .satisfies(s -> assertThat(s[0]).as("first run starts at step 0").isZero());
    assertThat(store.steps()).as("checkpoints in %s", ckpt).endsWith(stepsPerEpoch);

    // The same job, asked for 3 epochs: it resumes after epoch 0 instead of starting again.
    STARTS.clear();
    EPOCHS.clear();
    TrainedModel second =
        digitsJob(data, 3).optCheckpointDir(ckpt).optOutputDir(out).build().fit(spark());
    assertThat(STARTS)
        .singleElement()
        .satisfies(s -> assertThat(s[0]).as("resumed at global step").isEqualTo(stepsPerEpoch));
    assertThat(EPOCHS).as("epochs run by the second job").containsExactly(1, 2);
    List<EpochMetrics> history = second.history().epochs();
    assertThat(history).hasSize(3);
    assertThat(history.get(0).parameterHash())
        .as("epoch 0 restored from the checkpoint")
        .isEqualTo(first.history().epochs().get(0).parameterHash());
    assertThat(store.steps()).as("checkpoints in %s", ckpt).endsWith(3 * stepsPerEpoch);
    assertThat(second.history().last().validationAccuracy()).isGreaterThanOrEqualTo(0.9);

    TrainedModel loaded = TrainedModel.load(out, conf);
    assertThat(loaded.parameterBytes()).isEqualTo(second.parameterBytes());

    // Run again when everything is done: nothing to train, the result comes from the checkpoint.
    STARTS.clear();
    EPOCHS.clear();
    TrainedModel again = digitsJob(data, 3).optCheckpointDir(ckpt).build().fit(spark());
    assertThat(EPOCHS).isEmpty();
    assertThat(again.parameterBytes()).isEqualTo(second.parameterBytes());
  }

  // ---------------------------------------------------------------------------------------------
  // Reading the checkpoint fails for a while, or for good: progress is never silently thrown away.

  /**
   * A subclass of this storage's FileSystem class whose opens of checkpoints fail on demand ({@link
   * FlakyCheckpointReads}).
   */
  protected abstract Class<? extends FileSystem> flakyFileSystem();

  /**
   * A TorchScript model ({@code --model torchscript:PATH}) is read from this storage once, on the
   * driver, through the session's Hadoop configuration, and checked there; a missing one is named.
   */
  @Test
  public void aTorchScriptModelIsReadFromHere() throws IOException {
    Path module = new Path(root() + "/models/mlp.pt");
    try (java.io.OutputStream out = fs().create(module, true)) {
      out.write(
          java.nio.file.Files.readAllBytes(
              java.nio.file.Path.of("../spark-trainer/src/test/resources/torchscript/mlp.pt")));
    }
    dev.sparktrainer.model.torchscript.TorchScriptSpec spec =
        dev.sparktrainer.model.torchscript.TorchScriptSpec.of(module.toString());
    assertThat(spec.inputShapes()).containsExactly(new ai.djl.ndarray.types.Shape(20));
    assertThat(spec.file().metadata().buffers()).isEmpty();
    spec.check(List.of("x"), 5);
    String missing = root() + "/models/none.pt";
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> dev.sparktrainer.model.torchscript.TorchScriptSpec.of(missing))
        .hasMessage("Invalid model torchscript:" + missing + ": no such file");
  }

  /** The digits under {@code root()/digits}, written once for the tests that need them. */
  private String digits() throws IOException {
    String data = root() + "/digits";
    if (partFiles(data + "/train").isEmpty() || partFiles(data + "/test").isEmpty()) {
      writeDigits(data);
    }
    return data;
  }

  /**
   * One epoch of the digits job with a checkpoint every 10 steps into {@code ckpt}; its steps per
   * epoch.
   */
  private long trainOneEpochWithCheckpoints(String data, String ckpt) throws IOException {
    STARTS.clear();
    EPOCHS.clear();
    TrainedModel first =
        digitsJob(data, 1).optCheckpointDir(ckpt).optCheckpointEverySteps(10).build().fit(spark());
    long stepsPerEpoch = first.history().last().steps();
    List<Long> steps = new CheckpointStore(ckpt, hadoopConf(), 3).steps();
    // Older ones too (the background writer may drop a snapshot that waited behind a slow write):
    // falling back to one of them would lose progress without failing.
    assertThat(steps)
        .as("checkpoints in %s", ckpt)
        .hasSizeGreaterThan(1)
        .last()
        .isEqualTo(stepsPerEpoch);
    return stepsPerEpoch;
  }

  private String scheme() {
    return new Path(root()).toUri().getScheme();
  }

  @Test
  public void aTransientErrorReadingTheCheckpointIsRetriedAndTheRunResumesFromTheNewest()
      throws IOException {
    String data = digits();
    String ckpt = root() + "/jobs/flaky-read/ckpt";
    long newest = trainOneEpochWithCheckpoints(data, ckpt);

    STARTS.clear();
    EPOCHS.clear();
    TrainedModel second;
    FlakyCheckpointReads flaky =
        FlakyCheckpointReads.install(spark(), scheme(), flakyFileSystem(), 2);
    try (flaky) {
      second =
          digitsJob(data, 2)
              .optCheckpointDir(ckpt)
              .optCheckpointEverySteps(10)
              .build()
              .fit(spark());
    }
    assertThat(STARTS)
        .singleElement()
        .satisfies(
            s ->
                assertThat(s[0])
                    .as(
                        "global step the second run started at: the newest checkpoint's, not an older one's or 0")
                    .isEqualTo(newest));
    assertThat(flaky.failed())
        .as("failed opens of the checkpoint (the store makes 4 attempts)")
        .isEqualTo(2);
    assertThat(flaky.opens())
        .as("opens of checkpoints: 2 failed, then the newest opened")
        .isEqualTo(3);
    assertThat(flaky.openedFiles()).containsExactly(String.format("ckpt-%019d.bin", newest));
    assertThat(EPOCHS).as("epochs run by the second job").containsExactly(1);
    assertThat(second.history().resumes())
        .singleElement()
        .satisfies(
            r -> {
              assertThat(r.step()).isEqualTo(newest);
              assertThat(r.stageAttempt()).as("no stage retry: the store retried").isZero();
              assertThat(r.checkpoint()).isEqualTo(ckpt);
              assertThat(r.skipped()).as("a transient error skips nothing").isEmpty();
              assertThat(r.fromScratch()).isFalse();
            });
    assertThat(second.history().epochs()).hasSize(2);
  }

  @Test
  public void aPersistentErrorReadingTheCheckpointFailsTheRunInsteadOfStartingOver()
      throws IOException {
    String data = digits();
    String ckpt = root() + "/jobs/unreadable/ckpt";
    long newest = trainOneEpochWithCheckpoints(data, ckpt);
    CheckpointStore store = new CheckpointStore(ckpt, hadoopConf(), 3);
    List<Long> before = store.steps();
    String file = String.format("ckpt-%019d.bin", newest);

    STARTS.clear();
    EPOCHS.clear();
    try (FlakyCheckpointReads flaky =
        FlakyCheckpointReads.install(spark(), scheme(), flakyFileSystem(), Integer.MAX_VALUE)) {
      // Spark retries the barrier stage (spark.stage.maxConsecutiveAttempts): each attempt's rank 0
      // tries 4 times, then every rank fails naming the checkpoint and the cause.
      assertThatThrownBy(() -> digitsJob(data, 2).optCheckpointDir(ckpt).build().fit(spark()))
          .as("the run's error")
          .hasMessageContaining("Cannot read checkpoint " + ckpt + "/" + file)
          .hasMessageContaining("(4 attempts)")
          .hasMessageContaining("simulated: ");
      assertThat(flaky.failed())
          .as("failed opens: 4 per stage attempt")
          .isPositive()
          .isEqualTo(flaky.opens())
          .satisfies(n -> assertThat(n % 4).isZero());
      assertThat(flaky.openedFiles())
          .as("only the newest tried, never an older one")
          .containsExactly(file);
    }
    assertThat(STARTS).as("training never started").isEmpty();
    assertThat(store.steps())
        .as("checkpoints: nothing new (a start from scratch would write some)")
        .isEqualTo(before);
  }

  /**
   * The bundled digits as TFRecord shards written by the data source: 4 training files, 1 test
   * file.
   */
  private void writeDigits(String dir) {
    StructType schema =
        new StructType()
            .add("pixels", DataTypes.createArrayType(DataTypes.FloatType, false))
            .add("label", DataTypes.LongType);
    List<Row> rows = new ArrayList<>();
    try (InputStream raw =
            HadoopFsContract.class.getResourceAsStream("/sample-data/digits.csv.gz");
        BufferedReader r =
            new BufferedReader(
                new InputStreamReader(new GZIPInputStream(raw), StandardCharsets.US_ASCII))) {
      for (String line; (line = r.readLine()) != null; ) {
        if (line.isBlank()) {
          continue;
        }
        String[] f = line.split(",");
        Float[] px = new Float[64];
        for (int i = 0; i < 64; i++) {
          px[i] = Float.parseFloat(f[i]) / 16f;
        }
        rows.add(RowFactory.create(px, Long.parseLong(f[64].trim())));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Collections.shuffle(rows, new Random(7));
    spark()
        .createDataFrame(rows.subList(0, 1437), schema)
        .repartition(4)
        .write()
        .format("tfrecord")
        .mode(SaveMode.Overwrite)
        .save(dir + "/train");
    spark()
        .createDataFrame(rows.subList(1437, rows.size()), schema)
        .coalesce(1)
        .write()
        .format("tfrecord")
        .mode(SaveMode.Overwrite)
        .save(dir + "/test");
  }

  // ---------------------------------------------------------------------------------------------

  /** The data files under {@code dir} (recursively), not Spark's markers or temporary files. */
  protected final List<Path> partFiles(String dir) throws IOException {
    List<Path> out = new ArrayList<>();
    Path d = new Path(dir);
    FileSystem fs = d.getFileSystem(hadoopConf());
    if (!fs.exists(d)) {
      return out;
    }
    RemoteIterator<LocatedFileStatus> it = fs.listFiles(d, true);
    while (it.hasNext()) {
      Path p = it.next().getPath();
      if (p.getName().startsWith("part-")) {
        out.add(p);
      }
    }
    out.sort(null);
    return out;
  }

  /**
   * Same multiset of rows, compared on the driver (a few hundred rows: no shuffle): floats and
   * doubles by their bits (NaN equal to NaN), binary byte for byte, arrays element by element.
   */
  protected static void assertSameRows(Dataset<Row> actual, Dataset<Row> expected) {
    String[] cols = expected.columns();
    List<String> a =
        canonical(actual.select(cols[0], Arrays.copyOfRange(cols, 1, cols.length)).collectAsList());
    List<String> e = canonical(expected.collectAsList());
    assertThat(a).as("rows read back").hasSameSizeAs(e);
    assertThat(a).as("rows read back").isEqualTo(e);
  }

  private static List<String> canonical(List<Row> rows) {
    List<String> out = new ArrayList<>();
    for (Row r : rows) {
      out.add(canonical(r));
    }
    out.sort(null);
    return out;
  }

  private static String canonical(Object v) {
    if (v == null) {
      return "null";
    }
    if (v instanceof byte[]) {
      return "0x" + HexFormat.of().formatHex((byte[]) v);
    }
    if (v instanceof Float) {
      return "f" + Integer.toHexString(Float.floatToIntBits((Float) v));
    }
    if (v instanceof Double) {
      return "d" + Long.toHexString(Double.doubleToLongBits((Double) v));
    }
    StringBuilder sb = new StringBuilder();
    if (v instanceof Row) {
      Row r = (Row) v;
      sb.append('(');
      for (int i = 0; i < r.length(); i++) {
        sb.append(canonical(r.get(i))).append(i + 1 < r.length() ? ", " : "");
      }
      return sb.append(')').toString();
    }
    if (v instanceof Iterable) {
      sb.append('[');
      for (Object o : CollectionConverters.asJava((Iterable<?>) v)) {
        sb.append(canonical(o)).append(", ");
      }
      return sb.append(']').toString();
    }
    return v.toString();
  }

  private static Long[] boxed(long[] v) {
    Long[] o = new Long[v.length];
    for (int i = 0; i < v.length; i++) {
      o[i] = v[i];
    }
    return o;
  }

  private static Float[] boxed(float[] v) {
    Float[] o = new Float[v.length];
    for (int i = 0; i < v.length; i++) {
      o[i] = v[i];
    }
    return o;
  }
}
