package dev.sparktrainer.it.faults;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.ndarray.NDManager;
import dev.sparktrainer.data.DatasetPlan;
import dev.sparktrainer.data.DatasetPlanner;
import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.PipelineSource;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import dev.sparktrainer.train.DistributedTrainer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.ExceptionFailure;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A corrupt TFRecord in the middle of a dataset: five files of 200 records, the middle one damaged
 * in the middle. The data source under FAILFAST names the file and the byte offset; under
 * DROPMALFORMED it completes, returns every other record and reports how many it dropped in the
 * scan's {@code droppedMalformedRecords} metric (both read paths). The input pipeline fails naming
 * the file and offset: at planning (the framing is counted there) or while streaming (a record
 * whose framing is fine but whose Example is not), and so does a training job on such data.
 */
class CorruptDataIT {
  private static final int FILES = 5;
  private static final int PER_FILE = 200;
  private static final int BAD_FILE = 2;
  private static final int BAD_RECORD = 100;

  @TempDir static Path tmp;
  private static SparkSession spark;

  @BeforeAll
  static void startSpark() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("CorruptDataIT")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.barrier.sync.timeout", "120s")
            // a training stage that fails on bad data is retried once, not three times
            .config("spark.stage.maxConsecutiveAttempts", "2")
            .getOrCreate();
  }

  @AfterAll
  static void stopSpark() {
    if (spark != null) {
      spark.stop();
      SparkSession.clearActiveSession();
      SparkSession.clearDefaultSession();
    }
  }

  /** The kinds of damage, each in the middle of the middle file. */
  enum Damage {
    /** A byte of record 100's payload flipped: its data CRC no longer matches. */
    DATA_CRC,
    /** Record 100's length field overwritten: the framing is lost until the next valid record. */
    LENGTH_FIELD,
    /** Valid framing and CRCs around bytes that are not a tf.train.Example. */
    NOT_AN_EXAMPLE,
    /** A gzip file whose compressed stream is damaged in the middle. */
    GZIP_STREAM
  }

  /** A dataset directory and what was done to it. */
  record Corrupted(Path dir, Path badFile, long badOffset, int expectedDropped, int expectedRows) {}

  private static byte[] example(long id) {
    Map<String, Feature> m = new LinkedHashMap<>();
    float[] px = new float[8];
    for (int i = 0; i < px.length; i++) {
      px[i] = (id * 8 + i) % 17 / 16f;
    }
    m.put("id", Feature.ofInt64(id));
    m.put("pixels", Feature.ofFloats(px));
    m.put("label", Feature.ofInt64(id % 10));
    return Examples.encodeExample(m);
  }

  private static Corrupted write(Damage damage) throws IOException {
    Path dir = Files.createDirectories(tmp.resolve(damage.name().toLowerCase()));
    Path bad = null;
    long badOffset = -1;
    int expectedRows = FILES * PER_FILE;
    int dropped = 1;
    for (int f = 0; f < FILES; f++) {
      boolean gz = damage == Damage.GZIP_STREAM && f == BAD_FILE;
      ByteArrayOutputStream raw = new ByteArrayOutputStream();
      long[] offsets = new long[PER_FILE];
      try (OutputStream os = gz ? TFRecordCompression.GZIP.compress(raw) : raw;
          TFRecordWriter w = new TFRecordWriter(os)) {
        for (int i = 0; i < PER_FILE; i++) {
          offsets[i] = w.bytesWritten();
          long id = (long) f * PER_FILE + i;
          w.write(
              damage == Damage.NOT_AN_EXAMPLE && f == BAD_FILE && i == BAD_RECORD
                  ? new byte[] {(byte) 0xFF, 0x01, 0x02}
                  : example(id));
        }
      }
      byte[] bytes = raw.toByteArray();
      Path file = dir.resolve("part-" + f + (gz ? ".tfrecord.gz" : ".tfrecord"));
      if (f == BAD_FILE) {
        bad = file;
        badOffset = offsets[BAD_RECORD];
        switch (damage) {
          case DATA_CRC:
            bytes[(int) badOffset + 12 + 5] ^= 0x10;
            expectedRows -= 1;
            break;
          case LENGTH_FIELD:
            bytes[(int) badOffset + 2] = (byte) 0x7f; // length CRC mismatch, resync at record 101
            expectedRows -= 1;
            break;
          case NOT_AN_EXAMPLE:
            expectedRows -= 1;
            break;
          default: // GZIP_STREAM: damage the deflate data halfway; what follows is lost
            for (int i = bytes.length / 2; i < bytes.length / 2 + 64; i++) {
              bytes[i] = (byte) (bytes[i] * 31 + 7);
            }
            badOffset = -1; // somewhere after the damage, in the uncompressed stream
            expectedRows = -1;
        }
      }
      Files.write(file, bytes);
    }
    return new Corrupted(dir, bad, badOffset, dropped, expectedRows);
  }

  @ParameterizedTest
  @EnumSource(Damage.class)
  void failFastNamesTheFileAndOffset(Damage damage) throws IOException {
    Corrupted c = write(damage);
    String where =
        "Corrupt TFRecord file "
            + c.badFile().toUri().toString().replace("file:///", "file:/")
            + " at byte offset "
            + (c.badOffset() >= 0 ? c.badOffset() + ":" : "");
    assertThatThrownBy(
            () -> spark.read().format("tfrecord").load(c.dir().toString()).collectAsList())
        .hasStackTraceContaining(where);
    // FAILFAST is the default; say it explicitly too
    assertThatThrownBy(
            () ->
                spark
                    .read()
                    .format("tfrecord")
                    .option("mode", "FAILFAST")
                    .schema("id bigint")
                    .load(c.dir().toString())
                    .count())
        .hasStackTraceContaining(where);
  }

  @ParameterizedTest
  @EnumSource(Damage.class)
  void dropMalformedCompletesAndCountsTheDroppedRecords(Damage damage) throws IOException {
    Corrupted c = write(damage);
    for (String columnar : new String[] {"true", "false"}) {
      Dataset<Row> df =
          spark
              .read()
              .format("tfrecord")
              .option("mode", "DROPMALFORMED")
              .option("columnar", columnar)
              .schema("id bigint, label bigint, pixels array<float>")
              .load(c.dir().toString());
      List<Row> rows = df.collectAsList();
      long dropped = ScanMetrics.droppedMalformedRecords(df);
      if (c.expectedRows() >= 0) {
        assertThat(dropped)
            .as("droppedMalformedRecords (columnar=%s)", columnar)
            .isEqualTo(c.expectedDropped());
      } else { // garbage inflated before the stream broke may be dropped record by record too
        assertThat(dropped)
            .as("droppedMalformedRecords (columnar=%s)", columnar)
            .isGreaterThanOrEqualTo(1);
      }
      List<Long> ids = new ArrayList<>();
      for (Row r : rows) {
        long id = r.getLong(0);
        assertThat(r.getLong(1)).isEqualTo(id % 10);
        ids.add(id);
      }
      assertThat(ids).doesNotHaveDuplicates();
      // every record of the undamaged files is there
      for (long id = 0; id < FILES * PER_FILE; id++) {
        if (id / PER_FILE != BAD_FILE) {
          assertThat(ids).contains(id);
        }
      }
      if (c.expectedRows() >= 0) {
        assertThat(rows).hasSize(c.expectedRows());
        assertThat(ids).doesNotContain((long) BAD_FILE * PER_FILE + BAD_RECORD);
      } else { // a broken gzip stream: the records before the damage survive, the rest is dropped
        long fromBad = ids.stream().filter(id -> id / PER_FILE == BAD_FILE).count();
        assertThat(fromBad).isBetween(1L, (long) PER_FILE - 1);
        assertThat(ids.stream().filter(id -> id / PER_FILE == BAD_FILE))
            .as("a prefix of the damaged file")
            .allMatch(id -> id < BAD_FILE * PER_FILE + fromBad);
      }
    }
  }

  private static DatasetSpec spec(Path dir) {
    return DatasetSpec.builder()
        .addPath(dir.toString())
        .addFeature("pixels", 8)
        .setLabel("label", DatasetSpec.LabelType.INT)
        .build();
  }

  private static final PipelineOptions OPTIONS =
      PipelineOptions.builder().optBatchSize(50).optShuffleBuffer(100).optSeed(1).build();

  @Test
  void thePipelineFailsAtPlanningOnDamagedFramingNamingTheFile() throws IOException {
    Corrupted c = write(Damage.DATA_CRC);
    assertThatThrownBy(() -> DatasetPlanner.plan(spec(c.dir()), OPTIONS, spark))
        .hasStackTraceContaining(c.badFile().getFileName().toString())
        .hasStackTraceContaining("at byte offset " + c.badOffset() + ": data CRC mismatch");
    Corrupted l = write(Damage.LENGTH_FIELD);
    assertThatThrownBy(() -> DatasetPlanner.plan(spec(l.dir()), OPTIONS, new Configuration()))
        .hasStackTraceContaining(l.badFile().getFileName().toString())
        .hasStackTraceContaining("at byte offset " + l.badOffset() + ": length CRC mismatch");
  }

  @Test
  void thePipelineFailsWhileStreamingABadRecordNamingTheFileAndOffset() throws IOException {
    Corrupted c = write(Damage.NOT_AN_EXAMPLE);
    DatasetPlan plan = DatasetPlanner.plan(spec(c.dir()), OPTIONS, spark); // framing is fine
    assertThat(plan.totalRecords()).isEqualTo(FILES * PER_FILE);
    String expected = c.badFile().getFileName() + " at byte offset " + c.badOffset();
    int failures = 0;
    try (NDManager manager = NDManager.newBaseManager()) {
      for (int rank = 0; rank < 2; rank++) {
        try (PipelineSource in =
            PipelineSource.create(plan, OPTIONS, null, rank, 2, manager, new Configuration())) {
          Iterator<Batch> it = in.epoch(0, 0);
          while (it.hasNext()) {
            it.next().close();
          }
        } catch (RuntimeException e) {
          failures++;
          assertThat(e).hasStackTraceContaining(expected);
        }
      }
    }
    assertThat(failures)
        .as("the worker that owns the damaged file fails, the other does not")
        .isEqualTo(1);
  }

  /**
   * A training job on that data fails, and the task of the rank that read the record fails with the
   * file and offset (what the Spark UI and the driver log show). The exception {@code fit} throws
   * is Spark's "most recent failure", which is a race: the bad record's error or the other rank's
   * CollectiveException ("connection closed by rank 0") that it caused.
   */
  @Test
  void trainingOnABadRecordFailsAndTheFailedTaskNamesTheFile() throws Exception {
    Corrupted c = write(Damage.NOT_AN_EXAMPLE);
    DistributedTrainer job =
        DistributedTrainer.builder()
            .setModel(MlpSpec.of(8, 10, 16))
            .setLoss(LossSpec.SOFTMAX_CROSS_ENTROPY)
            .setOptimizer(OptimizerSpec.sgd().build())
            .setTrainingData(spec(c.dir()), OPTIONS)
            .setNumWorkers(2)
            .optEpochs(1)
            .optRingHost("127.0.0.1")
            .build();
    String expected = c.badFile().getFileName() + " at byte offset " + c.badOffset();
    Queue<String> taskErrors = new ConcurrentLinkedQueue<>();
    CountDownLatch named = new CountDownLatch(1);
    SparkListener listener =
        new SparkListener() {
          @Override
          public void onTaskEnd(SparkListenerTaskEnd end) {
            if (end.reason() instanceof ExceptionFailure) {
              String error = ((ExceptionFailure) end.reason()).toErrorString();
              taskErrors.add(error);
              if (error.contains(expected)) {
                named.countDown();
              }
            }
          }
        };
    spark.sparkContext().addSparkListener(listener);
    try {
      assertThatThrownBy(() -> job.fit(spark)).isInstanceOf(Exception.class);
      // the listener bus delivers task-end events asynchronously
      assertThat(named.await(30, TimeUnit.SECONDS))
          .as("a task failure naming %s among %s", expected, taskErrors)
          .isTrue();
    } finally {
      spark.sparkContext().removeSparkListener(listener);
    }
  }
}
