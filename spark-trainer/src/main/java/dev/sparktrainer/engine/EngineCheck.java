package dev.sparktrainer.engine;

import ai.djl.Device;
import ai.djl.util.Utils;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;

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
 *
 * <p>The checks live beside this class: {@link LibtorchLocator} finds what DJL would load without
 * loading it, {@link EngineProbe} loads the engine and runs the test step, {@link BundledTorch}
 * says what DJL brings in its jars.
 */
public final class EngineCheck {
  /** Where the documentation of GPU executors is; every message that needs a fix points there. */
  public static final String DOCS = "docs/cluster.md#gpus";

  /** Written beside a JNI built from DJL's sources: {@code torch_version}, {@code djl_version}. */
  public static final String JNI_RECORD = "libdjl_torch.properties";

  private EngineCheck() {}

  /** One device's test step. */
  public record DeviceResult(
      String device, double lossBefore, double lossAfter, double millis, String error) {
    public boolean ok() {
      return error == null;
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
    BundledTorch bundled;
    try {
      bundled = BundledTorch.fromDjl();
    } catch (RuntimeException | LinkageError e) {
      r.problem = "DJL's PyTorch engine is not on the class path or broken: " + firstLine(e);
      return r;
    }
    LibtorchLocator.locate(r, Utils::getEnvOrSystemProperty, bundled, EngineProbe::defaultFlavor);
    if (!r.ok()) {
      return r; // loading would fall back silently, download, or fail inside a step: say why now
    }
    EngineProbe.load(r, bundled);
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
      DeviceResult res = EngineProbe.step(d);
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
                + LibtorchLocator.releasedTarget(bundled);
      }
    }
    return r;
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
