package dev.sparktrainer.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.metrics.EpochMetrics;
import dev.sparktrainer.train.metrics.History;
import java.awt.AWTError;
import java.io.ByteArrayOutputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The train command's side outputs: metrics.json is replaced atomically; the plot hides only what
 * it should.
 */
class TrainOutputsTest {
  @TempDir Path tmp;

  @AfterEach
  void reset() {
    Failing.failure = null;
  }

  /**
   * Local files under {@code failing:}: writes throw {@link #failure} after the first half of the
   * bytes.
   */
  public static class Failing extends RawLocalFileSystem {
    static volatile Supplier<Throwable> failure;

    @Override
    public URI getUri() {
      return URI.create("failing:///");
    }

    @Override
    public String getScheme() {
      return "failing";
    }

    @Override
    protected OutputStream createOutputStreamWithMode(
        org.apache.hadoop.fs.Path f, boolean append, FsPermission permission) throws IOException {
      OutputStream out = super.createOutputStreamWithMode(f, append, permission);
      return new FilterOutputStream(out) {
        @Override
        public void write(byte[] b, int off, int len) throws IOException {
          Supplier<Throwable> fail = failure;
          if (fail == null) {
            out.write(b, off, len);
            return;
          }
          out.write(b, off, len / 2);
          out.flush();
          Throwable t = fail.get();
          if (t instanceof IOException io) {
            throw io;
          }
          if (t instanceof Error e) {
            throw e;
          }
          throw (RuntimeException) t;
        }
      };
    }
  }

  private static Configuration conf() {
    Configuration conf = new Configuration();
    conf.set("fs.failing.impl", Failing.class.getName());
    conf.setBoolean("fs.failing.impl.disable.cache", true);
    return conf;
  }

  @Test
  void metricsJsonIsReplacedWholeOrNotAtAll() throws IOException {
    String path = "failing://" + tmp.resolve("metrics.json");
    TrainCommand.write(path, "{\"run\": 1}\n".getBytes(StandardCharsets.UTF_8), conf());
    Failing.failure = () -> new IOException("simulated: disk full");
    assertThatThrownBy(
            () ->
                TrainCommand.write(
                    path,
                    "{\"run\": 2, \"more\": \"...\"}\n".getBytes(StandardCharsets.UTF_8),
                    conf()))
        .hasMessageContaining("disk full");
    Failing.failure = null;
    assertThat(tmp.resolve("metrics.json"))
        .as("the previous metrics, whole")
        .hasContent("{\"run\": 1}");
    try (Stream<Path> s = Files.list(tmp)) {
      assertThat(s.map(p -> p.getFileName().toString())).containsExactly("metrics.json");
    }
    TrainCommand.write(path, "{\"run\": 3}\n".getBytes(StandardCharsets.UTF_8), conf());
    assertThat(tmp.resolve("metrics.json")).hasContent("{\"run\": 3}");
  }

  private static History history() {
    return new History(
        List.of(
            new EpochMetrics(
                0, 10, 320, 1.5, 0.5, 1.6, 0.45, 2.0, 160, 0.1, 1.5, 0.2, 0.1, 0.8, 0.3, "00")));
  }

  @Test
  void thePlotHidesMissingFontsAndDisplaysButNotOutOfMemory() {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    CliContext ctx =
        new CliContext(
            new PrintStream(new ByteArrayOutputStream()),
            new PrintStream(err, true, StandardCharsets.UTF_8),
            Map.of(),
            () -> null);
    String path = "failing://" + tmp.resolve("training.png");

    assertThat(TrainCommand.plot(history(), "t", path, conf(), ctx)).isTrue();

    for (Supplier<Throwable> environment :
        List.<Supplier<Throwable>>of(
            () -> new IOException("simulated: no space"),
            () -> new AWTError("simulated: Can't connect to X11 window server"),
            () ->
                new UnsatisfiedLinkError(
                    "simulated: libfontmanager.so: libfreetype.so.6: cannot open"),
            () -> new Error("Probable fatal error:No fonts found."))) {
      Failing.failure = environment;
      assertThat(TrainCommand.plot(history(), "t", path, conf(), ctx))
          .as(environment.get().toString())
          .isFalse();
    }
    assertThat(err.toString(StandardCharsets.UTF_8))
        .contains("warning: could not draw", "No fonts found");

    Failing.failure = () -> new OutOfMemoryError("simulated: Java heap space");
    assertThatThrownBy(() -> TrainCommand.plot(history(), "t", path, conf(), ctx))
        .isInstanceOf(OutOfMemoryError.class);
    Failing.failure = () -> new StackOverflowError("simulated");
    assertThatThrownBy(() -> TrainCommand.plot(history(), "t", path, conf(), ctx))
        .isInstanceOf(StackOverflowError.class);
  }

  @Test
  void theBucketSizeDefaultIsTheTrainersConstant() {
    Flags f = new Flags("train");
    new TrainCommand().define(f);
    Flags.Flag bucket =
        f.all().stream().filter(x -> x.name().equals("bucket-mb")).findFirst().orElseThrow();
    assertThat(Double.parseDouble(bucket.defaultValue()) * (1 << 20))
        .isEqualTo((double) DistributedTrainer.DEFAULT_BUCKET_BYTES);
  }
}
