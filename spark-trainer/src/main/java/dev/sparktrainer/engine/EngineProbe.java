package dev.sparktrainer.engine;

import static dev.sparktrainer.engine.EngineCheck.DOCS;
import static dev.sparktrainer.engine.EngineCheck.rootLine;

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
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.training.initializer.NormalInitializer;
import ai.djl.util.cuda.CudaUtils;
import dev.sparktrainer.engine.EngineCheck.DeviceResult;
import dev.sparktrainer.engine.EngineCheck.Report;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The parts of {@link EngineCheck} that load PyTorch: loading the engine (and naming the libtorch,
 * CUDA version and GPUs it found), the one-step training test on a device, and DJL's default
 * flavor, which asks CUDA how many GPUs there are.
 */
final class EngineProbe {
  private EngineProbe() {}

  /** Loads the engine; names what was loaded, or the problem. */
  static void load(Report r, BundledTorch b) {
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
      Path jni = Path.of(loaded).resolve(b.apiVersion() + "-" + LibtorchLocator.JNI);
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
      // The update in place runs with gradient recording off, as the trainer's step does: grad mode
      // is per thread, and the caller's thread may have it on (a new thread does).
      boolean recording = JniUtils.isGradMode();
      JniUtils.setGradMode(false);
      try {
        for (Parameter p : block.getParameters().values()) {
          NDArray w = p.getArray();
          w.subi(w.getGradient().mul(0.05f));
        }
      } finally {
        JniUtils.setGradMode(recording);
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
  static String defaultFlavor() {
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
}
