package dev.sparktrainer.train;

import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.torchscript.TorchScriptSpec;
import dev.sparktrainer.train.metrics.History;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * The result of training: the model spec, its trained parameters (DJL's format) and the history.
 *
 * <p>{@link #save} writes a directory from which {@link #load} rebuilds the model without user code
 * (built-in specs): {@code model.properties} (the spec and the loss), {@code model.params} ({@code
 * Block.saveParameters}), {@code history.json}, for a model trained with feature normalization
 * {@code normalization.csv} (the training data's statistics; {@code normalize=} in the properties),
 * for a TorchScript model {@code model.pt} (the trained module, for PyTorch's {@code
 * torch.jit.load}), and the completion marker {@value #MARKER}. A save is all or nothing, and a
 * load checks every file against the marker.
 */
public final class TrainedModel implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final System.Logger LOG = System.getLogger(TrainedModel.class.getName());

  /**
   * The completion marker: written last, it lists every file of the model with its size and
   * CRC-32C.
   */
  public static final String MARKER = ModelMarker.NAME;

  static final String PROPERTIES = "model.properties";
  static final String PARAMS = "model.params";
  static final String HISTORY = "history.json";

  /**
   * The normalization's statistics, for a model trained with one (absent otherwise, and in older
   * models).
   */
  static final String NORMALIZATION = "normalization.csv";

  /**
   * A TorchScript model's module with its trained weights and buffers, as {@code torch.jit.load}
   * reads it (the same module as in {@link #PARAMS}, without DJL's header).
   */
  public static final String TORCHSCRIPT = "model.pt";

  private static final List<String> MODEL_FILES =
      List.of(PROPERTIES, PARAMS, HISTORY, NORMALIZATION, TORCHSCRIPT);

  private final ModelSpec spec;
  private final LossSpec loss;
  private final byte[] parameters;
  private final History history;
  private final Normalization normalization;

  TrainedModel(ModelSpec spec, LossSpec loss, byte[] parameters, History history) {
    this(spec, loss, parameters, history, null);
  }

  TrainedModel(
      ModelSpec spec,
      LossSpec loss,
      byte[] parameters,
      History history,
      Normalization normalization) {
    this.spec = spec;
    this.loss = loss;
    this.parameters = parameters;
    this.history = history;
    this.normalization = normalization;
  }

  /**
   * The feature normalization fitted on the training data, which inference applies before the model
   * ({@code BatchInference}); null if the model was trained on raw features.
   */
  public Normalization normalization() {
    return normalization;
  }

  /** The model's spec. */
  public ModelSpec spec() {
    return spec;
  }

  /** The loss it was trained with. */
  public LossSpec loss() {
    return loss;
  }

  /** Per-epoch metrics. */
  public History history() {
    return history;
  }

  /** The parameters in DJL's {@code Block.saveParameters} format. */
  public byte[] parameterBytes() {
    return parameters.clone();
  }

  /** A new block with the trained parameters, its arrays owned by {@code manager}. */
  public Block newBlock(NDManager manager) {
    try {
      return spec.restore(manager, parameters);
    } catch (MalformedModelException e) {
      throw new IllegalStateException("Cannot load the trained parameters into " + spec, e);
    }
  }

  /**
   * Writes the model into {@code dir}, all or nothing: see {@link #save(String, Configuration,
   * Map)}.
   */
  public void save(String dir, Configuration conf) throws IOException {
    save(dir, conf, Map.of());
  }

  /**
   * Writes {@code model.properties}, {@code model.params}, {@code history.json} and {@code
   * extraFiles} (name to content, e.g. the command line's {@code inputs.properties}) into {@code
   * dir}, then the completion marker {@value #MARKER}: each file's size and CRC-32C, which {@link
   * #load} checks.
   *
   * <p>All or nothing. Where the store renames directories atomically (HDFS, local disks) the files
   * are written to {@code _tmp-<name>-<uuid>} next to {@code dir} and renamed into place; a
   * previous model there stays loadable until then. On object stores (S3A, GCS, ...), whose renames
   * copy, the previous marker is deleted first, the files are written in place and the marker last:
   * a save that stops half-way leaves nothing marked complete, which the next save replaces.
   *
   * @throws IOException if it cannot be written, or if {@code dir} holds anything that is not part
   *     of a saved model (a save never deletes other files)
   */
  public void save(String dir, Configuration conf, Map<String, byte[]> extraFiles)
      throws IOException {
    Map<String, byte[]> files = new LinkedHashMap<>();
    Properties props = new Properties();
    for (Map.Entry<String, String> e : spec.toProperties().entrySet()) {
      props.setProperty("model." + e.getKey(), e.getValue());
    }
    props.setProperty("loss", loss.name());
    if (normalization != null) {
      props.setProperty("normalize", normalization.mode().id());
    }
    ByteArrayOutputStream p = new ByteArrayOutputStream();
    props.store(p, "spark-trainer model");
    files.put(PROPERTIES, p.toByteArray());
    files.put(PARAMS, parameters);
    if (spec instanceof TorchScriptSpec) {
      files.put(TORCHSCRIPT, TorchScriptSpec.moduleOf(parameters));
    }
    files.put(HISTORY, (history.toJson() + "\n").getBytes(StandardCharsets.UTF_8));
    if (normalization != null) {
      files.put(NORMALIZATION, normalization.toCsv());
    }
    for (Map.Entry<String, byte[]> e : new TreeMap<>(extraFiles).entrySet()) {
      String name = e.getKey();
      if (!name.matches("[A-Za-z0-9][A-Za-z0-9._-]*") || files.containsKey(name)) {
        throw new IllegalArgumentException(
            "Invalid extra file name '"
                + name
                + "': expected a plain file name"
                + " (letters, digits, '.', '_', '-'; not starting with '_' or '.') other than "
                + MODEL_FILES);
      }
      files.put(name, e.getValue().clone());
    }
    byte[] marker = ModelMarker.encode(files);

    Path d = new Path(dir);
    FileSystem fs = d.getFileSystem(conf);
    if (d.getParent() == null) {
      throw new IOException(
          "Cannot save a model to the root directory " + d + ": choose a directory under it");
    }
    checkReplaceable(fs, d, files.keySet());
    if (AtomicOutputs.renamesAtomically(fs)) {
      saveByRename(fs, d, files, marker);
    } else {
      saveInPlace(fs, d, files, marker);
    }
  }

  /**
   * Written next to {@code d}, then renamed into place (the previous model moved aside, then
   * deleted).
   */
  private static void saveByRename(FileSystem fs, Path d, Map<String, byte[]> files, byte[] marker)
      throws IOException {
    String id = UUID.randomUUID().toString();
    Path tmp = new Path(d.getParent(), "_tmp-" + d.getName() + "-" + id);
    Path old = null;
    boolean committed = false;
    try {
      if (!fs.mkdirs(tmp)) {
        throw new IOException("Cannot create " + tmp);
      }
      for (Map.Entry<String, byte[]> f : files.entrySet()) {
        AtomicOutputs.writeWhole(fs, new Path(tmp, f.getKey()), f.getValue());
      }
      AtomicOutputs.writeWhole(fs, new Path(tmp, MARKER), marker);
      if (fs.exists(d)) {
        // A directory is not renamed over another: the previous model steps aside for a moment.
        old = new Path(d.getParent(), "_old-" + d.getName() + "-" + id);
        if (!fs.rename(d, old)) {
          throw new IOException("Cannot move the previous model " + d + " aside to " + old);
        }
      }
      if (!fs.rename(tmp, d)) {
        if (old != null && !fs.rename(old, d)) {
          LOG.log(System.Logger.Level.WARNING, "The previous model " + d + " was left at " + old);
        }
        throw new IOException("Cannot rename " + tmp + " to " + d);
      }
      committed = true;
    } finally {
      if (!committed) {
        AtomicOutputs.deleteQuietly(fs, tmp, true, "the unfinished model");
      }
    }
    if (old != null) {
      AtomicOutputs.deleteQuietly(fs, old, true, "the previous model");
    }
  }

  /** Object stores: no marker while the files are written, the marker last. */
  private static void saveInPlace(FileSystem fs, Path d, Map<String, byte[]> files, byte[] marker)
      throws IOException {
    fs.mkdirs(d);
    Path m = new Path(d, MARKER);
    if (fs.exists(m) && !fs.delete(m, false)) {
      throw new IOException("Cannot delete the completion marker " + m + " of the previous model");
    }
    for (Map.Entry<String, byte[]> f : files.entrySet()) {
      AtomicOutputs.writeWhole(fs, new Path(d, f.getKey()), f.getValue());
    }
    for (FileStatus st :
        fs.listStatus(d)) { // files of the previous model that this one does not have
      if (!files.containsKey(st.getPath().getName()) && !st.getPath().getName().equals(MARKER)) {
        fs.delete(st.getPath(), false);
      }
    }
    AtomicOutputs.writeWhole(fs, m, marker);
  }

  /**
   * A save replaces a previous model (complete or not) but nothing else: {@code d} must be absent,
   * or a directory holding only model files (and their {@code .crc} side files).
   */
  private static void checkReplaceable(FileSystem fs, Path d, Set<String> names)
      throws IOException {
    FileStatus status;
    try {
      status = fs.getFileStatus(d);
    } catch (FileNotFoundException e) {
      return;
    }
    if (!status.isDirectory()) {
      throw new IOException(
          "Cannot save the model to " + d + ": it is a file, expected a directory");
    }
    Set<String> allowed = new HashSet<>(MODEL_FILES);
    allowed.addAll(names);
    allowed.add(MARKER);
    try {
      allowed.addAll(ModelMarker.read(fs, d).keySet());
    } catch (IOException e) {
      // no marker (an incomplete model) or an unreadable one: the known names only
    }
    for (FileStatus st : fs.listStatus(d)) {
      String n = st.getPath().getName();
      String base = n.startsWith(".") && n.endsWith(".crc") ? n.substring(1, n.length() - 4) : n;
      if (st.isDirectory() || !allowed.contains(base)) {
        throw new IOException(
            "Cannot save the model to "
                + d
                + ": it holds "
                + n
                + ", which is not part of a"
                + " saved model: choose a new or empty directory");
      }
    }
  }

  /** Whether {@code dir} holds a model whose save finished (its completion marker exists). */
  public static boolean isComplete(String dir, Configuration conf) throws IOException {
    Path d = new Path(dir);
    return d.getFileSystem(conf).exists(new Path(d, MARKER));
  }

  /**
   * Reads what {@link #save} wrote (the history is not read back: it is for people and tools),
   * checking first that the save finished ({@value #MARKER}) and that every file has the size and
   * CRC-32C the marker records.
   *
   * @throws IOException naming the missing marker, or the missing, truncated or corrupt file
   */
  public static TrainedModel load(String dir, Configuration conf) throws IOException {
    Path d = new Path(dir);
    FileSystem fs = d.getFileSystem(conf);
    Map<String, byte[]> files = ModelMarker.readVerified(fs, d);
    for (String required : List.of(PROPERTIES, PARAMS)) {
      if (!files.containsKey(required)) {
        throw new IOException(
            "The model at " + d + " is incomplete: its " + MARKER + " does not list " + required);
      }
    }
    Properties props = new Properties();
    props.load(new ByteArrayInputStream(files.get(PROPERTIES)));
    Map<String, String> specProps = new LinkedHashMap<>();
    for (String k : new TreeMap<>(props).keySet().stream().map(Object::toString).toList()) {
      if (k.startsWith("model.")) {
        specProps.put(k.substring("model.".length()), props.getProperty(k));
      }
    }
    Normalization normalization = null;
    String normalize =
        props.getProperty("normalize"); // absent in models saved before normalization
    if (normalize != null) {
      if (!files.containsKey(NORMALIZATION)) {
        throw new IOException(
            "The model at "
                + d
                + " is incomplete: it was trained with "
                + normalize
                + " normalization but its "
                + MARKER
                + " does not list "
                + NORMALIZATION);
      }
      try {
        normalization =
            Normalization.fromCsv(
                Normalization.Mode.parse(normalize),
                files.get(NORMALIZATION),
                new Path(d, NORMALIZATION).toString());
      } catch (IllegalArgumentException e) {
        throw new IOException("Cannot read the model at " + d + ": " + e.getMessage(), e);
      }
    }
    return new TrainedModel(
        ModelSpec.fromProperties(specProps),
        LossSpec.parse(props.getProperty("loss")),
        files.get(PARAMS),
        new History(List.of()),
        normalization);
  }
}
