package dev.sparktrainer.engine;

import static dev.sparktrainer.engine.EngineCheck.DOCS;
import static dev.sparktrainer.engine.EngineCheck.JNI_RECORD;

import dev.sparktrainer.engine.EngineCheck.Report;
import java.io.File;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The part of {@link EngineCheck} that runs before anything is loaded: which libtorch and which JNI
 * DJL would take, found the way DJL looks for them (see {@link EngineCheck} for the order), with
 * the versions read from the files beside them, and the mismatch that would make loading fall back
 * silently, download, or fail inside a step. Reads files and settings only; loads nothing.
 */
final class LibtorchLocator {
  private static final String TORCH = System.mapLibraryName("torch");
  static final String JNI = System.mapLibraryName("djl_torch");
  private static final Pattern BASE = Pattern.compile("^(\\d+\\.\\d+(?:\\.\\d+)?)");
  private static final Pattern VERSION_PY = Pattern.compile("__version__\\s*=\\s*['\"]([^'\"]+)");
  private static final Pattern CACHE_DIR =
      Pattern.compile("^(\\d+\\.\\d+\\.\\d+)(?:-\\d+)?-((?:cpu|cu\\d+)(?:-precxx11)?)-.*");

  private LibtorchLocator() {}

  /**
   * What DJL would load, and a problem found before loading it. Pure: reads {@code setting} (DJL's
   * environment variables), the files, and what DJL bundles.
   */
  static void locate(
      Report r, Function<String, String> setting, BundledTorch b, Supplier<String> defaultFlavor) {
    String libraryPath = blankToNull(setting.apply("PYTORCH_LIBRARY_PATH"));
    String version = blankToNull(setting.apply("PYTORCH_VERSION"));
    String flavorSetting = blankToNull(setting.apply("PYTORCH_FLAVOR"));
    Path dir = null;
    if (libraryPath != null) {
      dir = findTorch(libraryPath);
      if (dir == null) {
        r.problem =
            "PYTORCH_LIBRARY_PATH="
                + libraryPath
                + " has no libtorch (no "
                + TORCH
                + " there), so DJL would quietly load the CPU libtorch bundled in the jar: point it at"
                + " the lib directory of a libtorch (/opt/libtorch/lib in deploy/docker/Dockerfile.cuda,"
                + " "
                + DOCS
                + ") or unset it";
        return;
      }
      r.libtorchFrom = "PYTORCH_LIBRARY_PATH";
    }
    if (dir == null) {
      bundledLibtorch(r, b, version);
      return;
    }
    r.libtorchDir = dir.toString();
    r.libtorchVersion = torchVersion(dir);
    r.cudaBuild =
        Files.exists(dir.resolve(System.mapLibraryName("torch_cuda")))
            || Files.exists(dir.resolve(System.mapLibraryName("c10_cuda")));
    r.djlVersion = version != null ? version : b.version();
    r.flavor = flavorSetting != null ? flavorSetting : defaultFlavor.get();
    if (r.libtorchVersion == null) {
      r.notes.add(
          "the libtorch's version is unknown (no build-version or version.py beside "
              + dir
              + "): it cannot be checked against the JNI");
    }
    if (!jni(r, dir, b)) {
      return;
    }
    String found = r.libtorchVersion == null ? null : base(r.libtorchVersion);
    String builtFor = r.jniBuiltFor == null ? null : base(r.jniBuiltFor);
    if (found != null && builtFor != null && !found.equals(builtFor)) {
      r.problem =
          "libtorch "
              + r.libtorchVersion
              + " found ("
              + dir
              + "), the JNI is built for "
              + r.jniBuiltFor
              + ": build the JNI against it ("
              + DOCS
              + ") or install libtorch "
              + releasedTarget(b);
      return;
    }
    if (r.jniKind.startsWith("DJL's released") && r.flavor.startsWith("cu") && !r.cudaBuild) {
      r.problem =
          "the JNI is DJL's "
              + r.flavor
              + " (CUDA) build, but the libtorch at "
              + dir
              + " is a CPU build (no "
              + System.mapLibraryName("torch_cuda")
              + "): point PYTORCH_LIBRARY_PATH at a CUDA libtorch ("
              + DOCS
              + ") or set PYTORCH_FLAVOR=cpu";
      return;
    }
    if (r.cudaBuild && r.flavor.startsWith("cpu") && r.jniKind.startsWith("DJL's released")) {
      r.notes.add(
          "the libtorch is a CUDA build but PYTORCH_FLAVOR="
              + r.flavor
              + " takes DJL's CPU JNI: set PYTORCH_FLAVOR="
              + (b.cudaFlavor() == null ? "cu128" : b.cudaFlavor())
              + " for GPUs");
    }
  }

  /** The bundled natives: DJL downloads instead when PYTORCH_VERSION names another version. */
  private static void bundledLibtorch(Report r, BundledTorch b, String version) {
    String bundled = base(b.version());
    if (version != null && !base(version).equals(bundled)) {
      r.problem =
          "PYTORCH_VERSION="
              + version
              + " asks DJL for a libtorch that is neither bundled (the jar has "
              + bundled
              + ") nor in PYTORCH_LIBRARY_PATH, and DJL runs offline (it would download it): set"
              + " PYTORCH_LIBRARY_PATH to that libtorch's lib directory ("
              + DOCS
              + "), or unset PYTORCH_VERSION to use the bundled one";
      return;
    }
    r.libtorchFrom = "bundled in the jar";
    r.libtorchVersion = bundled + "+" + b.flavor();
    r.cudaBuild = b.flavor().startsWith("cu");
    r.djlVersion = b.version();
    r.flavor = b.flavor();
    r.jniKind = "DJL's released JNI, pytorch-jni " + b.jniVersion();
    r.jniBuiltFor = b.jniTorch();
    // DJL extracts both into its cache directory on first use; load() names the real path.
  }

  /** DJL's JNI lookup for a libtorch in {@code dir}; false (with a problem) when there is none. */
  private static boolean jni(Report r, Path dir, BundledTorch b) {
    for (Path p : List.of(dir.resolve(b.apiVersion() + "-" + JNI), dir.resolve(JNI))) {
      if (Files.isRegularFile(p)) {
        r.jniPath = p.toString();
        String recorded = recordedTorch(p.resolveSibling(JNI_RECORD));
        r.jniKind =
            recorded != null
                ? "built from DJL's sources"
                : "found beside the libtorch, taken as built for it";
        r.jniBuiltFor = recorded;
        return true;
      }
    }
    String version = r.djlVersion;
    Matcher base = BASE.matcher(version);
    String versionBase = base.find() ? base.group(1) : version;
    Path cached =
        b.cacheDir()
            .resolve(version + "-" + r.flavor + "-" + b.classifier())
            .resolve(b.apiVersion() + "-" + JNI);
    if (Files.isRegularFile(cached)) {
      r.jniPath = cached.toString();
      r.jniKind = "DJL's released JNI for " + r.flavor + ", from DJL's cache";
      r.jniBuiltFor = versionBase;
      return true;
    }
    String target = releasedTarget(b);
    if (b.jniVersion() == null || !b.jniVersion().startsWith(versionBase + "-" + b.apiVersion())) {
      r.jniKind = "none";
      r.problem =
          (r.libtorchVersion == null ? "the libtorch" : "libtorch " + r.libtorchVersion)
              + " at "
              + dir
              + " has no JNI beside it, and DJL's released JNI is built for "
              + (b.jniTorch() == null ? "no version" : b.jniTorch())
              + " (PYTORCH_VERSION="
              + version
              + "; offline, DJL cannot download another): build the JNI against it ("
              + DOCS
              + ") or install libtorch "
              + target
              + " with PYTORCH_VERSION="
              + b.jniTorch();
      return false;
    }
    if (!b.releasedJni().test(r.flavor)) {
      r.jniKind = "none";
      r.problem =
          "DJL's released JNI has no build for PYTORCH_FLAVOR="
              + r.flavor
              + " (it has cpu"
              + (b.cudaFlavor() == null ? "" : " and " + b.cudaFlavor())
              + "): set PYTORCH_FLAVOR="
              + (r.cudaBuild && b.cudaFlavor() != null ? b.cudaFlavor() : "cpu")
              + " for the libtorch at "
              + dir
              + ", or build the JNI against it ("
              + DOCS
              + ")";
      return false;
    }
    r.jniPath = "jnilib/" + b.classifier() + "/" + r.flavor + "/" + JNI + " in the jar";
    r.jniKind = "DJL's released JNI for " + r.flavor + ", pytorch-jni " + b.jniVersion();
    r.jniBuiltFor = b.jniTorch();
    return true;
  }

  /** What to install for DJL's released JNI, e.g. {@code 2.7.1+cu128}. */
  static String releasedTarget(BundledTorch b) {
    String torch = b.jniTorch() == null ? base(b.version()) : b.jniTorch();
    return torch + (b.cudaFlavor() == null ? "" : "+" + b.cudaFlavor());
  }

  /** The first directory of a path list that holds libtorch (as DJL's LibUtils looks). */
  static Path findTorch(String pathList) {
    for (String entry : pathList.split(File.pathSeparator)) {
      if (entry.isEmpty()) {
        continue;
      }
      File p = new File(entry);
      if (p.isFile() && p.getName().equals(TORCH)) {
        return p.getParentFile().toPath().toAbsolutePath();
      }
      if (new File(p, TORCH).isFile()) {
        return p.toPath().toAbsolutePath();
      }
    }
    return null;
  }

  /** The libtorch's version from the files beside it, e.g. {@code 2.7.1+cu128}; null if unknown. */
  static String torchVersion(Path dir) {
    Path parent = dir.getParent();
    for (Path f :
        parent == null
            ? List.of(dir.resolve("build-version"))
            : List.of(parent.resolve("build-version"), dir.resolve("build-version"))) {
      String v = firstLineOf(f);
      if (v != null && BASE.matcher(v).find()) {
        return v;
      }
    }
    if (parent != null && Files.isRegularFile(parent.resolve("version.py"))) {
      try {
        Matcher m = VERSION_PY.matcher(Files.readString(parent.resolve("version.py")));
        if (m.find()) {
          return m.group(1);
        }
      } catch (IOException e) {
        return null;
      }
    }
    Matcher m = CACHE_DIR.matcher(dir.getFileName() == null ? "" : dir.getFileName().toString());
    if (m.matches()) {
      return m.group(1) + "+" + m.group(2).replace("-precxx11", "");
    }
    return null;
  }

  private static String recordedTorch(Path record) {
    if (!Files.isRegularFile(record)) {
      return null;
    }
    try (Reader in = Files.newBufferedReader(record, StandardCharsets.UTF_8)) {
      Properties p = new Properties();
      p.load(in);
      return blankToNull(p.getProperty("torch_version"));
    } catch (IOException e) {
      return null;
    }
  }

  private static String firstLineOf(Path f) {
    if (!Files.isRegularFile(f)) {
      return null;
    }
    try {
      String s = Files.readString(f).strip();
      int nl = s.indexOf('\n');
      return nl < 0 ? s : s.substring(0, nl).strip();
    } catch (IOException e) {
      return null;
    }
  }

  /** {@code 2.11.0+cu130} -> {@code 2.11.0}; {@code 2.7.1-20250812} -> {@code 2.7.1}. */
  static String base(String version) {
    Matcher m = BASE.matcher(version);
    return m.find() ? m.group(1) : version;
  }

  private static String blankToNull(String s) {
    return s == null || s.isBlank() ? null : s.trim();
  }
}
