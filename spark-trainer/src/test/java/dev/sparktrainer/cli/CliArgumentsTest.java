package dev.sparktrainer.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.checkpoint.SkippedCheckpoint;
import dev.sparktrainer.train.metrics.Resume;
import dev.sparktrainer.train.metrics.WorkerCountChange;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The error contract without Spark: every bad input is one line naming the thing and what is
 * expected, exit code 2, and no Spark session is started.
 */
class CliArgumentsTest {
  @TempDir Path tmp;

  private int sessionsBefore;

  @BeforeEach
  void countSessions() {
    sessionsBefore = CliContext.SESSIONS.get();
  }

  @AfterEach
  void noSparkWasStarted() {
    assertThat(CliContext.SESSIONS.get()).as("Spark sessions started").isEqualTo(sessionsBefore);
    assertThat(
            SparkSession.getActiveSession().isEmpty() && SparkSession.getDefaultSession().isEmpty())
        .isTrue();
  }

  private String[] train(String... extra) throws IOException {
    Path data = Files.createDirectories(tmp.resolve("data"));
    Files.write(data.resolve("part-0.tfrecord"), new byte[0]);
    List<String> args =
        new ArrayList<>(
            List.of(
                "train",
                "--data",
                data.toString(),
                "--features",
                "pixels",
                "--label",
                "label",
                "--num-classes",
                "10",
                "--output",
                tmp.resolve("out").toString()));
    args.addAll(List.of(extra));
    return args.toArray(new String[0]);
  }

  private static void assertUsageError(CliRunner r, String... fragments) {
    assertThat(r.code()).as(r.err()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
    assertThat(r.error()).startsWith("error: ").doesNotContain("\n").contains(fragments);
    assertThat(r.out()).isEmpty();
  }

  @Test
  void unknownCommandAndOptions() throws IOException {
    assertUsageError(
        CliRunner.run("fit"),
        "Unknown command 'fit'",
        "train, evaluate, predict, inspect, convert");
    assertUsageError(
        CliRunner.run(train("--epoch", "3")),
        "Unknown option --epoch for train: did you mean --epochs?");
    assertUsageError(
        CliRunner.run(train("--prediction-col", "p")),
        "Unknown option --prediction-col for train",
        "not an option of train");
    assertUsageError(CliRunner.run(train("stray")), "Unexpected argument 'stray' for train");
  }

  @Test
  void missingAndMistypedValues() throws IOException {
    assertUsageError(
        CliRunner.run(
            "train", "--data", "x", "--features", "f", "--label", "l", "--num-classes", "3"),
        "Missing --output for train");
    assertUsageError(
        CliRunner.run(train("--epochs", "ten")), "Invalid --epochs 'ten': expected an integer");
    assertUsageError(
        CliRunner.run(train("--epochs", "0")), "Invalid --epochs 0: expected at least 1");
    assertUsageError(
        CliRunner.run(train("--learning-rate", "-1")),
        "Invalid --learning-rate -1.0: expected a positive");
    assertUsageError(
        CliRunner.run(train("--batch-size")),
        "Missing value for --batch-size: expected an integer");
    assertUsageError(
        CliRunner.run(train("--model", "lstm:12")),
        "Invalid --model 'lstm:12': expected",
        "mlp:H1,H2");
    assertUsageError(
        CliRunner.run(train("--model", "transformer:12")),
        "Invalid --model 'transformer:12': transformer needs a sequence feature column");
    assertUsageError(CliRunner.run(train("--model", "mlp:128,x")), "Invalid --model 'mlp:128,x'");
    assertUsageError(
        CliRunner.run(train("--optimizer", "lamb")),
        "Invalid --optimizer 'lamb': expected adam, adamw or sgd");
    assertUsageError(
        CliRunner.run(train("--gradient-precision", "fp8")),
        "Invalid --gradient-precision 'fp8': expected fp32 or bf16");
    assertUsageError(
        CliRunner.run(train("--gradient-precision", "fp16")),
        "Invalid --gradient-precision 'fp16': expected fp32 or bf16 (fp16 has too little range");
    assertUsageError(
        CliRunner.run(train("--image-transfer", "int8")),
        "Invalid --image-transfer 'int8': expected uint8, float32 or auto");
    assertUsageError(
        CliRunner.run(train("--precision", "fp16")),
        "Invalid --precision 'fp16': expected fp32 or bf16");
    assertUsageError(
        CliRunner.run(train("--optimizer-placement", "gpu")),
        "Invalid --optimizer-placement 'gpu': expected auto, device or host");
    assertUsageError(CliRunner.run(train("--bucket-mb", "0")), "Invalid --bucket-mb");
    assertUsageError(
        CliRunner.run(train("--accumulate-steps", "0")),
        "Invalid --accumulate-steps 0: expected >= 1");
    assertUsageError(
        CliRunner.run(train("--rescale", "epochs")),
        "Invalid --rescale 'epochs': expected batch or lr");
    assertUsageError(
        CliRunner.run(train("--workers", "3", "--min-workers", "4")),
        "Invalid --min-workers 4: expected 1 to --workers (3)");
    assertUsageError(
        CliRunner.run(train("--slot-wait", "-1")), "Invalid --slot-wait -1: expected >= 0");
    assertUsageError(CliRunner.run(train("--bucket-mb", "4096")), "expected 0.001 to 1024 (MiB)");
    assertUsageError(
        CliRunner.run(train("--ring-truststore", "t.p12")),
        "--ring-truststore needs --ring-keystore too");
    assertUsageError(
        CliRunner.run(train("--ring-transport", "shm")),
        "Invalid --ring-transport 'shm': expected auto or tcp");
    assertUsageError(
        CliRunner.run(train("--keep-checkpoints", "0")),
        "Invalid --keep-checkpoints 0: expected at least 1");
    assertUsageError(
        CliRunner.run(train("--checkpoint-every-steps", "-1")),
        "Invalid --checkpoint-every-steps -1: expected >= 0");
    assertUsageError(
        CliRunner.run(train("--sharding", "rows")),
        "Invalid --sharding 'rows': expected auto, file or data");
    if (System.getenv("SPARK_TRAINER_RING_KEYSTORE_PASSWORD") == null) {
      assertUsageError(
          CliRunner.run(train("--ring-keystore", "k.p12")),
          "--ring-keystore needs the key store's password in the environment variable SPARK_TRAINER_RING_KEYSTORE_PASSWORD");
    }
    assertUsageError(
        CliRunner.run(train("--num-classes", "1")), "Invalid --num-classes 1: expected at least 2");
    assertUsageError(
        CliRunner.run(train("--features", "pixels:8xq")), "Invalid --features 'pixels:8xq'");
    assertUsageError(
        CliRunner.run(train("--format", "csv")),
        "Invalid --format 'csv': expected tfrecord or parquet");
    assertUsageError(
        CliRunner.run(train("--conf", "spark.executor.memory")),
        "Invalid --conf 'spark.executor.memory': expected KEY=VALUE");
    // A CNN needs image-shaped features: checked before any data is read.
    assertUsageError(
        CliRunner.run(train("--features", "pixels:64", "--model", "cnn")),
        "Invalid --model 'cnn'",
        "CxHxW");
  }

  @Test
  void pathsWithoutData() throws IOException {
    Path empty = Files.createDirectories(tmp.resolve("empty"));
    Files.writeString(empty.resolve("_SUCCESS"), "");
    String[] args = train();
    args[2] = empty.toString();
    assertUsageError(
        CliRunner.run(args), "No data at " + empty + " (--data): it holds no data files");
    args[2] = tmp.resolve("nowhere").toString();
    assertUsageError(
        CliRunner.run(args),
        "No data at " + tmp.resolve("nowhere") + " (--data): the path does not exist");
    Path csv = Files.createDirectories(tmp.resolve("csv"));
    Files.writeString(csv.resolve("a.csv"), "1,2\n");
    args[2] = csv.toString();
    assertUsageError(
        CliRunner.run(args),
        "holds a.csv: expected TFRecord or Parquet files",
        "spark-trainer convert");
    assertUsageError(
        CliRunner.run(train("--validation-data", tmp.resolve("nope").toString())),
        "No data at " + tmp.resolve("nope") + " (--validation-data)");
    assertUsageError(
        CliRunner.run("evaluate", "--model", tmp.toString(), "--data", tmp.toString()),
        "No model at " + tmp + " (--model): expected model.properties and model.params");
    assertUsageError(CliRunner.run("inspect"), "Missing PATH for inspect");
    assertUsageError(CliRunner.run("inspect", tmp.resolve("nowhere").toString()), "No data at");
  }

  @Test
  void configFileFillsInAndFlagsWin() throws IOException {
    Path cfg = tmp.resolve("train.yaml");
    Files.writeString(
        cfg,
        "epochs: 0\nbatch-size: 16\nmodel: mlp:32\nconf:\n  spark.ui.enabled: false\n"
            + "prediction-col: p   # an option of predict: ignored here\n");
    // From the file: epochs 0 is rejected, naming the file.
    assertUsageError(
        CliRunner.run(train("--config", cfg.toString())),
        "Invalid epochs (from " + cfg + ") 0: expected at least 1");
    Files.writeString(cfg, "epochs: three\n");
    assertUsageError(
        CliRunner.run(train("--config", cfg.toString())),
        "Invalid epochs 'three' in " + cfg + ": expected an integer");
    Files.writeString(cfg, "epochs: 3\nepohcs: 4\n");
    assertUsageError(
        CliRunner.run(train("--config", cfg.toString())),
        "Unknown key 'epohcs' in config file " + cfg);
    Files.writeString(cfg, "epochs: [1, 2\n");
    assertUsageError(
        CliRunner.run(train("--config", cfg.toString())),
        "Invalid --config '" + cfg + "': not valid YAML");
    assertUsageError(
        CliRunner.run(train("--config", tmp.resolve("none.yaml").toString())), "no such file");

    Flags f = new TrainCommand().flags();
    f.parse(new String[] {"--epochs", "7", "--config", "x"}, List.of());
    Files.writeString(
        cfg,
        "epochs: 3\nbatch-size: 16\nfeatures: [a, 'b:2x2']\nconf: {spark.a: 1, spark.b: two}\n");
    f.applyConfig(cfg.toString(), List.of());
    assertThat(f.integer("epochs")).isEqualTo(7); // the command line wins
    assertThat(f.integer("batch-size")).isEqualTo(16);
    assertThat(f.string("features")).isEqualTo("a,b:2x2");
    assertThat(f.list("conf")).containsExactly("spark.a=1", "spark.b=two");
    assertThat(f.integer("workers")).isEqualTo(2); // the default
    assertThat(f.bool("nondeterministic")).isFalse();
    Flags g = new TrainCommand().flags();
    g.parse(new String[] {"--shuffle-buffer", "0", "--nondeterministic"}, List.of());
    assertThat(g.bool("nondeterministic")).isTrue();
  }

  /** The banner names the precision, the optimizer's placement and the image transfer, resolved. */
  @Test
  void theBannerNamesPrecisionPlacementAndImageTransfer() {
    Flags f = new TrainCommand().flags();
    f.parse(new String[] {"--workers", "3", "--batch-size", "16", "--epochs", "4"}, List.of());
    assertThat(TrainCommand.settings(f))
        .isEqualTo(
            "precision fp32, gradients fp32, optimizer on the host (auto on a CPU),"
                + " image transfer float32 (no encoded-image feature)");
    Flags g = new TrainCommand().flags();
    g.parse(
        new String[] {
          "--precision",
          "BF16",
          "--gradient-precision",
          "bf16",
          "--gpus",
          "--image-transfer",
          "uint8"
        },
        List.of());
    assertThat(TrainCommand.settings(g))
        .isEqualTo(
            "precision bf16, gradients bf16, optimizer on the device (auto on a GPU),"
                + " image transfer float32 (no encoded-image feature)");
    Flags h = new TrainCommand().flags();
    h.parse(new String[] {"--optimizer-placement", "device"}, List.of());
    assertThat(TrainCommand.settings(h)).contains("optimizer on the device,");
    // Encoded image features cross as --image-transfer resolves.
    Flags photos = new TrainCommand().flags();
    photos.parse(new String[] {"--format", "images", "--gpus"}, List.of());
    assertThat(TrainCommand.settings(photos)).endsWith("image transfer uint8 (auto on a GPU)");
    Flags column = new TrainCommand().flags();
    column.parse(new String[] {"--features", "photo:image"}, List.of());
    assertThat(TrainCommand.settings(column)).endsWith("image transfer float32 (auto on a CPU)");
  }

  @Test
  void helpForEveryCommand() {
    CliRunner overview = CliRunner.run("--help");
    assertThat(overview.code()).isZero();
    assertThat(overview.out())
        .contains("train", "evaluate", "predict", "inspect", "convert", "--master");
    for (String cmd : List.of("train", "evaluate", "predict", "inspect", "convert")) {
      CliRunner r = CliRunner.run(cmd, "--help");
      assertThat(r.code()).isZero();
      assertThat(r.out())
          .startsWith("Usage: spark-trainer " + cmd)
          .contains("--config FILE", "--master URL");
    }
    assertThat(CliRunner.run("train", "--help").out().replaceAll("\\s+", " "))
        .contains(
            "--num-classes K",
            "--workers N",
            "(default 2)",
            "--validation-data PATH",
            "--checkpoint-dir DIR",
            "--data PATH",
            "(required)");
    assertThat(CliRunner.run().code()).isEqualTo(SparkTrainerCli.EXIT_USAGE);
  }

  @Test
  void aClusterMasterIsSubmittedThroughSparkSubmit() throws Exception {
    Path home = Files.createDirectories(tmp.resolve("spark/bin"));
    Path argsFile = tmp.resolve("submitted.txt");
    Path submit = home.resolve("spark-submit");
    Files.writeString(
        submit, "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > '" + argsFile + "'\nexit 3\n");
    Files.setPosixFilePermissions(submit, PosixFilePermissions.fromString("rwxr-xr-x"));
    Path jar = Files.writeString(tmp.resolve("spark-trainer-9-all.jar"), "");
    Map<String, String> env =
        Map.of("SPARK_HOME", tmp.resolve("spark").toString(), "SPARK_TRAINER_JAR", jar.toString());

    CliRunner r =
        CliRunner.run(
            env,
            train(
                "--master",
                "spark://h:7077",
                "--conf",
                "spark.executor.memory=2g",
                "--epochs",
                "3"));
    assertThat(r.code()).as("spark-submit's exit code").isEqualTo(3);
    List<String> submitted = Files.readAllLines(argsFile);
    assertThat(String.join(" ", submitted))
        .startsWith("--master spark://h:7077 --class " + SparkTrainerCli.class.getName())
        .contains(
            "--conf spark.executor.extraJavaOptions=-Dai.djl.offline=true",
            "--conf spark.executor.memory=2g",
            jar + " train --data ",
            "--epochs 3");
    assertThat(submitted.subList(submitted.indexOf(jar.toString()), submitted.size()))
        .doesNotContain("--master", "--conf");

    // Bad input fails here, before anything is submitted.
    Files.delete(argsFile);
    assertUsageError(
        CliRunner.run(env, train("--master", "yarn", "--epochs", "x")), "Invalid --epochs 'x'");
    assertThat(argsFile).doesNotExist();
    assertUsageError(
        CliRunner.run(Map.of("PATH", tmp.toString()), train("--master", "yarn")),
        "--master needs Spark's spark-submit: set SPARK_HOME");
  }

  @Test
  void resumesAreListedWithTheCheckpointsTheySkipped() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream err = new PrintStream(bytes, true, StandardCharsets.UTF_8);
    SkippedCheckpoint bad =
        new SkippedCheckpoint("hdfs://nn/ckpt/ckpt-66.bin", "corrupt at byte 9: x");
    TrainCommand.printResumes(
        List.of(
            new Resume(0, 0, 0, 0, "hdfs://nn/ckpt", List.of(bad)),
            new Resume(44, 2, 0, 1, "hdfs://nn/ckpt", List.of(bad)),
            new Resume(66, 3, 0, 0, "hdfs://nn/ckpt"),
            new Resume(
                70,
                3,
                4,
                2,
                "hdfs://nn/ckpt",
                List.of(),
                new WorkerCountChange(3, 2, 6, 2, 1, false))),
        err);
    assertThat(bytes.toString(StandardCharsets.UTF_8).split("\\R"))
        .containsExactly(
            "Started from scratch (a new run of the job): every checkpoint in hdfs://nn/ckpt was corrupt",
            "  skipped checkpoint hdfs://nn/ckpt/ckpt-66.bin: corrupt at byte 9: x",
            "Resumed from the checkpoint at step 44 (epoch 3, Spark stage attempt 1)",
            "  skipped checkpoint hdfs://nn/ckpt/ckpt-66.bin: corrupt at byte 9: x",
            "Resumed from the checkpoint at step 66 (epoch 4, a new run of the job)",
            "Resumed from the checkpoint at step 70 (epoch 4, Spark stage attempt 2): 3 -> 2 workers, batch 6 x 2"
                + " accumulated (global 24)");
  }
}
