package dev.sparktrainer.engine;

import ai.djl.util.Platform;
import ai.djl.util.Utils;
import java.io.IOException;
import java.io.InputStream;
import java.net.URL;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;
import java.util.function.Predicate;

/**
 * What DJL brings with it: the libtorch bundled in the jar (its {@code pytorch.properties}) and the
 * released JNI of {@code pytorch-jni}.
 *
 * @param version the bundled libtorch's version, e.g. {@code 2.7.1-20250812}
 * @param flavor the bundled libtorch's flavor, e.g. {@code cpu}
 * @param classifier e.g. {@code linux-x86_64}
 * @param apiVersion DJL's version, e.g. {@code 0.35.1}
 * @param jniVersion the released JNI's {@code jni_version}, e.g. {@code 2.7.1-0.35.1} (null: none)
 * @param releasedJni whether the released JNI has a build for a flavor
 * @param cacheDir DJL's PyTorch cache directory
 */
record BundledTorch(
    String version,
    String flavor,
    String classifier,
    String apiVersion,
    String jniVersion,
    Predicate<String> releasedJni,
    Path cacheDir) {
  /** CUDA flavors DJL publishes JNIs for; the jar is probed for each. */
  private static final List<String> CUDA_FLAVORS =
      List.of("cu130", "cu129", "cu128", "cu126", "cu124", "cu121", "cu118");

  /** The libtorch version the released JNI is built for, e.g. {@code 2.7.1}. */
  String jniTorch() {
    return jniVersion == null ? null : LibtorchLocator.base(jniVersion);
  }

  /** The released JNI's CUDA flavor (the newest it has), e.g. {@code cu128}; null if none. */
  String cudaFlavor() {
    return CUDA_FLAVORS.stream().filter(releasedJni).findFirst().orElse(null);
  }

  static BundledTorch fromDjl() {
    Platform p = Platform.detectPlatform("pytorch");
    String jniVersion = null;
    URL props = resource("jnilib/pytorch.properties");
    if (props != null) {
      try (InputStream in = props.openStream()) {
        Properties pr = new Properties();
        pr.load(in);
        jniVersion = pr.getProperty("jni_version");
      } catch (IOException e) {
        jniVersion = null;
      }
    }
    String classifier = p.getClassifier();
    return new BundledTorch(
        p.getVersion(),
        p.getFlavor(),
        classifier,
        p.getApiVersion(),
        jniVersion,
        f -> resource("jnilib/" + classifier + "/" + f + "/" + LibtorchLocator.JNI) != null,
        Utils.getEngineCacheDir("pytorch"));
  }

  private static URL resource(String name) {
    ClassLoader cl = Thread.currentThread().getContextClassLoader();
    URL u = cl == null ? null : cl.getResource(name);
    return u != null ? u : EngineCheck.class.getClassLoader().getResource(name);
  }
}
