package dev.sparktrainer.cli;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * {@code inputs.properties} next to a model written by {@code train}: the feature columns with their
 * shapes, the label column, the data format and the number of classes — so {@code evaluate} and
 * {@code predict} need only {@code --model} and {@code --data}.
 */
record ModelInputs(String features, String label, String format, int numClasses) {
  static final String FILE = "inputs.properties";

  /** The file's content, saved with the model ({@code TrainedModel.save}'s extra files). */
  byte[] toBytes() throws IOException {
    Properties p = new Properties();
    p.setProperty("features", features);
    if (label != null) {
      p.setProperty("label", label);
    }
    p.setProperty("format", format);
    p.setProperty("numClasses", Integer.toString(numClasses));
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    p.store(out, "spark-trainer: the columns the model was trained on");
    return out.toByteArray();
  }

  /** What {@link #save} wrote, or null if the directory has no such file (a model saved by the API). */
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
    return new ModelInputs(p.getProperty("features"), p.getProperty("label"), p.getProperty("format", "tfrecord"),
        Integer.parseInt(p.getProperty("numClasses", "0")));
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
