package dev.sparktrainer.train.step;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Parameter;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValueUtils;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.ParameterStore;
import dev.sparktrainer.model.torchscript.TorchScriptBlock;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@link Precision#BF16}: the bfloat16 copy of the parameters that forward and backward run on. Per
 * replica, one bfloat16 flat tensor per gradient bucket, laid out as {@link FlatState}'s float32
 * bucket (the master); each trainable parameter's bfloat16 tensor is a view into it, handed to the
 * blocks by a {@link ParameterStore} of this class (the blocks' own parameters stay the float32
 * views of the master, for checkpoints, validation and the trained model). Before each optimizer
 * step the copy is refreshed from the master with one copy per bucket; the view's gradients (bf16)
 * are gathered by {@link FlatGradients} with one {@code cat} per bucket and cast into a float32
 * bucket with one more call.
 *
 * <p>Normalization layers' scale and shift ({@link Parameter.Type#GAMMA}, {@link
 * Parameter.Type#BETA}) stay float32, like the running statistics: PyTorch's batch norm takes a
 * bfloat16 input with float32 parameters and statistics (and returns bfloat16), but refuses
 * bfloat16 parameters with float32 statistics; its layer norm takes them too. Their gradients are
 * float32; {@code cat} promotes a bucket that holds any of them to float32, and no cast follows.
 *
 * <p><b>Frozen weights.</b> A weight or bias that requires no gradient (a frozen backbone when
 * fine-tuning) is not trained, so its bfloat16 copy is made once, per replica, beside the buckets:
 * a convolution or linear layer refuses a bfloat16 input with float32 weights. It is made again
 * only when the master values are replaced ({@link #frozenChanged}: a resume, the start's
 * broadcast). Frozen normalization parameters stay float32 as above, and the statistics (running
 * mean and variance) stay what they are: float32, updated by forward.
 *
 * <p><b>What DJL's PyTorch engine allows.</b> DJL 0.35.1's JNI maps data types 0-8 only
 * (float32...complex64): any call that names {@code DataType.BFLOAT16} (create, zeros, {@code
 * toType}, {@code Block.cast}) ends in a bare C++ {@code throw;} that terminates the JVM, and a
 * bfloat16 tensor reports {@link DataType#UNKNOWN}. The bfloat16 tensors here are therefore made by
 * a one-line TorchScript function ({@code x.to(torch.bfloat16)}, the resource {@code bf16_cast.pt},
 * written by {@code bin/make-bf16-cast.py}); copies into them ({@code copy_}, which converts) and
 * the model's operations go through DJL's API. The model's output goes back to float32 through the
 * same function: DJL's own cast runs under a {@code NoGradGuard} and would cut the graph before the
 * loss (it serves for the gradients, which need none). Nothing here may pass a bfloat16 tensor's
 * reported type back to DJL.
 *
 * <p><b>TorchScript modules</b> compute with their own tensors, not the store's: {@link
 * ModuleViews} re-points the module's weights and biases at the same bfloat16 views (and frozen
 * weights at their copies) while it trains, and back at float32 views of the master whenever it is
 * read or evaluated. Their leaves, whose {@code .grad} is gathered, are the module's own tensors
 * (bfloat16 while training); this class never closes them. Batch norm's scale and shift stay
 * float32 as above (typed so by {@link TorchScriptBlock}).
 */
final class HalfParameters implements AutoCloseable {
  /**
   * The TorchScript resource: float32 to bfloat16 ({@code x.to(torch.bfloat16)}), bfloat16 to
   * float32 ({@code x.float()}), differentiable both ways.
   */
  static final String CAST_RESOURCE = "bf16_cast.pt";

  private final PtSymbolBlock toBf16;
  private final FlatState flat;
  private final StepLedger ledger;

  /** [replica][gradient bucket]: the bfloat16 copy of the bucket, flat. */
  final NDArray[][] values;

  /** [replica][trainable j]: the tensor autograd gives the gradient to (bf16 view or float32). */
  final PtNDArray[][] leaves;

  /** [gradient bucket]: holds a float32 parameter, so its gathered gradient is float32 already. */
  final boolean[] promoted;

  /** [replica]: gives the blocks the bfloat16 views in the training forward pass. */
  final ParameterStore[] stores;

  /** [replica]: the bfloat16 copy of each frozen weight, by parameter (also in the store). */
  private final List<Map<Parameter, NDArray>> frozen = new ArrayList<>();

  /**
   * A TorchScript module's frozen weight's float32 master (a view of {@link FlatState#stats}), by
   * parameter: its array is the module's tensor, bfloat16 while it trains.
   */
  private final Map<Parameter, NDArray> frozenMasters = new IdentityHashMap<>();

  /** [replica]: re-points a TorchScript module's tensors; null for the trainer's own blocks. */
  private final ModuleViews[] modules;

  /** The {@link ModuleViews#RESOURCE} function; null without TorchScript modules. */
  private PtSymbolBlock setData;

  /** The frozen weights' masters were replaced since their copies were made. */
  private boolean frozenStale;

  HalfParameters(ReplicaSet replicas, GradientBuckets buckets, FlatState flat, StepLedger ledger) {
    this.flat = flat;
    this.ledger = ledger;
    int k = replicas.devices().size();
    int nb = buckets.gradientBuckets();
    values = new NDArray[k][nb];
    leaves = new PtNDArray[k][replicas.trainable.length];
    promoted = new boolean[nb];
    stores = new ParameterStore[k];
    modules = new ModuleViews[k];
    toBf16 =
        TorchScripts.load(
            (PtNDManager) replicas.managers[0],
            CAST_RESOURCE,
            "the bfloat16 cast",
            "make-bf16-cast.py");
    boolean recording = JniUtils.isGradMode();
    JniUtils.setGradMode(false);
    try {
      for (int d = 0; d < k; d++) {
        Map<Parameter, NDArray> views = new IdentityHashMap<>();
        if (replicas.blocks[d] instanceof TorchScriptBlock) {
          if (setData == null) {
            setData = ModuleViews.load((PtNDManager) replicas.managers[0]);
          }
          modules[d] = new ModuleViews((TorchScriptBlock) replicas.blocks[d], setData, ledger);
        }
        for (int b = 0; b < nb; b++) {
          values[d][b] = cast(flat.values[d][b]);
          for (int j : buckets.members[b]) {
            Parameter p = replicas.params[d][replicas.trainable[j]];
            PtNDArray master = (PtNDArray) p.getArray();
            if (p.getType() == Parameter.Type.GAMMA || p.getType() == Parameter.Type.BETA) {
              leaves[d][j] = master;
              promoted[b] = true;
              continue;
            }
            int from = buckets.offset[j] - buckets.start[b];
            int n = replicas.sizes[replicas.trainable[j]];
            if (modules[d] != null) {
              // the module computes with its own tensor, re-pointed at these views
              long[] shape = master.getShape().getShape();
              modules[d].add(
                  master,
                  view(values[d][b], from, n, shape),
                  view(flat.values[d][b], from, n, shape),
                  true);
              leaves[d][j] = master;
              continue;
            }
            try (PtNDArray slice = (PtNDArray) FlatState.slice(values[d][b], from, n)) {
              PtNDArray view = JniUtils.reshape(slice, master.getShape().getShape());
              view.setRequiresGradient(true);
              leaves[d][j] = view;
              views.put(p, view);
            }
          }
        }
        Map<Parameter, NDArray> copies = new IdentityHashMap<>();
        frozen.add(copies);
        int statsBase = buckets.start[buckets.statsBucket()];
        for (int s = 0; s < replicas.stats.length; s++) {
          Parameter p = replicas.params[d][replicas.stats[s]];
          if (!isFrozenWeight(p)) {
            continue;
          }
          if (modules[d] == null) {
            NDArray copy = cast(p.getArray());
            copies.put(p, copy);
            views.put(p, copy);
          } else {
            // the master's own view: the module's tensor (named, and re-pointed) is not it
            PtNDArray master = (PtNDArray) p.getArray();
            NDArray view =
                view(
                    flat.stats[d],
                    buckets.statOffset[s] - statsBase,
                    replicas.sizes[replicas.stats[s]],
                    master.getShape().getShape());
            NDArray copy = cast(view);
            copies.put(p, copy);
            frozenMasters.put(p, view);
            modules[d].add(master, copy, view, false);
          }
        }
        if (modules[d] != null) {
          modules[d].install();
        }
        stores[d] = new CastStore(replicas.managers[d], views);
      }
    } catch (RuntimeException | Error e) {
      close();
      throw e;
    } finally {
      JniUtils.setGradMode(recording);
    }
  }

  /** A view of elements {@code [from, from + n)} of {@code flat}, shaped {@code shape}. */
  private static NDArray view(NDArray flat, int from, int n, long[] shape) {
    try (PtNDArray slice = (PtNDArray) FlatState.slice(flat, from, n)) {
      return JniUtils.reshape(slice, shape);
    }
  }

  /**
   * A parameter that is not trained and that forward multiplies with the bfloat16 activations: a
   * frozen weight or bias (linear, convolution, embedding). Not normalization's scale and shift
   * (float32, see above), not statistics.
   */
  private static boolean isFrozenWeight(Parameter p) {
    return !p.requiresGradient()
        && (p.getType() == Parameter.Type.WEIGHT || p.getType() == Parameter.Type.BIAS);
  }

  /**
   * The frozen weights' master values were replaced (a resume, the start's broadcast): their
   * bfloat16 copies are made again before the next forward.
   */
  void frozenChanged() {
    frozenStale = !frozen.isEmpty() && !frozen.get(0).isEmpty();
  }

  /** Makes the frozen weights' bfloat16 copies again, in place (grad mode off). */
  private void recopyFrozen() {
    for (int d = 0; d < frozen.size(); d++) {
      for (Map.Entry<Parameter, NDArray> e : frozen.get(d).entrySet()) {
        // copy_ converts float32 to bfloat16 into the same tensor the store hands out
        long[] flatShape = {-1};
        try (PtNDArray dst = JniUtils.reshape((PtNDArray) e.getValue(), flatShape);
            PtNDArray src = JniUtils.reshape(master(e.getKey()), flatShape)) {
          FlatState.copy(dst, src);
        }
        ledger.writebackCalls++;
      }
    }
    frozenStale = false;
  }

  /** Frozen weight {@code p}'s float32 master values. */
  private PtNDArray master(Parameter p) {
    NDArray m = frozenMasters.get(p);
    return (PtNDArray) (m != null ? m : p.getArray());
  }

  /**
   * A new tensor with {@code x}'s values on its device, bfloat16 for float32 and float32 for
   * bfloat16, recorded by autograd (one engine call).
   */
  private NDArray cast(NDArray x) {
    return IValueUtils.forward(toBf16, new NDList(x), true).head();
  }

  /**
   * The model's entry: each floating-point input of {@code x} cast to bfloat16 (one counted engine
   * call each), attached to {@code scope}; other inputs (token ids, say) as they are.
   */
  NDList inputs(NDList x, NDManager scope) {
    NDList out = new NDList(x.size());
    for (NDArray a : x) {
      if (a.getDataType().isFloating()) {
        NDArray h = cast(a);
        h.attach(scope);
        ledger.otherCalls++;
        ledger.deviceAllocations++;
        out.add(h);
      } else {
        out.add(a);
      }
    }
    return out;
  }

  /**
   * The model's output cast back to float32 for the loss, differentiably (one counted engine call).
   */
  NDArray output(NDArray pred) {
    if (pred.getDataType() == DataType.FLOAT32) {
      // float32 already (a float32 parameter took part last): the cast would make it bfloat16
      return pred;
    }
    ledger.otherCalls++;
    ledger.deviceAllocations++;
    return cast(pred);
  }

  /**
   * A float32 copy of bfloat16 {@code x} on {@code device} (one engine call, not counted; not
   * recorded by autograd).
   */
  static NDArray toFloat32(NDArray x, Device device) {
    return JniUtils.to((PtNDArray) x, DataType.FLOAT32, device);
  }

  /**
   * The bfloat16 copy from the float32 master: one converting copy per bucket and replica, counted
   * as write-back (new values into the tensors the blocks compute with). Runs with gradient
   * recording off: the views are autograd leaves.
   */
  void refresh() {
    boolean recording = JniUtils.isGradMode();
    JniUtils.setGradMode(false);
    try {
      for (int d = 0; d < values.length; d++) {
        for (int b = 0; b < values[d].length; b++) {
          FlatState.copy(values[d][b], flat.values[d][b]);
          ledger.writebackCalls++;
        }
      }
      if (frozenStale) {
        recopyFrozen();
      }
    } finally {
      JniUtils.setGradMode(recording);
    }
    ledger.otherCalls += 3;
  }

  /**
   * Whether a tensor between segments carries a gradient: floating point, or bfloat16 (which DJL
   * reports as {@link DataType#UNKNOWN}; in this step only the bfloat16 copies are unknown).
   */
  static boolean isFloating(NDArray a) {
    DataType t = a.getDataType();
    return t.isFloating() || t == DataType.UNKNOWN;
  }

  @Override
  public void close() {
    try {
      closeModules();
    } finally {
      closeTensors();
    }
  }

  /**
   * Points each TorchScript module back at the float32 master (it outlives this step: the trained
   * model, a later step) and uninstalls its views.
   */
  private void closeModules() {
    RuntimeException failure = null;
    for (int d = 0; d < modules.length; d++) {
      if (modules[d] == null) {
        continue;
      }
      try {
        modules[d].close();
      } catch (RuntimeException e) {
        if (failure == null) {
          failure = e;
        } else {
          failure.addSuppressed(e);
        }
      }
    }
    if (setData != null) {
      setData.close();
    }
    if (failure != null) {
      throw failure;
    }
  }

  private void closeTensors() {
    for (int d = 0; d < leaves.length; d++) {
      if (modules[d] != null) {
        continue; // the leaves are the module's own tensors
      }
      for (PtNDArray a : leaves[d]) {
        if (a != null && a.getDataType() == DataType.UNKNOWN) {
          a.close(); // the views (the float32 ones are the blocks')
        }
      }
    }
    for (NDArray[] row : values) {
      for (NDArray a : row) {
        if (a != null) {
          a.close();
        }
      }
    }
    for (Map<Parameter, NDArray> copies : frozen) {
      copies.values().forEach(NDArray::close);
    }
    if (toBf16 != null) {
      toBf16.close();
    }
  }

  /** The blocks' parameters, with the bfloat16 view in place of each cast one. */
  private static final class CastStore extends ParameterStore {
    private final Map<Parameter, NDArray> views;

    CastStore(NDManager manager, Map<Parameter, NDArray> views) {
      super(manager, false);
      this.views = views;
    }

    @Override
    public NDArray getValue(Parameter parameter, Device device, boolean training) {
      NDArray v = views.get(parameter);
      return v != null ? v : super.getValue(parameter, device, training);
    }
  }
}
