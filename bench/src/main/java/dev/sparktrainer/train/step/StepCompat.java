package dev.sparktrainer.train.step;

import static dev.sparktrainer.train.BenchSupport.orderedMap;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import dev.sparktrainer.device.Batch;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What the step benchmark's child reads from spark-trainer by reflection, so that it also runs
 * against an older build ({@code --baseline-jar}, first on the child's class path): the batch's
 * direct-memory and upload marks, the gradient bucket count and the step's ledger. Each is {@code
 * null} or NaN where the build has none.
 */
final class StepCompat {
  /** The ledger's totals, their JSON names (per step). */
  private static final Map<String, String> LEDGER =
      orderedMap(
          "optimizerCalls", "engine_calls_optimizer",
          "writebackCalls", "engine_calls_writeback",
          "gradientCalls", "engine_calls_gradients",
          "otherCalls", "engine_calls_other",
          "bytesToDevice", "bytes_to_device_per_step",
          "bytesToHost", "bytes_to_host_per_step",
          "heapUploads", "heap_uploads_per_step",
          "deviceAllocations", "device_allocations_per_step");

  private static final Constructor<?> DIRECT_BATCH = directBatchConstructor();

  private static final Constructor<?> UPLOAD_BATCH = uploadBatchConstructor();

  private StepCompat() {}

  /**
   * A batch marked as made from direct memory where the build knows that mark (Batch.direct(), for
   * the ledger's heap-upload count); an older build (--baseline-jar) gets the plain batch.
   */
  static Batch directBatch(NDManager m, NDList x, NDArray y, int size, long upload) {
    if (UPLOAD_BATCH != null) { // a build whose ledger counts the batch's upload
      try {
        return (Batch) UPLOAD_BATCH.newInstance(m, x, y, size, null, true, upload);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException(e);
      }
    }
    if (DIRECT_BATCH != null) {
      try {
        return (Batch) DIRECT_BATCH.newInstance(m, x, y, size, null, true);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException(e);
      }
    }
    return new Batch(m, x, y, size);
  }

  private static Constructor<?> uploadBatchConstructor() {
    try {
      return Batch.class.getConstructor(
          NDManager.class,
          NDList.class,
          NDArray.class,
          int.class,
          Runnable.class,
          boolean.class,
          long.class);
    } catch (NoSuchMethodException e) {
      return null;
    }
  }

  private static Constructor<?> directBatchConstructor() {
    try {
      return Batch.class.getConstructor(
          NDManager.class, NDList.class, NDArray.class, int.class, Runnable.class, boolean.class);
    } catch (NoSuchMethodException e) {
      return null;
    }
  }

  /** {@code step.buckets.gradientBuckets()} by reflection: null where a build has no such field. */
  static Integer gradientBuckets(TrainStep step) {
    try {
      Field f = TrainStep.class.getDeclaredField("buckets");
      Object b = f.get(step);
      return (Integer) b.getClass().getDeclaredMethod("gradientBuckets").invoke(b);
    } catch (ReflectiveOperationException | ClassCastException e) {
      System.err.println("buckets: not available in this build (" + e + ")");
      return null;
    }
  }

  /**
   * {@code step.ledger().snapshot()} by reflection, so that this class also runs against a build of
   * spark-trainer without a ledger: null there.
   */
  static Object ledgerSnapshot(TrainStep step) {
    Method ledger;
    try {
      ledger = TrainStep.class.getDeclaredMethod("ledger");
    } catch (NoSuchMethodException e) {
      return null;
    }
    try {
      Object l = ledger.invoke(step);
      return l.getClass().getDeclaredMethod("snapshot").invoke(l);
    } catch (ReflectiveOperationException e) {
      System.err.println("ledger: TrainStep.ledger().snapshot() failed: " + e);
      return null;
    }
  }

  /**
   * The ledger's totals between two snapshots ({@code Totals.minus}), per optimizer step ({@code
   * perStep}; divided by the timed steps where the ledger counted none): every field NaN (null in
   * JSON) without a ledger.
   */
  static Map<String, Object> ledgerFigures(Object before, Object after, int steps) {
    Map<String, Object> r = new LinkedHashMap<>();
    r.put("ledger", before == null || after == null ? "absent" : "present");
    r.put("engine_calls_per_step", Double.NaN);
    for (String name : LEDGER.values()) {
      r.put(name, Double.NaN);
    }
    r.put("ledger_steps_per_step", Double.NaN);
    if (before == null || after == null) {
      return r;
    }
    try {
      Class<?> totals = after.getClass();
      Object d = totals.getDeclaredMethod("minus", totals).invoke(after, before);
      long ledgerSteps = (long) totals.getDeclaredMethod("steps").invoke(d);
      Method perStep = totals.getDeclaredMethod("perStep", long.class);
      for (Map.Entry<String, String> e : LEDGER.entrySet()) {
        long v = (long) totals.getDeclaredMethod(e.getKey()).invoke(d);
        r.put(e.getValue(), perStep(perStep, d, v, ledgerSteps, steps));
      }
      long calls = (long) totals.getDeclaredMethod("engineCalls").invoke(d);
      r.put("engine_calls_per_step", perStep(perStep, d, calls, ledgerSteps, steps));
      r.put("ledger_steps_per_step", (double) ledgerSteps / steps);
    } catch (ReflectiveOperationException | ClassCastException e) {
      r.put("ledger", "unreadable: " + e);
    }
    return r;
  }

  private static double perStep(Method perStep, Object d, long v, long ledgerSteps, int steps)
      throws ReflectiveOperationException {
    return ledgerSteps > 0 ? (double) perStep.invoke(d, v) : (double) v / steps;
  }

  /** Where {@code c} was loaded from: which build a child measured. */
  static String codeSource(Class<?> c) {
    var src = c.getProtectionDomain().getCodeSource();
    return src == null ? "unknown" : src.getLocation().getPath();
  }
}
