package dev.sparktrainer.train.step;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.training.loss.Loss;
import ai.djl.util.PairList;
import dev.sparktrainer.device.Batch;
import dev.sparktrainer.device.ReplicaSplit;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.torchscript.TorchScriptBlock;
import dev.sparktrainer.train.metrics.EpochMetrics;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The model replicas of one worker: one per device it drives (MirroredStrategy inside a machine). A
 * batch is split across the devices ({@link ReplicaSplit}), each replica runs forward and backward
 * on its slice, and {@link TrainStep} combines the gradients into the gradient of the whole batch's
 * mean loss, all-reduces them across workers and applies the same update to every replica.
 *
 * <p><b>One gradient collector per JVM.</b> DJL's PyTorch engine allows one collecting {@link
 * GradientCollector} at a time per JVM, and the engine's random generator is global too. Every
 * section that collects gradients or consumes random numbers holds {@link #JVM_LOCK}: from seeding
 * to the last gradient copied out (and zeroed). In cluster mode there is one training task per
 * executor JVM and the lock is uncontended; in local mode (several tasks in one JVM) the tasks'
 * forward and backward passes take turns while their all-reduces and optimizer steps still overlap,
 * and training is as correct as on a cluster.
 */
public final class ReplicaSet implements AutoCloseable {
  /** Serializes gradient collection and seeded random number use across the tasks of a JVM. */
  static final ReentrantLock JVM_LOCK = new ReentrantLock(true);

  /**
   * Runs {@code work} holding the lock every gradient collection of this JVM holds: for code
   * outside the step that collects gradients too (the engine check's test step), which would
   * otherwise meet a training task's collector.
   */
  public static <T> T withJvmLock(java.util.function.Supplier<T> work) {
    JVM_LOCK.lock();
    try {
      return work.get();
    } finally {
      JVM_LOCK.unlock();
    }
  }

  private final List<Device> devices;
  final NDManager[] managers;
  final Block[] blocks;
  final ParameterStore[] stores;
  final Parameter[][] params;
  private final ByteBuffer[][] upload;
  final String[] names;
  final int[] sizes;
  final int[] trainable;
  final int[] stats;

  public ReplicaSet(ModelSpec spec, List<Device> devices, int initSeed) {
    this.devices = List.copyOf(devices);
    int k = devices.size();
    managers = new NDManager[k];
    blocks = new Block[k];
    stores = new ParameterStore[k];
    params = new Parameter[k][];
    upload = new ByteBuffer[k][];
    JVM_LOCK.lock();
    try {
      for (int d = 0; d < k; d++) {
        managers[d] = NDManager.newBaseManager(devices.get(d));
        managers[d].getEngine().setRandomSeed(initSeed);
        blocks[d] = spec.build(managers[d]);
        stores[d] = new ParameterStore(managers[d], false);
        PairList<String, Parameter> list = blocks[d].getParameters();
        params[d] = list.values().toArray(new Parameter[0]);
        upload[d] = new ByteBuffer[params[d].length];
      }
    } finally {
      JVM_LOCK.unlock();
    }
    List<String> keys = blocks[0].getParameters().keys();
    names = keys.toArray(new String[0]);
    sizes = new int[names.length];
    int nt = 0;
    for (int i = 0; i < names.length; i++) {
      NDArray a = params[0][i].getArray();
      if (a.getDataType() != DataType.FLOAT32) {
        throw new IllegalArgumentException(
            "Invalid model: parameter "
                + names[i]
                + " is "
                + a.getDataType()
                + ", only float32 is supported");
      }
      sizes[i] = Math.toIntExact(a.size());
      nt += params[0][i].requiresGradient() ? 1 : 0;
    }
    trainable = new int[nt];
    stats = new int[names.length - nt];
    for (int i = 0, t = 0, s = 0; i < names.length; i++) {
      if (params[0][i].requiresGradient()) {
        trainable[t++] = i;
      } else {
        stats[s++] = i;
      }
    }
    // Upload buffers are made on first use: the device placement never uploads during training.
  }

  /** The devices, one replica each. */
  /** The parameters' names, in order. */
  public List<String> parameterNames() {
    return List.of(names);
  }

  /** The parameters' sizes (values), in order. */
  public int[] parameterSizes() {
    return sizes.clone();
  }

  /** The trainable parameters' names, in order. */
  public List<String> trainableNames() {
    List<String> out = new java.util.ArrayList<>(trainable.length);
    for (int j : trainable) {
      out.add(names[j]);
    }
    return out;
  }

  /** The trainable parameters' sizes, in order: what the optimizer is made for. */
  public int[] trainableSizes() {
    int[] out = new int[trainable.length];
    for (int j = 0; j < out.length; j++) {
      out[j] = sizes[trainable[j]];
    }
    return out;
  }

  public List<Device> devices() {
    return devices;
  }

  /** The manager of the first device (batches are created there). */
  public NDManager manager() {
    return managers[0];
  }

  /**
   * Points every TorchScript module's parameters at the float32 master weights, where a bf16 step
   * pointed them at its bfloat16 copies ({@link HalfParameters}): before their arrays are read or
   * written. Nothing for the models the trainer builds (their arrays are the master weights).
   */
  void useFloat32() {
    for (Block b : blocks) {
      if (b instanceof TorchScriptBlock ts) {
        ts.useFloat32();
      }
    }
  }

  /** Every parameter's values, from the first replica. */
  public float[][] readValues() {
    useFloat32();
    float[][] out = new float[names.length][];
    for (int i = 0; i < names.length; i++) {
      out[i] = params[0][i].getArray().toFloatArray();
    }
    return out;
  }

  /**
   * Writes parameter {@code i}'s {@code values} into every replica, through its reused direct
   * buffer (copied into the tensor's own memory; on a GPU it is a host-to-device copy).
   */
  void upload(int i, float[] values) {
    useFloat32();
    for (int d = 0; d < blocks.length; d++) {
      ByteBuffer b = upload[d][i];
      if (b == null) {
        b = ByteBuffer.allocateDirect(4 * sizes[i]).order(ByteOrder.nativeOrder());
        upload[d][i] = b;
      }
      b.clear();
      b.asFloatBuffer().put(values);
      TensorWrites.overwrite(params[d][i].getArray(), b);
    }
  }

  /** Adds (loss x samples, correct, samples) of {@code batch} to {@code acc}, without training. */
  public void evaluate(Batch batch, LossSpec lossSpec, Loss loss, double[] acc) {
    try (NDManager scope = managers[0].newSubManager()) {
      // the whole batch is one slice, on the first replica's device
      NDList[] xs = new NDList[1];
      NDArray[] ys = new NDArray[1];
      ReplicaSplit.split(batch, devices, new int[] {batch.size()}, xs, ys);
      NDList x = xs[0];
      NDArray y = ys[0];
      x.attach(scope);
      y.attach(scope);
      NDArray pred = blocks[0].forward(stores[0], x, false).head();
      NDArray l = lossSpec.evaluate(loss, y, pred);
      acc[0] += l.getFloat() * (double) batch.size();
      acc[1] += lossSpec.correct(y, pred);
      acc[2] += batch.size();
      addRegressionSums(lossSpec, y, pred, acc);
    }
  }

  /**
   * For {@code l2}, adds the batch's regression sums ({@link EpochMetrics.Regression#addSums}) to
   * {@code acc[3..6]}, computed on the host in double precision (a batch's labels and predictions
   * are small next to the step).
   */
  static void addRegressionSums(
      LossSpec lossSpec, NDArray labels, NDArray predictions, double[] acc) {
    if (lossSpec != LossSpec.L2 || acc.length < 3 + EpochMetrics.Regression.SUMS) {
      return;
    }
    float[] y =
        labels.getDataType() == DataType.FLOAT32
            ? labels.toFloatArray()
            : labels.toType(DataType.FLOAT32, false).toFloatArray();
    EpochMetrics.Regression.addSums(y, predictions.toFloatArray(), acc, 3);
  }

  /**
   * SHA-256 of every parameter of every replica (they must agree; the first differing one fails).
   */
  public byte[] hash() {
    useFloat32();
    byte[] first = null;
    for (int d = 0; d < blocks.length; d++) {
      MessageDigest md;
      try {
        md = MessageDigest.getInstance("SHA-256");
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
      for (Parameter p : params[d]) {
        md.update(p.getArray().toByteBuffer());
      }
      byte[] h = md.digest();
      if (first == null) {
        first = h;
      } else if (!MessageDigest.isEqual(first, h)) {
        throw new IllegalStateException(
            "Model replicas differ inside one worker: device "
                + devices.get(d)
                + " vs "
                + devices.get(0));
      }
    }
    return first;
  }

  /** The first replica's parameters in DJL's format ({@code Block.saveParameters}). */
  public byte[] saveParameters() {
    try {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      try (DataOutputStream out = new DataOutputStream(bytes)) {
        blocks[0].saveParameters(out);
      }
      return bytes.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public void close() {
    for (NDManager m : managers) {
      if (m != null) {
        m.close();
      }
    }
  }
}
