package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.input.InMemoryDataset;
import dev.sparktrainer.train.job.InputStaging;
import dev.sparktrainer.train.job.Preflight;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where a DataFrame is staged: by default under the checkpoint directory when that is on a shared
 * file system (what every executor reads), never on one machine's local disk on a cluster.
 */
class StagingDirTest {
  private static SparkSession spark;
  @TempDir static Path tmp;

  /**
   * Local files under {@code shared:}, standing for a shared file system (HDFS, S3A): records what
   * is created.
   */
  public static class Shared extends RawLocalFileSystem {
    static final List<String> created = new CopyOnWriteArrayList<>();

    @Override
    public URI getUri() {
      return URI.create("shared:///");
    }

    @Override
    public String getScheme() {
      return "shared";
    }

    // RawLocalFileSystem reads permissions through a file: URI: give plain statuses under this
    // scheme.
    private static FileStatus plain(FileStatus s) {
      return new FileStatus(
          s.getLen(),
          s.isDirectory(),
          s.getReplication(),
          s.getBlockSize(),
          s.getModificationTime(),
          s.getPath());
    }

    @Override
    public FileStatus getFileStatus(org.apache.hadoop.fs.Path f) throws IOException {
      return plain(super.getFileStatus(f));
    }

    @Override
    public FileStatus[] listStatus(org.apache.hadoop.fs.Path f) throws IOException {
      return Arrays.stream(super.listStatus(f)).map(Shared::plain).toArray(FileStatus[]::new);
    }

    @Override
    protected OutputStream createOutputStreamWithMode(
        org.apache.hadoop.fs.Path f, boolean append, FsPermission permission) throws IOException {
      created.add(f.toString());
      return super.createOutputStreamWithMode(f, append, permission);
    }
  }

  @BeforeAll
  static void start() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("staging-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.barrier.sync.timeout", "60s")
            .config("spark.hadoop.fs.shared.impl", Shared.class.getName())
            .config("spark.hadoop.fs.shared.impl.disable.cache", "true")
            .getOrCreate();
  }

  @AfterAll
  static void stop() {
    spark.stop();
    SparkSession.clearActiveSession();
    SparkSession.clearDefaultSession();
  }

  @Test
  void aDataFrameIsStagedUnderASharedCheckpointDirByDefault() throws IOException {
    InMemoryDataset digits = Digits.load().slice(0, 320);
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < digits.size(); i++) {
      List<Float> pixels = new ArrayList<>();
      for (float v : digits.features(i)) {
        pixels.add(v);
      }
      rows.add(RowFactory.create(pixels, (int) digits.label(i)));
    }
    StructType schema =
        new StructType()
            .add("pixels", DataTypes.createArrayType(DataTypes.FloatType))
            .add("label", DataTypes.IntegerType);
    Dataset<Row> frame = spark.createDataFrame(rows, schema); // not a file scan: it is staged
    DatasetSpec columns =
        DatasetSpec.builder()
            .addPath("unused")
            .addFeature("pixels", 64)
            .setLabel("label", DatasetSpec.LabelType.INT)
            .build();
    String ckpt = "shared://" + tmp.resolve("ckpt");
    Shared.created.clear();

    TrainedModel model =
        DistributedTrainer.builder()
            .setModel(MlpSpec.of(64, 10, 16))
            .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
            .setOptimizer(OptimizerSpec.adam().build())
            .setTrainingData(frame, columns, PipelineOptions.builder().optBatchSize(32).build())
            .setNumWorkers(2)
            .optEpochs(1)
            .optRingHost("127.0.0.1")
            .optCheckpointDir(ckpt)
            .build()
            .fit(spark);

    assertThat(model.history().epochs()).hasSize(1);
    assertThat(Shared.created)
        .as("Parquet shards staged under the checkpoint directory")
        .anyMatch(
            p ->
                p.startsWith("shared:")
                    && p.contains("/ckpt/_staging/staging-")
                    && p.endsWith(".parquet"));
    try (Stream<Path> left = Files.list(tmp.resolve("ckpt/_staging"))) {
      assertThat(left.toList()).as("staging cleaned up").isEmpty();
    }
  }

  @Test
  void onAClusterALocalStagingDirIsRefusedNamingTheOption() {
    Configuration local = new Configuration();
    Configuration hdfsDefault = new Configuration();
    hdfsDefault.set("fs.defaultFS", "hdfs://namenode:8020");
    String tmpDefault = InputStaging.defaultStagingDir(null, null, local);
    assertThat(tmpDefault).startsWith("file:/");
    for (String master : List.of("yarn", "spark://10.0.0.1:7077", "k8s://https://api:6443")) {
      assertThat(Preflight.stagingProblem(master, tmpDefault, false, local))
          .contains("master " + master, "optStagingDir", "stagingDir", "shared file system");
      assertThat(Preflight.stagingProblem(master, "file:/mnt/staging", true, local))
          .startsWith("Invalid staging directory 'file:/mnt/staging'")
          .contains("optStagingDir");
      assertThat(Preflight.stagingProblem(master, "/staging", true, local))
          .contains("optStagingDir");
      assertThat(Preflight.stagingProblem(master, "hdfs://nn:8020/staging", true, local)).isNull();
      assertThat(Preflight.stagingProblem(master, "s3a://bucket/staging", false, local)).isNull();
      assertThat(Preflight.stagingProblem(master, "/staging", true, hdfsDefault))
          .as("on fs.defaultFS")
          .isNull();
    }
    assertThat(Preflight.stagingProblem("local[4]", tmpDefault, false, local)).isNull();
    assertThat(Preflight.stagingProblem("local-cluster[2,1,1024]", tmpDefault, false, local))
        .isNull();

    // The default: under a shared checkpoint directory, else next to a shared output directory.
    assertThat(
            InputStaging.defaultStagingDir(
                "hdfs://nn:8020/jobs/a/ckpt", "s3a://b/jobs/a/model", local))
        .isEqualTo("hdfs://nn:8020/jobs/a/ckpt/_staging");
    assertThat(InputStaging.defaultStagingDir("file:/tmp/ckpt", "s3a://b/jobs/a/model", local))
        .isEqualTo("s3a://b/jobs/a/_staging-model");
    assertThat(InputStaging.defaultStagingDir("/jobs/a/ckpt", null, hdfsDefault))
        .isEqualTo("/jobs/a/ckpt/_staging");
    assertThat(InputStaging.defaultStagingDir("file:/tmp/ckpt", "/tmp/model", local))
        .isEqualTo(tmpDefault);
  }
}
