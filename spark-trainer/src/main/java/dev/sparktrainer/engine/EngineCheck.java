package dev.sparktrainer.engine;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.training.initializer.NormalInitializer;
import ai.djl.util.Platform;
import ai.djl.util.Utils;
import ai.djl.util.cuda.CudaUtils;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.Reader;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Whether this JVM's PyTorch engine can train: which libtorch DJL loads, the DJL JNI it takes for
 * it and what that JNI is built for, the CUDA version, and one tiny forward, backward and update on
 * each device. {@link #run} returns a {@link Report}; {@link Report#problem()} is one line saying
 * what is wrong and what to do, or null.
 *
 * <p>DJL 0.35.1 finds libtorch in {@code PYTORCH_LIBRARY_PATH} (a directory holding {@code
 * libtorch.so}), else it takes the natives bundled in the jar (it does not look in {@code
 * java.library.path}); a {@code PYTORCH_LIBRARY_PATH} without a libtorch is silently ignored. For
 * that libtorch it loads the first JNI of: {@code DIR/0.35.1-libdjl_torch.so}, {@code
 * DIR/libdjl_torch.so}, {@code
 * $DJL_CACHE_DIR/pytorch/VERSION-FLAVOR-CLASSIFIER/0.35.1-libdjl_torch.so}, and the released JNI in
 * {@code pytorch-jni} for {@code PYTORCH_FLAVOR} (built for PyTorch 2.7.1) — or it downloads one,
 * which offline mode forbids. VERSION and FLAVOR are {@code PYTORCH_VERSION} and {@code
 * PYTORCH_FLAVOR} as given (DJL does not read them from the libtorch). A JNI built for another
 * libtorch may load and fail only at the first training step (seen: DJL's 2.7.1 JNI on libtorch
 * 2.11, "set_stride is not allowed on a Tensor created from .data or .detach()"), or not load at
 * all, so the check compares versions before loading anything.
 *
 * <p>The libtorch's own version comes from the files beside it: {@code build-version} of a libtorch
 * archive ({@code libtorch/lib/../build-version}), {@code version.py} of a PyTorch wheel ({@code
 * torch/lib/../version.py}), or the name of DJL's cache directory. A JNI built from DJL's sources
 * by {@code deploy/gpu/build-djl-jni.sh} has {@value #JNI_RECORD} beside it naming the libtorch it
 * was built against; one without that record, found beside a libtorch, is taken as built for it.
 */
public final class EngineCheck {
  /** Where the documentation of GPU executors is; every message that needs a fix points there. */
  public static final String DOCS = "docs/cluster.md#gpus";

  /** Written beside a JNI built from DJL's sources: {@code torch_version}, {@code djl_version}. */
  public static final String JNI_RECORD = "libdjl_torch.properties";

  private static final String TORCH = System.mapLibraryName("torch");
  private static final String JNI = System.mapLibraryName("djl_torch");
  private static final Pattern BASE = Pattern.compile("^(\\d+\\.\\d+(?:\\.\\d+)?)");
  private static final Pattern VERSION_PY = Pattern.compile("__version__\\s*=\\s*['\"]([^'\"]+)");
  private static final Pattern CACHE_DIR =
      Pattern.compile("^(\\d+\\.\\d+\\.\\d+)(?:-\\d+)?-((?:cpu|cu\\d+)(?:-precxx11)?)-.*");

  /** CUDA flavors DJL publishes JNIs for; the jar is probed for each. */
  private static final List<String> CUDA_FLAVORS =
      List.of("cu130", "cu129", "cu128", "cu126", "cu124", "cu121", "cu118");

  private EngineCheck() {}

  /** One device's test step. */
  public record DeviceResult(
      String device, double lossBefore, double lossAfter, double millis, String error) {
    public boolean ok() {
      return error == null;
    }
  }

  /**
   * What DJL brings with it: the libtorch bundled in the jar (its {@code pytorch.properties}) and
   * the released JNI of {@code pytorch-jni}.
   *
   * @param version the bundled libtorch's version, e.g. {@code 2.7.1-20250812}
   * @param flavor the bundled libtorch's flavor, e.g. {@code cpu}
   * @param classifier e.g. {@code linux-x86_64}
   * @param apiVersion DJL's version, e.g. {@code 0.35.1}
   * @param jniVersion the released JNI's {@code jni_version}, e.g. {@code 2.7.1-0.35.1} (null:
   *     none)
   * @param releasedJni whether the released JNI has a build for a flavor
   * @param cacheDir DJL's PyTorch cache directory
   */
  record Bundled(
      String version,
      String flavor,
      String classifier,
      String apiVersion,
      String jniVersion,
      Predicate<String> releasedJni,
      Path cacheDir) {

    /** The libtorch version the released JNI is built for, e.g. {@code 2.7.1}. */
    String jniTorch() {
      return jniVersion == null ? null : base(jniVersion);
    }

    /** The released JNI's CUDA flavor (the newest it has), e.g. {@code cu128}; null if none. */
    String cudaFlavor() {
      return CUDA_FLAVORS.stream().filter(releasedJni).findFirst().orElse(null);
    }

    static Bundled fromDjl() {
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
      return new Bundled(
          p.getVersion(),
          p.getFlavor(),
          classifier,
          p.getApiVersion(),
          jniVersion,
          f -> resource("jnilib/" + classifier + "/" + f + "/" + JNI) != null,
          Utils.getEngineCacheDir("pytorch"));
    }
  }

  /** What the check found, and the one problem that stops it (null when there is none). */
  public static final class Report {
    String libtorchDir;
    String libtorchFrom;
    String libtorchVersion;
    boolean cudaBuild;
    String djlVersion;
    String flavor;
    String jniPath;
    String jniKind;
    String jniBuiltFor;
    String engineVersion;
    String cuda;
    int gpus = -1;
    final List<DeviceResult> devices = new ArrayList<>();
    final List<String> notes = new ArrayList<>();
    String problem;

    /** Whether every check passed. */
    public boolean ok() {
      return problem == null;
    }

    /** What is wrong and what to do, in one line; null when nothing is. */
    public String problem() {
      return problem;
    }

    /** The devices the test step ran on. */
    public List<DeviceResult> devices() {
      return Collections.unmodifiableList(devices);
    }

    /** GPUs PyTorch sees (-1: the engine was not loaded). */
    public int gpus() {
      return gpus;
    }

    /** The libtorch DJL uses (or would use). */
    public String libtorchDir() {
      return libtorchDir;
    }

    /** The report, a line per finding. */
    public String text() {
      StringBuilder sb = new StringBuilder();
      line(
          sb,
          "libtorch",
          (libtorchVersion == null ? "version unknown" : libtorchVersion)
              + (libtorchDir == null ? "" : " at " + libtorchDir)
              + (libtorchFrom == null ? "" : " (" + libtorchFrom + ")"));
      if (djlVersion != null) {
        line(sb, "DJL loads it as", "PyTorch " + djlVersion + ", flavor " + flavor);
      }
      if (jniPath != null || jniKind != null) {
        line(
            sb,
            "JNI",
            (jniPath == null ? "" : jniPath + " ")
                + "("
                + jniKind
                + (jniBuiltFor == null ? "" : ", built for libtorch " + jniBuiltFor)
                + ")");
      }
      if (engineVersion != null) {
        line(sb, "engine", "PyTorch " + engineVersion + " loaded");
      }
      if (gpus >= 0) {
        line(sb, "CUDA", cuda == null ? "none" : cuda);
        line(sb, "GPUs", gpus == 0 ? "none visible to PyTorch" : String.valueOf(gpus));
      }
      for (DeviceResult d : devices) {
        line(
            sb,
            "step on " + d.device(),
            d.ok()
                ? String.format(
                    Locale.ROOT,
                    "ok (forward, backward, update: loss %.4f -> %.4f, %.0f ms)",
                    d.lossBefore(),
                    d.lossAfter(),
                    d.millis())
                : "FAILED: " + d.error());
      }
      for (String n : notes) {
        line(sb, "note", n);
      }
      if (ok()) {
        sb.append(
            gpus > 0
                ? "OK: PyTorch trains on " + gpus + " GPU(s) here.\n"
                : "OK: PyTorch trains on the CPU here (no GPU visible: GPU training would fall back to"
                    + " the CPU).\n");
      } else {
        sb.append("PROBLEM: ").append(problem).append('\n');
      }
      return sb.toString();
    }

    private static void line(StringBuilder sb, String key, String value) {
      sb.append(String.format(Locale.ROOT, "%-18s %s%n", key + ":", value));
    }
  }

  /**
   * Checks this JVM's engine with its real settings (environment variables, else system properties,
   * as DJL reads them) and runs the test step on {@code gpuIds} (null: every visible GPU; the CPU
   * when there is none).
   */
  public static Report run(List<Integer> gpuIds) {
    Report r = new Report();
    Bundled bundled;
    try {
      bundled = Bundled.fromDjl();
    } catch (RuntimeException | LinkageError e) {
      r.problem = "DJL's PyTorch engine is not on the class path or broken: " + firstLine(e);
      return r;
    }
    locate(r, Utils::getEnvOrSystemProperty, bundled, EngineCheck::defaultFlavor);
    if (!r.ok()) {
      return r; // loading would fall back silently, download, or fail inside a step: say why now
    }
    load(r, bundled);
    if (!r.ok()) {
      return r;
    }
    List<Device> devices = new ArrayList<>();
    if (r.gpus > 0) {
      if (gpuIds == null) {
        for (int i = 0; i < r.gpus; i++) {
          devices.add(Device.gpu(i));
        }
      } else {
        for (int id : gpuIds) {
          if (id >= r.gpus) {
            r.problem =
                "GPU "
                    + id
                    + " was assigned, but PyTorch here sees only "
                    + r.gpus
                    + " GPU(s): check the discovery script and CUDA_VISIBLE_DEVICES ("
                    + DOCS
                    + ")";
            return r;
          }
          devices.add(Device.gpu(id));
        }
      }
    }
    if (devices.isEmpty()) {
      devices.add(Device.cpu());
    }
    for (Device d : devices) {
      DeviceResult res = step(d);
      r.devices.add(res);
      if (!res.ok() && r.problem == null) {
        r.problem =
            "the test step failed on "
                + d
                + " ("
                + res.error()
                + "): libtorch "
                + (r.libtorchVersion == null ? "" : r.libtorchVersion + " ")
                + "and the JNI load but do not train there; build the JNI against this libtorch ("
                + DOCS
                + ") or install libtorch "
                + releasedTarget(bundled);
      }
    }
    return r;
  }

  /**
   * What DJL would load, and a problem found before loading it. Pure: reads {@code setting} (DJL's
   * environment variables), the files, and what DJL bundles.
   */
  static void locate(
      Report r, Function<String, String> setting, Bundled b, Supplier<String> defaultFlavor) {
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
  private static void bundledLibtorch(Report r, Bundled b, String version) {
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
  private static boolean jni(Report r, Path dir, Bundled b) {
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

  /** Loads the engine; names what was loaded, or the problem. */
  private static void load(Report r, Bundled b) {
    Engine engine;
    try {
      engine = Engine.getEngine("PyTorch");
    } catch (RuntimeException | LinkageError e) {
      r.problem =
          "DJL could not load PyTorch"
              + (r.libtorchDir == null ? "" : " from " + r.libtorchDir)
              + (r.jniPath == null ? "" : " with the JNI " + r.jniPath)
              + ": "
              + rootLine(e)
              + ": check that the JNI is built for this libtorch and that its CUDA libraries are found ("
              + DOCS
              + ")";
      return;
    }
    r.engineVersion = engine.getVersion();
    String loaded = ai.djl.pytorch.jni.LibUtils.getLibtorchPath();
    if (r.libtorchDir == null) {
      r.libtorchDir = loaded;
      Path jni = Path.of(loaded).resolve(b.apiVersion() + "-" + JNI);
      if (Files.isRegularFile(jni)) {
        r.jniPath = jni.toString();
      }
    } else if (!Path.of(loaded).toAbsolutePath().equals(Path.of(r.libtorchDir).toAbsolutePath())) {
      r.problem =
          "DJL loaded libtorch from "
              + loaded
              + ", not from "
              + r.libtorchDir
              + " (this JVM loaded PyTorch before PYTORCH_LIBRARY_PATH was set?): restart it with"
              + " the settings in "
              + DOCS;
      return;
    }
    try {
      r.gpus = engine.getGpuCount();
      if (CudaUtils.hasCuda()) {
        int v = CudaUtils.getCudaVersion(); // e.g. 12080
        r.cuda =
            (v / 1000)
                + "."
                + (v % 1000) / 10
                + " (CUDA runtime)"
                + (r.gpus > 0 ? ", compute capability " + capabilities(r.gpus) : "");
      }
    } catch (RuntimeException | LinkageError e) {
      r.gpus = Math.max(r.gpus, 0);
      r.notes.add("could not query CUDA: " + rootLine(e));
    }
  }

  private static String capabilities(int gpus) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < gpus; i++) {
      try {
        out.add(CudaUtils.getComputeCapability(i));
      } catch (RuntimeException e) {
        out.add("?");
      }
    }
    return String.join(", ", out);
  }

  /**
   * One training step on {@code device}: a 4-8-1 MLP, forward and backward under a gradient
   * collector, an SGD update of every parameter in place, then the loss again: it must be finite
   * and lower.
   */
  static DeviceResult step(Device device) {
    long t0 = System.nanoTime();
    try (NDManager m = NDManager.newBaseManager(device, "PyTorch")) {
      SequentialBlock block = new SequentialBlock();
      block.add(Linear.builder().setUnits(8).build());
      block.add(Activation::relu);
      block.add(Linear.builder().setUnits(1).build());
      block.setInitializer(new NormalInitializer(0.5f), Parameter.Type.WEIGHT);
      block.initialize(m, DataType.FLOAT32, new Shape(16, 4));
      NDArray x = m.arange(64f).reshape(16, 4).div(64f);
      NDArray y = x.sum(new int[] {1}, true);
      ParameterStore ps = new ParameterStore(m, false);
      float before;
      try (GradientCollector gc = m.getEngine().newGradientCollector()) {
        NDArray loss = block.forward(ps, new NDList(x), true).singletonOrThrow().sub(y);
        loss = loss.square().mean();
        before = loss.getFloat();
        gc.backward(loss);
      }
      for (Parameter p : block.getParameters().values()) {
        NDArray w = p.getArray();
        w.subi(w.getGradient().mul(0.05f));
      }
      float after =
          block
              .forward(ps, new NDList(x), false)
              .singletonOrThrow()
              .sub(y)
              .square()
              .mean()
              .getFloat();
      double ms = (System.nanoTime() - t0) / 1e6;
      if (!Float.isFinite(before) || !Float.isFinite(after) || !(after < before)) {
        return new DeviceResult(
            device.toString(),
            before,
            after,
            ms,
            "the loss went from "
                + before
                + " to "
                + after
                + " after one SGD step (expected lower)");
      }
      return new DeviceResult(device.toString(), before, after, ms, null);
    } catch (RuntimeException | LinkageError e) {
      return new DeviceResult(
          device.toString(), Double.NaN, Double.NaN, (System.nanoTime() - t0) / 1e6, rootLine(e));
    }
  }

  /** DJL's flavor when PYTORCH_FLAVOR is unset, as its LibUtils picks it. */
  private static String defaultFlavor() {
    int gpus;
    try {
      gpus = CudaUtils.getGpuCount();
    } catch (RuntimeException | LinkageError e) {
      gpus = 0;
    }
    boolean linux = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux");
    if (gpus > 0) {
      return "cu" + CudaUtils.getCudaVersionString() + (linux ? "-precxx11" : "");
    }
    return linux ? "cpu-precxx11" : "cpu";
  }

  /** What to install for DJL's released JNI, e.g. {@code 2.7.1+cu128}. */
  private static String releasedTarget(Bundled b) {
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

  private static URL resource(String name) {
    ClassLoader cl = Thread.currentThread().getContextClassLoader();
    URL u = cl == null ? null : cl.getResource(name);
    return u != null ? u : EngineCheck.class.getClassLoader().getResource(name);
  }

  private static String blankToNull(String s) {
    return s == null || s.isBlank() ? null : s.trim();
  }

  static String firstLine(Throwable e) {
    String m = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    int nl = m.indexOf('\n');
    return nl < 0 ? m : m.substring(0, nl);
  }

  /** The root cause's first line, with its class when the message alone says little. */
  static String rootLine(Throwable e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String line = firstLine(root);
    return root == e ? line : line + " (" + e.getClass().getSimpleName() + ")";
  }
}
