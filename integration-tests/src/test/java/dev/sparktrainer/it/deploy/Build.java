package dev.sparktrainer.it.deploy;

import dev.sparktrainer.cli.SparkTrainerCli;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/**
 * What the build says, for the deploy and notebook tests: the parent pom's pinned versions, the
 * shaded jar and its main class, the command line's flags (from its own {@code --help}), the JVM
 * options the tests use, and a class path of Spark without the project (for child JVMs that get the
 * shaded jar the way a cluster would).
 */
public final class Build {
  private Build() {}

  /** The repository root (Failsafe runs in integration-tests/). */
  public static Path root() {
    Path here = Paths.get("").toAbsolutePath();
    for (Path p = here; p != null; p = p.getParent()) {
      if (Files.isDirectory(p.resolve("deploy"))
          && Files.isRegularFile(p.resolve("pom.xml"))
          && Files.isDirectory(p.resolve("spark-trainer"))) {
        return p;
      }
    }
    throw new IllegalStateException(
        "No repository root (with deploy/, spark-trainer/ and pom.xml) above " + here);
  }

  /** A property of the parent pom ({@code spark.version}, {@code project.version}...). */
  public static String pom(String name) {
    try {
      Document doc =
          DocumentBuilderFactory.newInstance()
              .newDocumentBuilder()
              .parse(root().resolve("pom.xml").toFile());
      Element project = doc.getDocumentElement();
      if (name.equals("project.version")) {
        return childText(project, "version");
      }
      Element props = (Element) project.getElementsByTagName("properties").item(0);
      String v = childText(props, name);
      if (v == null) {
        throw new IllegalStateException("The parent pom has no property " + name);
      }
      return v;
    } catch (Exception e) {
      throw new IllegalStateException("Cannot read the parent pom: " + e, e);
    }
  }

  private static String childText(Element parent, String tag) {
    NodeList nodes = parent.getChildNodes();
    for (int i = 0; i < nodes.getLength(); i++) {
      Node n = nodes.item(i);
      if (n instanceof Element && ((Element) n).getTagName().equals(tag)) {
        return n.getTextContent().trim();
      }
    }
    return null;
  }

  /** spark-trainer/target/spark-trainer-VERSION-all.jar, which must have been built. */
  public static Path shadedJar() {
    Path jar =
        root().resolve("spark-trainer/target/spark-trainer-" + pom("project.version") + "-all.jar");
    if (!Files.isRegularFile(jar)) {
      throw new IllegalStateException(
          "No shaded jar at " + jar + ": build it first (mvn -pl integration-tests -am verify)");
    }
    return jar;
  }

  /** The shaded jar's Main-Class, and whether it holds {@code className}. */
  public static String mainClass() throws IOException {
    try (JarFile jar = new JarFile(shadedJar().toFile())) {
      return jar.getManifest().getMainAttributes().getValue("Main-Class");
    }
  }

  public static boolean shadedJarHas(String className) throws IOException {
    try (JarFile jar = new JarFile(shadedJar().toFile())) {
      return jar.getEntry(className.replace('.', '/') + ".class") != null;
    }
  }

  private static final Pattern FLAG = Pattern.compile("^  --([a-z0-9-]+)", Pattern.MULTILINE);

  /** The options of a command of the command line, from its own {@code --help}. */
  public static Set<String> cliFlags(String command) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code =
        new SparkTrainerCli(
                new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8),
                Map.of())
            .run(new String[] {command, "--help"});
    String help = out.toString(StandardCharsets.UTF_8);
    if (code != 0 || !help.startsWith("Usage: spark-trainer " + command)) {
      throw new IllegalStateException(
          "spark-trainer " + command + " --help failed (" + code + "): " + help + err);
    }
    Set<String> flags = new LinkedHashSet<>();
    Matcher m = FLAG.matcher(help);
    while (m.find()) {
      flags.add(m.group(1));
    }
    return flags;
  }

  /**
   * The JVM options of the project's tests ({@code test.jvm.args}: Spark's --add-opens,
   * -Dai.djl.offline=true).
   */
  public static List<String> jvmOptions() throws IOException {
    Path f = root().resolve("integration-tests/target/jvm-options.txt");
    List<String> out = new ArrayList<>();
    for (String s : Files.readString(f).trim().split("\\s+")) {
      if (!s.startsWith("-Xmx")) {
        out.add(s);
      }
    }
    out.add("-Xmx2g");
    return out;
  }

  /**
   * The test class path without the project's modules and the libraries the shaded jar bundles
   * (DJL, PyTorch, JNA, JFreeChart): Spark, Scala, Hadoop — what a Spark installation provides.
   * Child JVMs get the shaded jar on top of it, as spark-submit and notebooks do.
   */
  public static List<String> sparkClassPath() throws IOException {
    Path f = root().resolve("integration-tests/target/test-classpath.txt");
    List<String> out = new ArrayList<>();
    for (String e : Files.readString(f).trim().split(File.pathSeparator)) {
      String p = e.replace('\\', '/');
      if (p.contains("/spark-trainer/target/")
          || p.contains("/tfrecord-datasource/target/")
          || p.contains("/dev/sparktrainer/")
          || p.contains("/ai/djl/")
          || p.contains("/net/java/dev/jna/")
          || p.contains("/org/jfree/")) {
        continue;
      }
      out.add(e);
    }
    return out;
  }
}
