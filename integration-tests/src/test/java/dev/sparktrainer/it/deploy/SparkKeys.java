package dev.sparktrainer.it.deploy;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Enumeration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.SparkConf;
import org.apache.spark.internal.config.ConfigEntry$;
import org.apache.spark.resource.ResourceUtils$;

/**
 * Spark's own configuration keys, to check every {@code spark.*} key in deploy/ against:
 *
 * <ul>
 *   <li>every {@code ConfigEntry} Spark registers: core ({@code org.apache.spark.internal.config}
 *       and its objects, found in spark-core's jar), SQL ({@code SQLConf}, {@code StaticSQLConf})
 *       and Kubernetes ({@code org.apache.spark.deploy.k8s.Config} of spark-kubernetes
 *       ${spark.version}, loaded in its own class loader, never on the test class path); plus the
 *       prefixes Kubernetes' {@code Config} declares ({@code spark.kubernetes.driver.label.} ...);
 *   <li>YARN: the keys and prefixes in spark-yarn's {@code deploy.yarn.config} classes, read from
 *       the jar's constant pools (Spark 4.x publishes no spark-yarn; the newest, 3.5.6, is used);
 *   <li>resource keys {@code
 *       spark.{driver,executor,task}.resource.NAME.{amount,discoveryScript,vendor}} (suffixes from
 *       Spark's {@code ResourceUtils});
 *   <li>two families Spark's configuration guide documents without a ConfigEntry: {@code
 *       spark.executorEnv.NAME} and {@code spark.hadoop.KEY}.
 * </ul>
 */
public final class SparkKeys {
  private static final List<String> DOCUMENTED_PREFIXES =
      List.of("spark.executorEnv.", "spark.hadoop.");
  private static final Pattern YARN_KEY = Pattern.compile("spark\\.yarn\\.[A-Za-z0-9._/-]*");

  private final Set<String> yarnKeys = new TreeSet<>();
  private final Set<String> prefixes = new TreeSet<>(DOCUMENTED_PREFIXES);
  private final Pattern resourceKey;

  private SparkKeys() {
    ResourceUtils$ r = ResourceUtils$.MODULE$;
    resourceKey =
        Pattern.compile(
            "spark\\.(driver|executor|task)\\.resource\\.[A-Za-z0-9_.-]+\\.("
                + r.AMOUNT()
                + "|"
                + r.DISCOVERY_SCRIPT()
                + "|"
                + r.VENDOR()
                + ")");
  }

  private static SparkKeys loaded;

  /**
   * Once per JVM: Spark's registry refuses a second registration of a key, which loading
   * Kubernetes' {@code Config} in a second class loader would be.
   */
  public static synchronized SparkKeys load() throws Exception {
    if (loaded == null) {
      loaded = read();
    }
    return loaded;
  }

  private static SparkKeys read() throws Exception {
    SparkKeys k = new SparkKeys();
    ClassLoader loader = SparkKeys.class.getClassLoader();
    // Core: the package object and every object beside it (UI, Deploy, Worker...).
    Path core =
        Path.of(SparkConf.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    try (JarFile jar = new JarFile(core.toFile())) {
      for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
        String n = e.nextElement().getName();
        if (n.matches("org/apache/spark/internal/config/[A-Za-z]+\\$\\.class")) {
          Class.forName(n.replace('/', '.').replace(".class", ""), true, loader);
        }
      }
    }
    Class.forName("org.apache.spark.sql.internal.SQLConf$", true, loader);
    Class.forName("org.apache.spark.sql.internal.StaticSQLConf$", true, loader);
    Path jars = Build.root().resolve("integration-tests/target/spark-config-jars");
    // Kubernetes: registers its entries in the same registry; its String constants ending in '.'
    // are prefixes.
    URLClassLoader k8s =
        new URLClassLoader(
            new URL[] {jars.resolve("spark-kubernetes.jar").toUri().toURL()}, loader);
    Class<?> config = Class.forName("org.apache.spark.deploy.k8s.Config$", true, k8s);
    Object module = config.getField("MODULE$").get(null);
    for (Method m : config.getDeclaredMethods()) {
      if (m.getReturnType() == String.class
          && m.getParameterCount() == 0
          && Modifier.isPublic(m.getModifiers())) {
        String v = (String) m.invoke(module);
        if (v != null && v.startsWith("spark.") && v.endsWith(".")) {
          k.prefixes.add(v);
        }
      }
    }
    // YARN: string constants of spark-yarn's config classes.
    try (JarFile jar = new JarFile(jars.resolve("spark-yarn.jar").toFile())) {
      for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
        JarEntry entry = e.nextElement();
        if (entry.getName().startsWith("org/apache/spark/deploy/yarn/config/")
            && entry.getName().endsWith(".class")) {
          try (InputStream in = jar.getInputStream(entry)) {
            Matcher m =
                YARN_KEY.matcher(new String(in.readAllBytes(), StandardCharsets.ISO_8859_1));
            while (m.find()) {
              (m.group().endsWith(".") ? k.prefixes : k.yarnKeys).add(m.group());
            }
          }
        }
      }
    }
    if (k.yarnKeys.size() < 20 || !k.yarnKeys.contains("spark.yarn.queue")) {
      throw new IllegalStateException("Found too few YARN keys in spark-yarn.jar: " + k.yarnKeys);
    }
    return k;
  }

  /** Null if Spark knows {@code key}, else why not. */
  public String problem(String key) {
    if (!key.startsWith("spark.")) {
      return key + " is not a Spark key";
    }
    if (ConfigEntry$.MODULE$.findEntry(key) != null
        || yarnKeys.contains(key)
        || resourceKey.matcher(key).matches()) {
      return null;
    }
    for (String p : prefixes) {
      if (key.startsWith(p) && key.length() > p.length()) {
        return null;
      }
    }
    return "Spark does not know the key " + key;
  }

  public Set<String> yarnKeys() {
    return yarnKeys;
  }

  static boolean exists(Path p) throws IOException {
    return Files.exists(p);
  }
}
