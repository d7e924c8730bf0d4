package dev.sparktrainer.it.notebooks;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sparktrainer.it.deploy.Build;
import dev.sparktrainer.it.deploy.ChildJvm;
import java.awt.image.BufferedImage;
import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The notebooks in notebooks/, each run cell by cell through a real Scala 2.13 REPL in its own JVM
 * ({@link NotebookRunner}) with Spark and the shaded trainer jar on the class path — the project's
 * own modules and the libraries the shaded jar bundles are left off, so the notebook gets the
 * trainer as a user does — against local Spark: every cell must succeed, the plot must be a real
 * PNG, and the final held-out accuracy printed by the notebook must reach 0.9. Both JVMs start
 * together (most of their time is the Scala compiler, one thread each) and each test checks its
 * own.
 */
class NotebooksIT {
  private static final Pattern ACCURACY = Pattern.compile("Held-out accuracy: (\\d\\.\\d+)");
  @TempDir static Path tmp;
  static ChildJvm almond;
  static ChildJvm zeppelin;

  @BeforeAll
  static void start() throws Exception {
    almond = start("almond", "spark-trainer-digits.ipynb");
    zeppelin = start("zeppelin", "spark-trainer-digits.zpln");
  }

  @AfterAll
  static void stop() throws InterruptedException {
    for (ChildJvm jvm : new ChildJvm[] {almond, zeppelin}) {
      if (jvm != null) {
        jvm.close();
      }
    }
  }

  private static ChildJvm start(String kind, String file) throws Exception {
    Path notebook = Build.root().resolve("notebooks/" + file);
    assertThat(notebook).isRegularFile();
    Path dir = Files.createDirectories(tmp.resolve(kind));
    List<String> cp = new ArrayList<>();
    cp.add(Build.root().resolve("integration-tests/target/test-classes").toString());
    cp.addAll(Build.sparkClassPath());
    cp.add(Build.shadedJar().toString());
    List<String> options = new ArrayList<>(Build.jvmOptions());
    options.addAll(
        List.of(
            "-Djava.io.tmpdir=" + dir,
            "-Djava.awt.headless=true",
            "-Dspark.ui.enabled=false",
            "-Dspark.driver.host=127.0.0.1",
            "-Dspark.driver.bindAddress=127.0.0.1"));
    List<String> cmd =
        ChildJvm.java(
            options, cp, NotebookRunner.class.getName(), List.of(kind, notebook.toString()));
    Map<String, String> env =
        Map.of(
            "SPARK_TRAINER_JAR",
            Build.shadedJar().toString(),
            "DIGITS_TFRECORD",
            dir.resolve("digits").toString(),
            "SPARK_LOCAL_IP",
            "127.0.0.1");
    return ChildJvm.start(cmd, env, dir, tmp.resolve(kind + ".log"));
  }

  /**
   * Waits for the notebook's JVM; checks every cell ran and the accuracy it printed; returns the
   * output.
   */
  private static String finish(String kind, ChildJvm jvm) throws Exception {
    assertThat(jvm.waitFor(Duration.ofMinutes(6)))
        .as(kind + " notebook still running after 6 min\n" + jvm.describe())
        .isTrue();
    String out = jvm.output();
    assertThat(jvm.exitValue()).as(jvm.describe()).isZero();
    assertThat(out).as(jvm.describe()).contains("[notebook done]").doesNotContain(" failed: ");
    assertThat(out).contains("trainer classes from: file:" + Build.shadedJar());
    Matcher m = ACCURACY.matcher(out);
    assertThat(m.find())
        .as("the notebook prints the held-out accuracy\n" + jvm.describe())
        .isTrue();
    double accuracy = Double.parseDouble(m.group(1));
    System.out.println(kind + " notebook: held-out accuracy " + accuracy);
    assertThat(accuracy)
        .as("held-out accuracy of the notebook's model")
        .isGreaterThanOrEqualTo(0.9);
    return out;
  }

  /** The PNG in an {@code <img src="data:image/png;base64,...">} the notebook displayed. */
  private static void checkPlot(String out, String marker) throws Exception {
    Matcher m =
        Pattern.compile(
                "(?m)^"
                    + Pattern.quote(marker)
                    + "<img alt=\"training curves\" "
                    + "src=\"data:image/png;base64,([A-Za-z0-9+/=]+)\"/>$")
            .matcher(out);
    assertThat(m.find()).as("the plot displayed inline after " + marker).isTrue();
    BufferedImage img =
        ImageIO.read(new ByteArrayInputStream(Base64.getDecoder().decode(m.group(1))));
    assertThat(img).as("a PNG image").isNotNull();
    assertThat(img.getWidth()).isEqualTo(800);
    assertThat(img.getHeight()).isEqualTo(600);
  }

  @Test
  void almondNotebookRunsCellByCell() throws Exception {
    String out = finish("almond", almond);
    // Exactly the Almond-only lines were left out: Spark at the pinned version, and the shaded jar.
    List<String> magic = out.lines().filter(l -> l.startsWith("[almond magic left out] ")).toList();
    String spark = Build.pom("spark.version");
    assertThat(Build.pom("scala.binary.version"))
        .isEqualTo("2.13"); // `::` in $ivy: the kernel's Scala 2.13
    assertThat(magic)
        .containsExactly(
            "[almond magic left out] import $ivy.`org.apache.spark::spark-sql:" + spark + "`",
            "[almond magic left out] import $ivy.`org.apache.spark::spark-mllib:" + spark + "`",
            "[almond magic left out] interp.load.cp(os.Path(trainerJar.getPath))");
    checkPlot(out, "[kernel.publish.html] ");
  }

  @Test
  void zeppelinNoteRunsParagraphByParagraph() throws Exception {
    String out = finish("zeppelin", zeppelin);
    assertThat(out)
        .contains(
            "[zeppelin conf] spark.jars=/opt/spark-trainer/" + Build.shadedJar().getFileName());
    assertThat(out).contains("[zeppelin conf] spark.master=local[2]");
    checkPlot(out, "%html ");
  }
}
