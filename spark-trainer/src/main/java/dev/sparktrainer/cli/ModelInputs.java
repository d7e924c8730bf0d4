package dev.sparktrainer.cli;

import dev.sparktrainer.data.ImageAugment;
import dev.sparktrainer.model.SpecStrings;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * {@code inputs.properties} next to a model written by {@code train}: the feature columns with
 * their shapes, the label column, the data format, the number of classes and the per-channel
 * normalization of image features ({@code train --augment normalize:...}, or null) — so {@code
 * evaluate} and {@code predict} need only {@code --model} and {@code --data}, and feed the model
 * what it was trained on.
 */
record ModelInputs(
    String features,
    String label,
    String format,
    int numClasses,
    String normalize,
    String sequences,
    double padValue) {
  static final String FILE = "inputs.properties";

  ModelInputs(String features, String label, String format, int numClasses, String normalize) {
    this(features, label, format, numClasses, normalize, null, 0);
  }

  /**
   * The int64 and sequence columns the model was trained on: column -> {maxLength (0 for a fixed
   * int64 shape), vocabSize (0: unchecked)}, from {@code sequences} ({@code COL:MAXLEN:VOCAB,...}).
   */
  java.util.Map<String, long[]> sequenceColumns() {
    java.util.Map<String, long[]> out = new java.util.LinkedHashMap<>();
    if (sequences != null && !sequences.isBlank()) {
      for (String part : sequences.split(",")) {
        String[] f = part.split(":");
        out.put(f[0], new long[] {Long.parseLong(f[1]), Long.parseLong(f[2])});
      }
    }
    return out;
  }

  /** The file's content, saved with the model ({@code TrainedModel.save}'s extra files). */
  byte[] toBytes() throws IOException {
    Properties p = new Properties();
    p.setProperty("features", features);
    if (label != null) {
      p.setProperty("label", label);
    }
    p.setProperty("format", format);
    p.setProperty("numClasses", Integer.toString(numClasses));
    if (normalize != null) {
      p.setProperty("normalize", normalize);
    }
    if (sequences != null) {
      p.setProperty("sequences", sequences);
      p.setProperty("padValue", Double.toString(padValue));
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    p.store(out, "spark-trainer: the columns the model was trained on");
    return out.toByteArray();
  }

  /**
   * What {@link #save} wrote, or null if the directory has no such file (a model saved by the API).
   */
  static ModelInputs load(String modelDir, Configuration conf) throws IOException {
    Path f = new Path(modelDir, FILE);
    FileSystem fs = f.getFileSystem(conf);
    if (!fs.exists(f)) {
      return null;
    }
    Properties p = new Properties();
    try (InputStream in = fs.open(f)) {
      p.load(in);
    }
    return new ModelInputs(
        p.getProperty("features"),
        p.getProperty("label"),
        p.getProperty("format", "tfrecord"),
        Integer.parseInt(p.getProperty("numClasses", "0")),
        p.getProperty("normalize"),
        p.getProperty("sequences"),
        Double.parseDouble(p.getProperty("padValue", "0")));
  }

  /**
   * The normalization evaluate and predict apply to the feature columns, or null; {@code columns}
   * are the feature columns used (the recorded ones unless --features named others).
   */
  ImageAugment inputMap(List<String> columns) {
    if (normalize == null) {
      return null;
    }
    if (!columns.equals(featureNames())) {
      throw new CliException(
          "The model was trained on "
              + featureNames()
              + " normalized per channel ("
              + normalize
              + "): evaluate and predict need those feature columns, not "
              + columns);
    }
    return ImageAugment.parse(normalize, ImageAugment.Layout.CHW);
  }

  /** The recorded feature columns' per-example shapes. */
  long[][] shapes() {
    String[] parts = features.split(",");
    long[][] out = new long[parts.length][];
    for (int i = 0; i < parts.length; i++) {
      int colon = parts[i].indexOf(':');
      String shape = colon < 0 ? "" : parts[i].substring(colon + 1);
      for (String kind : List.of(":int64", "int64", "ids", "seq")) { // the kind is not a shape
        if (shape.endsWith(kind)) {
          shape = shape.substring(0, shape.length() - kind.length());
        }
      }
      out[i] = shape.isEmpty() ? new long[] {-1} : SpecStrings.shape(shape);
    }
    return out;
  }

  /** The feature column names (without shapes). */
  List<String> featureNames() {
    List<String> out = new ArrayList<>();
    for (String f : features.split(",")) {
      int colon = f.indexOf(':');
      out.add(colon < 0 ? f : f.substring(0, colon));
    }
    return out;
  }
}
