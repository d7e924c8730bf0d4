package dev.sparktrainer.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.MlpSpec;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link TrainedModel#save} is all or nothing: a save that stops between two files leaves the
 * previous complete model (stores that rename directories atomically) or nothing marked complete
 * (object stores); {@link TrainedModel#load} checks the completion marker, sizes and checksums.
 */
class TrainedModelSaveTest {
  @TempDir Path tmp;

  @BeforeEach
  void reset() {
    Crashing.crashOn = null;
  }

  private static TrainedModel model(int seed) {
    return TestModels.random(MlpSpec.of(8, 3, 4), LossSpec.SOFTMAX_CROSS_ENTROPY, seed);
  }

  /**
   * {@code scheme:} as the local file system whose {@code create} of a file named {@link #crashOn}
   * fails.
   */
  private static Configuration conf(String scheme, Class<? extends RawLocalFileSystem> impl) {
    Configuration conf = new Configuration();
    conf.set("fs." + scheme + ".impl", impl.getName());
    conf.setBoolean("fs." + scheme + ".impl.disable.cache", true);
    return conf;
  }

  /**
   * Local files under {@code crashing:}: creating a file named {@link #crashOn} fails, as a killed
   * writer would stop.
   */
  public static class Crashing extends RawLocalFileSystem {
    static volatile String crashOn;

    String scheme() {
      return "crashing";
    }

    @Override
    public URI getUri() {
      return URI.create(scheme() + ":///");
    }

    @Override
    public String getScheme() {
      return scheme();
    }

    @Override
    protected OutputStream createOutputStreamWithMode(
        org.apache.hadoop.fs.Path f, boolean append, FsPermission permission) throws IOException {
      if (f.getName().equals(crashOn)) {
        throw new IOException("simulated crash before writing " + f.getName());
      }
      return super.createOutputStreamWithMode(f, append, permission);
    }
  }

  /** The same under {@code s3a:}: an object store, whose directories are not renamed atomically. */
  public static class CrashingObjectStore extends Crashing {
    @Override
    String scheme() {
      return "s3a";
    }
  }

  @Test
  void aSaveThatStopsAfterTheParamsLeavesThePreviousModel() throws IOException {
    Configuration conf = conf("crashing", Crashing.class);
    String dir = "crashing://" + tmp.resolve("model");
    TrainedModel first = model(1);
    TrainedModel second = model(2);
    assertThat(Arrays.equals(second.parameterBytes(), first.parameterBytes())).isFalse();
    first.save(dir, conf);

    Crashing.crashOn = "history.json"; // written after model.params
    assertThatThrownBy(() -> second.save(dir, conf)).hasStackTraceContaining("simulated crash");
    Crashing.crashOn = null;

    assertThat(TrainedModel.load(dir, conf).parameterBytes())
        .as("the previous, complete model")
        .matches(b -> Arrays.equals(b, first.parameterBytes()), "the first model's parameters");
    // Nothing of the failed save is left next to it.
    try (Stream<Path> s = Files.list(tmp)) {
      assertThat(s.map(p -> p.getFileName().toString())).containsExactly("model");
    }
    second.save(dir, conf);
    assertThat(TrainedModel.load(dir, conf).parameterBytes()).isEqualTo(second.parameterBytes());
  }

  @Test
  void onAnObjectStoreAStoppedSaveLeavesNothingMarkedComplete() throws IOException {
    Configuration conf = conf("s3a", CrashingObjectStore.class);
    String dir = "s3a://" + tmp.resolve("model");
    model(1).save(dir, conf);
    TrainedModel second = model(2);
    Crashing.crashOn = "history.json";
    assertThatThrownBy(() -> second.save(dir, conf)).hasStackTraceContaining("simulated crash");
    Crashing.crashOn = null;

    assertThatThrownBy(() -> TrainedModel.load(dir, conf))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("_COMPLETE");
    // Re-running over the incomplete leftover succeeds.
    second.save(dir, conf);
    assertThat(TrainedModel.load(dir, conf).parameterBytes()).isEqualTo(second.parameterBytes());
    assertThat(tmp.resolve("model/_COMPLETE")).exists();
  }

  @Test
  void loadWithoutTheMarkerFailsNamingIt() throws IOException {
    String dir = tmp.resolve("model").toString();
    model(1).save(dir, new Configuration());
    Files.deleteIfExists(tmp.resolve("model/_COMPLETE"));
    Files.deleteIfExists(tmp.resolve("model/._COMPLETE.crc"));
    assertThatThrownBy(() -> TrainedModel.load(dir, new Configuration()))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("_COMPLETE")
        .hasMessageContaining(dir);
  }

  @Test
  void aCorruptOrTruncatedParamsFileFailsNamingIt() throws IOException {
    for (boolean truncate : new boolean[] {false, true}) {
      Path d = tmp.resolve("model-" + truncate);
      model(1).save(d.toString(), new Configuration());
      Path params = d.resolve("model.params");
      byte[] b = Files.readAllBytes(params);
      if (truncate) {
        b = Arrays.copyOf(b, b.length - 10);
      } else {
        b[b.length / 2] ^= 0x40;
      }
      Files.write(params, b);
      Files.deleteIfExists(
          d.resolve(".model.params.crc")); // what the marker catches, not Hadoop's side file
      assertThatThrownBy(() -> TrainedModel.load(d.toString(), new Configuration()))
          .as("truncated " + truncate)
          .isInstanceOf(IOException.class)
          .hasMessageContaining("model.params");
    }
  }

  @Test
  void reSavingOverAnIncompleteLeftoverSucceedsButForeignFilesAreKept() throws IOException {
    Path d = tmp.resolve("model");
    Files.createDirectories(d);
    Files.write(
        d.resolve("model.params"), new byte[] {1, 2, 3}); // a save killed half-way, before markers
    TrainedModel m = model(3);
    m.save(
        d.toString(), new Configuration(), Map.of("inputs.properties", "features=x\n".getBytes()));
    TrainedModel loaded = TrainedModel.load(d.toString(), new Configuration());
    assertThat(loaded.parameterBytes()).isEqualTo(m.parameterBytes());
    assertThat(d.resolve("inputs.properties")).hasContent("features=x");

    // A directory holding something that is not part of a model is not replaced (nor deleted).
    Path other = tmp.resolve("home");
    Files.createDirectories(other);
    Files.write(other.resolve("notes.txt"), new byte[] {1});
    assertThatThrownBy(() -> m.save(other.toString(), new Configuration()))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("notes.txt");
    assertThat(other.resolve("notes.txt")).exists();
  }
}
