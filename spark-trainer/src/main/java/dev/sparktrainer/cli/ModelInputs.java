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
 * normalization of image features ({@code train --augment normalize:...}, or null), and for
 * encoded-image columns ({@code COL:HxWxC:image} in {@code features}) the resize that evaluation
 * and prediction apply before the centre crop ({@code shorter:N}) — so {@code evaluate} and {@code
 * predict} need only {@code --model} and {@code --data}, and feed the model what it was trained on.
 * A model trained on a folder of images also keeps its class names ({@link #CLASSES}, one per line,
 * label {@code i} on line {@code i + 1}).
 */
record ModelInputs(
    String features,
    String label,
    String format,
    int numClasses,
    String normalize,
    String sequences,
    double padValue,
    String resize) {
  static final String FILE = "inputs.properties";

  /** The class names of a model trained on {@code --format images}, saved beside it. */
  static final String CLASSES = "classes.txt";

  ModelInputs(String features, String label, String format, int numClasses, String normalize) {
    this(features, label, format, numClasses, normalize, null, 0, null);
  }

  /** The encoded-image columns the model reads, with their {@code [H, W, C]}; empty if none. */
  java.util.Map<String, long[]> imageColumns() {
    java.util.Map<String, long[]> out = new java.util.LinkedHashMap<>();
    List<String> names = featureNames();
    long[][] shapes = shapes();
    String[] parts = features.split(",");
    for (int i = 0; i < parts.length; i++) {
      if (parts[i].endsWith(":" + DataChecks.FeatureArg.IMAGE)) {
        out.put(names.get(i), shapes[i]);
      }
    }
    return out;
  }

  /** The class names kept with the model in {@link #CLASSES}, or null if it keeps none. */
  static List<String> classes(String modelDir, Configuration conf) throws IOException {
    Path f = new Path(modelDir, CLASSES);
    FileSystem fs = f.getFileSystem(conf);
    if (!fs.exists(f)) {
      return null;
    }
    try (InputStream in = fs.open(f)) {
      String text = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      return text.isEmpty() ? List.of() : List.of(text.split("\n"));
    }
  }

  /** {@link #CLASSES}' content for {@code names}. */
  static byte[] classesFile(List<String> names) {
    return (String.join("\n", names) + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8);
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
    if (resize != null) {
      p.setProperty("resize", resize);
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
        Double.parseDouble(p.getProperty("padValue", "0")),
        p.getProperty("resize"));
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
    // Decoded photos are [H, W, C]; numeric image columns are the command line's CxHxW.
    return ImageAugment.parse(
        normalize, imageColumns().isEmpty() ? ImageAugment.Layout.CHW : ImageAugment.Layout.HWC);
  }

  /** The recorded feature columns' per-example shapes. */
  long[][] shapes() {
    String[] parts = features.split(",");
    long[][] out = new long[parts.length][];
    for (int i = 0; i < parts.length; i++) {
      int colon = parts[i].indexOf(':');
      String shape = colon < 0 ? "" : parts[i].substring(colon + 1);
      for (String kind : List.of(":int64", "int64", "ids", "seq", ":image")) { // not a shape
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
