package dev.sparktrainer.model.torchscript;

import ai.djl.engine.Engine;
import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Parameter;
import ai.djl.nn.ParameterList;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValue;
import ai.djl.pytorch.jni.IValueUtils;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import java.io.ByteArrayInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A TorchScript module as a DJL block that the trainer's step can train like its own models.
 *
 * <ul>
 *   <li><b>Mode, explicitly.</b> A module loads in whatever mode it was saved in, while DJL's
 *       {@link PtSymbolBlock} assumes training; here every forward puts the module in the mode
 *       asked for ({@code train()} for training steps, {@code eval()} for validation, evaluation
 *       and prediction) when it is not in it already, so no training step can run in eval mode.
 *   <li><b>Parameters</b> are the module's own tensors (same storage), trainable as their {@code
 *       requires_grad} says: a parameter the module froze is not trained.
 *   <li><b>Buffers</b> (batch norm's running mean and variance) are not visible through DJL; a
 *       module written by {@code python/export_torchscript.py} hands them out through its method
 *       {@value #BUFFERS_METHOD}. Its float32 buffers appear here as parameters that require no
 *       gradient: the step keeps them like its own models' running statistics (the same on every
 *       replica after each step, in checkpoints, restored on resume). Integer buffers (batch norm's
 *       {@code num_batches_tracked}) stay the module's own, counting its forwards. A module with
 *       buffers but without the method is refused, naming the helper.
 *   <li><b>Normalization parameters.</b> The {@code weight} and {@code bias} of a submodule that
 *       has a {@code running_mean} buffer (batch norm) are typed {@link Parameter.Type#GAMMA} and
 *       {@link Parameter.Type#BETA}, as the trainer's own batch norm's are: {@code --precision
 *       bf16} keeps them float32 (batch norm refuses bfloat16 parameters with float32 statistics).
 *       That needs the buffers' names, which the export helper records; without them (or in a layer
 *       without running statistics, such as layer norm) they are weights and biases, computed in
 *       bfloat16 like the rest.
 *   <li><b>Precision.</b> In {@code --precision bf16} the training step points the module's
 *       parameters at bfloat16 copies while it trains ({@link #setParameterViews}); every eval
 *       forward and {@link #saveParameters} (and the step's readers, through {@link #useFloat32})
 *       first points them back at the float32 master weights.
 * </ul>
 *
 * <p>The forward's arguments are the batch's feature tensors, in order (a sequence column's values
 * then its mask, see {@link TorchScriptSpec.Column}), as they are: int64 ids stay int64; its output
 * is a tensor or a tuple whose first element is the model's output.
 */
public final class TorchScriptBlock extends PtSymbolBlock {
  /** The exported method that returns the module's buffers (the same tensors it uses). */
  public static final String BUFFERS_METHOD = "sparktrainer_buffers";

  private final PtNDManager manager;
  private final String source;
  private Map<String, Parameter> parameters;
  private PtNDArray[] counters = new PtNDArray[0];
  private List<String> bufferNames = List.of();

  /**
   * The module's mode as last set here; null until the first forward sets it. Volatile: inference
   * tasks share a loaded model (its forwards all eval).
   */
  private volatile Boolean training;

  /** What the parameters are pointed at before a forward or a read; null: their own values. */
  private ParameterViews views;

  /**
   * Where the module's parameters point, switched by whoever computes with other copies of them
   * (the training step's {@code --precision bf16}: bfloat16 copies for training forwards).
   */
  public interface ParameterViews {
    /**
     * Points the module's parameters at what a forward in this mode computes with ({@code false}:
     * the float32 master weights, for eval forwards and for reading or writing them); does nothing
     * when they point there already.
     */
    void use(boolean training);
  }

  /** Installs {@code views} (null: none; the parameters must then be the float32 ones). */
  public void setParameterViews(ParameterViews views) {
    this.views = views;
  }

  /**
   * Points the module's parameters at the float32 master weights, if they are pointed elsewhere:
   * before anything reads or writes their arrays (checkpoints, a restore, a hash).
   */
  public void useFloat32() {
    if (views != null) {
      views.use(false);
    }
  }

  private TorchScriptBlock(PtNDManager manager, long handle, String source) {
    super(manager, handle);
    this.manager = manager;
    this.source = source;
  }

  /**
   * Loads {@code file}'s module onto {@code manager}'s device.
   *
   * @throws IllegalArgumentException when libtorch cannot load it, or it has buffers the trainer
   *     cannot reach
   */
  public static TorchScriptBlock load(PtNDManager manager, TorchScriptFile file) {
    TorchScriptBlock block = load(manager, file.bytesView(), file.source());
    try {
      if (file.metadata() != null) {
        block.bufferNames = file.metadata().buffers();
      }
      block.checkBuffers(file);
      return block;
    } catch (RuntimeException e) {
      block.close();
      throw e;
    }
  }

  /** Loads a module from {@code bytes} (a TorchScript file) named {@code source} in errors. */
  static TorchScriptBlock load(PtNDManager manager, byte[] bytes, String source) {
    long handle;
    try {
      handle =
          JniUtils.loadModuleHandle(
              new ByteArrayInputStream(bytes), manager.getDevice(), true, false);
    } catch (EngineException e) {
      throw new IllegalArgumentException(
          "Invalid model torchscript:"
              + source
              + ": the executors' libtorch "
              + Engine.getEngine("PyTorch").getVersion()
              + " cannot load it: "
              + firstLine(e.getMessage()),
          e);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new TorchScriptBlock(manager, handle, source);
  }

  static String firstLine(String s) {
    if (s == null) {
      return "(no message)";
    }
    int nl = s.indexOf('\n');
    return nl < 0 ? s : s.substring(0, nl);
  }

  /** Where the module came from (for messages). */
  public String source() {
    return source;
  }

  /** Whether the module has the exported buffers method. */
  public boolean hasBuffersMethod() {
    return Arrays.asList(JniUtils.getMethodNames(this)).contains(BUFFERS_METHOD);
  }

  private void checkBuffers(TorchScriptFile file) {
    if (hasBuffersMethod()) {
      return;
    }
    int params = getDirectParameters().size(); // no buffers method: the parameters alone
    if (file.storages() > params) {
      throw new IllegalArgumentException(
          "Invalid model torchscript:"
              + source
              + ": it holds "
              + (file.storages() - params)
              + " tensor(s) that are not parameters (buffers, such as batch norm's running"
              + " statistics), which the trainer can only keep the same on every worker, checkpoint"
              + " and restore through a "
              + BUFFERS_METHOD
              + "() method: export the module with python/export_torchscript.py");
    }
  }

  @Override
  public ParameterList getDirectParameters() {
    if (parameters == null) {
      Map<String, Parameter> out = new LinkedHashMap<>();
      Set<String> norms = normalizationLayers(bufferNames());
      for (NDArray p : JniUtils.moduleGetParams(this, manager)) {
        boolean trainable = JniUtils.requiresGrad((PtNDArray) p);
        out.put(
            p.getName(),
            Parameter.builder()
                .setName(p.getName())
                .setType(typeOf(p.getName(), norms))
                .optArray(p)
                .optRequiresGrad(trainable)
                .build());
      }
      List<PtNDArray> ints = new ArrayList<>();
      List<String> names = bufferNames();
      PtNDArray[] buffers = buffers();
      for (int i = 0; i < buffers.length; i++) {
        PtNDArray b = buffers[i];
        if (b.getDataType() != DataType.FLOAT32) {
          ints.add(b);
          continue;
        }
        String name = i < names.size() ? names.get(i) : "buffer." + i;
        b.setName(name);
        out.put(
            name,
            Parameter.builder()
                .setName(name)
                .setType(typeOf(name, Set.of()))
                .optArray(b)
                .optRequiresGrad(false)
                .build());
      }
      counters = ints.toArray(new PtNDArray[0]);
      parameters = out;
    }
    return new ParameterList(parameters);
  }

  /** Names for the buffers, in the order of the buffers method (the export helper's record). */
  void setBufferNames(List<String> names) {
    bufferNames = List.copyOf(names);
  }

  private List<String> bufferNames() {
    return bufferNames;
  }

  /** The module's buffers (the tensors it uses), or none without the buffers method. */
  private PtNDArray[] buffers() {
    if (!hasBuffersMethod()) {
      return new PtNDArray[0];
    }
    try (IValue out = IValueUtils.runMethod(this, BUFFERS_METHOD)) {
      return out.toTensorArray(manager);
    }
  }

  /** The module's integer buffers (batch norm's {@code num_batches_tracked}): its own. */
  public int counterCount() {
    getDirectParameters();
    return counters.length;
  }

  /** The submodules (name prefixes, "" for the root) that hold a {@code running_mean} buffer. */
  private static Set<String> normalizationLayers(List<String> bufferNames) {
    Set<String> out = new HashSet<>();
    for (String b : bufferNames) {
      if (b.equals("running_mean")) {
        out.add("");
      } else if (b.endsWith(".running_mean")) {
        out.add(b.substring(0, b.length() - ".running_mean".length()));
      }
    }
    return out;
  }

  /**
   * The parameter type of {@code name}; {@code norms}: the submodules whose weight and bias are
   * normalization's scale and shift.
   */
  private static Parameter.Type typeOf(String name, Set<String> norms) {
    int dot = name.lastIndexOf('.');
    String leaf = name.substring(dot + 1);
    if (norms.contains(dot < 0 ? "" : name.substring(0, dot))) {
      if (leaf.equals("weight")) {
        return Parameter.Type.GAMMA;
      }
      if (leaf.equals("bias")) {
        return Parameter.Type.BETA;
      }
    }
    switch (leaf) {
      case "bias":
        return Parameter.Type.BIAS;
      case "running_mean":
        return Parameter.Type.RUNNING_MEAN;
      case "running_var":
        return Parameter.Type.RUNNING_VAR;
      case "weight":
        return Parameter.Type.WEIGHT;
      default:
        return Parameter.Type.OTHER;
    }
  }

  /** Puts the module in training or eval mode, when it is not in it (one engine call then). */
  public void setTraining(boolean train) {
    if (training == null || training != train) {
      if (train) {
        JniUtils.enableTrainingMode(this);
      } else {
        JniUtils.enableInferenceMode(this);
      }
      training = train;
    }
  }

  /** The mode last set (null before the first forward). */
  public Boolean training() {
    return training;
  }

  /**
   * Whether TorchScript's graph executor optimizes the module's graph (its own autodiff, fusion):
   * off by default (system property {@value #GRAPH_OPTIMIZE}), so forward and backward run operator
   * by operator under PyTorch's autograd, as eager PyTorch does.
   */
  public static final String GRAPH_OPTIMIZE = "dev.sparktrainer.torchscript.graphOptimize";

  private static final boolean OPTIMIZE = Boolean.getBoolean(GRAPH_OPTIMIZE);

  /** The setting is per thread in libtorch: made once on each thread that runs a forward. */
  private static final ThreadLocal<Boolean> OPTIMIZE_SET = ThreadLocal.withInitial(() -> false);

  @Override
  protected NDList forwardInternal(
      ParameterStore parameterStore,
      NDList inputs,
      boolean training,
      PairList<String, Object> params) {
    if (!OPTIMIZE_SET.get()) {
      JniUtils.setGraphExecutorOptimize(OPTIMIZE);
      OPTIMIZE_SET.set(true);
    }
    if (views != null) {
      views.use(training);
    }
    setTraining(training);
    // DJL reads structure (dicts, lists, tuples) from the arrays' names: the features are plain
    // positional tensors.
    NDList plain = new NDList(inputs.size());
    for (NDArray a : inputs) {
      if (a.getName() != null) {
        a.setName(null);
      }
      plain.add(a);
    }
    if (training) {
      return IValueUtils.forward(this, plain, true);
    }
    // Not under DJL's eval guard (libtorch's inference mode): once the module trained, the
    // TorchScript executor runs it with differentiable subgraphs (specialized while its parameters
    // required gradients), which refuse inference-mode tensors ("Inference tensors cannot be saved
    // for backward"). Gradient recording off instead: nothing is recorded either.
    boolean recording = JniUtils.isGradMode();
    JniUtils.setGradMode(false);
    try {
      return IValueUtils.forward(this, plain, true);
    } finally {
      JniUtils.setGradMode(recording);
    }
  }

  /**
   * The module with its float32 parameters ({@link PtSymbolBlock#saveParameters}: a version byte,
   * the length, the TorchScript file).
   */
  @Override
  public void saveParameters(DataOutputStream os) throws IOException {
    useFloat32();
    super.saveParameters(os);
  }

  @Override
  public String toString() {
    return "TorchScript module " + source;
  }
}
