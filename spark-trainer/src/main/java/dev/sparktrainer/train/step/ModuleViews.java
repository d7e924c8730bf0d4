package dev.sparktrainer.train.step;

import ai.djl.ndarray.NDArray;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValue;
import dev.sparktrainer.model.torchscript.TorchScriptBlock;
import java.util.ArrayList;
import java.util.List;

/**
 * {@link Precision#BF16} for one replica's TorchScript module, which computes with its own tensors
 * and ignores the parameter store that hands the trainer's own blocks their bfloat16 copies: the
 * module's tensors that compute in bfloat16 (trainable weights and biases, frozen ones) are
 * re-pointed, in one engine call, at bfloat16 views (slices of {@link HalfParameters}'s bfloat16
 * buckets, or a frozen weight's copy) for training forwards, and back at float32 views of the
 * master ({@link FlatState}'s buckets and statistics) whenever the module must read as float32:
 * eval forwards, saving the module, reading or writing the parameters' arrays ({@link
 * TorchScriptBlock.ParameterViews}). The call is {@code set_data.pt} ({@code
 * torch.ops.aten.set_data(t, target)} for each pair; written by {@code bin/make-set-data.py}): each
 * tensor stays the same autograd leaf, still requiring a gradient, and takes the target's data type
 * and storage, so its {@code .grad} is bfloat16 while it trains. {@code Tensor.set_}, which {@link
 * ValueAlias} uses, would keep float32.
 *
 * <p>The module switches only on a change of mode: a training run switches to bfloat16 at its first
 * step and stays there; a validation between steps switches to float32 and the next step back (one
 * counted engine call each). The lists of tensors travel to the engine as lists made once.
 *
 * <p>DJL caches an array's data type when first asked: the module's arrays may report float32 while
 * they are bfloat16. Nothing may read or write them without {@link #use use(false)} first.
 */
final class ModuleViews implements TorchScriptBlock.ParameterViews, AutoCloseable {
  static final String RESOURCE = "set_data.pt";

  private final TorchScriptBlock module;
  private final PtSymbolBlock setData;
  private final StepLedger ledger;

  /** The module's tensors, their bfloat16 views and float32 views, in the same order. */
  private final List<PtNDArray> tensors = new ArrayList<>();

  private final List<NDArray> bf16 = new ArrayList<>();
  private final List<NDArray> fp32 = new ArrayList<>();

  /** The views this owns (a frozen weight's bfloat16 copy is {@link HalfParameters}'s). */
  private final List<NDArray> owned = new ArrayList<>();

  /** The three lists as engine lists (made on first use). */
  private IValue tensorList;

  private IValue bf16List;
  private IValue fp32List;

  /** The module's tensors point at the bfloat16 views. */
  private boolean inBf16;

  /**
   * @param setData the loaded {@link #RESOURCE} ({@link #load}), shared by the replicas and closed
   *     by whoever loaded it
   */
  ModuleViews(TorchScriptBlock module, PtSymbolBlock setData, StepLedger ledger) {
    this.module = module;
    this.setData = setData;
    this.ledger = ledger;
  }

  /** Loads the {@link #RESOURCE} (one serves every replica: it holds no tensor). */
  static PtSymbolBlock load(PtNDManager manager) {
    return TorchScripts.load(manager, RESOURCE, "the parameters' re-pointing", "make-set-data.py");
  }

  /**
   * Adds module tensor {@code tensor} (float32, its values in {@code float32}'s storage now) with
   * the bfloat16 tensor of the same shape it computes with in training. The float32 view is owned
   * from here on, and the bfloat16 one when {@code ownBf16}.
   */
  void add(PtNDArray tensor, NDArray bfloat16, NDArray float32, boolean ownBf16) {
    tensors.add(tensor);
    bf16.add(bfloat16);
    fp32.add(float32);
    owned.add(float32);
    if (ownBf16) {
      owned.add(bfloat16);
    }
  }

  /** From now on the module's forwards and readers switch through this. */
  void install() {
    module.setParameterViews(this);
  }

  @Override
  public void use(boolean training) {
    if (training == inBf16 || tensors.isEmpty()) {
      return;
    }
    if (tensorList == null) {
      tensorList = IValue.listFrom(tensors.toArray(new PtNDArray[0]));
      bf16List = IValue.listFrom(bf16.toArray(new PtNDArray[0]));
      fp32List = IValue.listFrom(fp32.toArray(new PtNDArray[0]));
    }
    try (IValue out = setData.forward(tensorList, training ? bf16List : fp32List)) {
      // out: how many were re-pointed
    }
    inBf16 = training;
    ledger.otherCalls++;
  }

  /**
   * Points the module back at float32 (it outlives the step: the trained model, a later step),
   * uninstalls this, and frees the views and lists (never the module's own tensors).
   */
  @Override
  public void close() {
    try {
      use(false);
    } finally {
      module.setParameterViews(null);
      for (IValue v : new IValue[] {tensorList, bf16List, fp32List}) {
        if (v != null) {
          v.close();
        }
      }
      owned.forEach(NDArray::close);
    }
  }
}
