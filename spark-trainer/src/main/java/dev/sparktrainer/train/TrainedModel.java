package dev.sparktrainer.train;

import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.nn.Block;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * The result of training: the model spec, its trained parameters (DJL's format) and the history.
 *
 * <p>{@link #save} writes a directory from which {@link #load} rebuilds the model without user code
 * (built-in specs): {@code model.properties} (the spec and the loss), {@code model.params} ({@code
 * Block.saveParameters}) and {@code history.json}.
 */
public final class TrainedModel implements Serializable {
  private static final long serialVersionUID = 1L;

  private final ModelSpec spec;
  private final LossSpec loss;
  private final byte[] parameters;
  private final History history;

  TrainedModel(ModelSpec spec, LossSpec loss, byte[] parameters, History history) {
    this.spec = spec;
    this.loss = loss;
    this.parameters = parameters;
    this.history = history;
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
    Block block = spec.newBlock();
    block.initialize(manager, DataType.FLOAT32, spec.batchInputShapes(1));
    try {
      block.loadParameters(manager, new DataInputStream(new ByteArrayInputStream(parameters)));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (MalformedModelException e) {
      throw new IllegalStateException("Cannot load the trained parameters into " + spec, e);
    }
    return block;
  }

  /** Writes {@code model.properties}, {@code model.params} and {@code history.json} into {@code dir}. */
  public void save(String dir, Configuration conf) throws IOException {
    Path d = new Path(dir);
    FileSystem fs = d.getFileSystem(conf);
    fs.mkdirs(d);
    Properties props = new Properties();
    for (Map.Entry<String, String> e : spec.toProperties().entrySet()) {
      props.setProperty("model." + e.getKey(), e.getValue());
    }
    props.setProperty("loss", loss.name());
    try (FSDataOutputStream out = fs.create(new Path(d, "model.properties"), true)) {
      props.store(out, "spark-trainer model");
    }
    try (FSDataOutputStream out = fs.create(new Path(d, "model.params"), true)) {
      out.write(parameters);
    }
    try (OutputStream out = fs.create(new Path(d, "history.json"), true)) {
      out.write((history.toJson() + "\n").getBytes(StandardCharsets.UTF_8));
    }
  }

  /** Reads what {@link #save} wrote (the history is not read back: it is for people and tools). */
  public static TrainedModel load(String dir, Configuration conf) throws IOException {
    Path d = new Path(dir);
    FileSystem fs = d.getFileSystem(conf);
    Properties props = new Properties();
    try (InputStream in = fs.open(new Path(d, "model.properties"))) {
      props.load(in);
    }
    Map<String, String> specProps = new LinkedHashMap<>();
    for (String k : new TreeMap<>(props).keySet().stream().map(Object::toString).toList()) {
      if (k.startsWith("model.")) {
        specProps.put(k.substring("model.".length()), props.getProperty(k));
      }
    }
    byte[] params;
    try (InputStream in = fs.open(new Path(d, "model.params"))) {
      params = in.readAllBytes();
    }
    return new TrainedModel(
        ModelSpec.fromProperties(specProps), LossSpec.parse(props.getProperty("loss")), params,
        new History(java.util.List.of()));
  }
}
