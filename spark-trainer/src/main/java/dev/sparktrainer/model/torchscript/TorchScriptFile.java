package dev.sparktrainer.model.torchscript;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A TorchScript file as bytes, checked on the JVM before any native code reads it: a zip archive
 * with the module's pickled data and its compiled code (what {@code torch.jit.save} writes), its
 * file format version readable by the executors' libtorch, and the description that {@code
 * python/export_torchscript.py} adds ({@link Metadata}; absent in a file saved without it).
 *
 * <p>The bytes travel with the model spec: the driver reads the file once (local, HDFS, S3) and the
 * executors load the module from the task's copy, so a path on the driver's disk works on a
 * cluster.
 */
public final class TorchScriptFile implements Serializable {
  private static final long serialVersionUID = 1L;

  /**
   * The newest TorchScript file format version libtorch 2.x reads ({@code
   * kMaxSupportedFileFormatVersion} in {@code caffe2/serialize/versions.h}, 0xA since PyTorch 2.0).
   */
  public static final long MAX_FORMAT_VERSION = 10;

  /** The extra file the export helper writes ({@code _extra_files}). */
  public static final String METADATA = "sparktrainer.json";

  private final String source;
  private final byte[] bytes;
  private final long formatVersion;
  private final int storages;
  private final Metadata metadata;

  private TorchScriptFile(
      String source, byte[] bytes, long formatVersion, int storages, Metadata metadata) {
    this.source = source;
    this.bytes = bytes;
    this.formatVersion = formatVersion;
    this.storages = storages;
    this.metadata = metadata;
  }

  /**
   * Reads and checks {@code path} (any Hadoop file system: a local path, {@code hdfs://}, {@code
   * s3a://}).
   *
   * @throws IllegalArgumentException naming the file and what is wrong with it
   */
  public static TorchScriptFile read(String path, Configuration conf) {
    Path p = new Path(path);
    byte[] bytes;
    try {
      FileSystem fs = p.getFileSystem(conf);
      long len = fs.getFileStatus(p).getLen();
      if (len > Integer.MAX_VALUE - 16) {
        throw new IllegalArgumentException(
            "Invalid model torchscript:"
                + path
                + ": "
                + len
                + " bytes, at most 2 GiB is supported");
      }
      bytes = new byte[(int) len];
      try (InputStream in = fs.open(p)) {
        int at = 0;
        while (at < bytes.length) {
          int n = in.read(bytes, at, bytes.length - at);
          if (n < 0) {
            throw new IOException("the file ended at byte " + at + " of " + bytes.length);
          }
          at += n;
        }
      }
    } catch (FileNotFoundException e) {
      throw new IllegalArgumentException("Invalid model torchscript:" + path + ": no such file", e);
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "Invalid model torchscript:" + path + ": cannot read it: " + e.getMessage(), e);
    }
    return parse(path, bytes);
  }

  /**
   * Checks {@code bytes}, the content of {@code source} (named in errors).
   *
   * @throws IllegalArgumentException naming the file and what is wrong with it
   */
  public static TorchScriptFile parse(String source, byte[] bytes) {
    String prefix = null;
    boolean data = false;
    boolean code = false;
    String version = null;
    String meta = null;
    int storages = 0;
    ZipDirectory zip;
    try {
      zip = new ZipDirectory(bytes);
    } catch (IllegalStateException | IndexOutOfBoundsException e) {
      throw notTorchScript(source, "it is not a zip archive (" + e.getMessage() + ")", e);
    }
    try {
      for (ZipDirectory.Entry e : zip.entries.values()) {
        String name = e.name();
        int slash = name.indexOf('/');
        if (slash < 0) {
          continue;
        }
        if (prefix == null) {
          prefix = name.substring(0, slash);
        }
        String rest = name.substring(slash + 1);
        if (rest.equals("data.pkl")) {
          data = true;
        } else if (rest.startsWith("code/")) {
          code = true;
        } else if (rest.startsWith("data/")) {
          storages++;
        } else if (rest.equals("version") || rest.equals(".data/version")) {
          version = new String(zip.read(e), StandardCharsets.US_ASCII).trim();
        } else if (rest.equals("extra/" + METADATA)) {
          meta = new String(zip.read(e), StandardCharsets.UTF_8);
        }
      }
    } catch (IllegalStateException | IndexOutOfBoundsException e) {
      throw notTorchScript(source, "its zip archive is damaged (" + e.getMessage() + ")", e);
    }
    if (prefix == null) {
      throw notTorchScript(source, "it is not a zip archive (no entries)", null);
    }
    if (!data) {
      throw notTorchScript(source, "the archive has no data.pkl", null);
    }
    if (!code) {
      throw notTorchScript(
          source,
          "the archive has pickled data but no compiled code: it was written by torch.save (a"
              + " state_dict or a pickled nn.Module), not by torch.jit.save",
          null);
    }
    long formatVersion;
    try {
      formatVersion = Long.parseLong(version == null ? "" : version);
    } catch (NumberFormatException e) {
      throw notTorchScript(source, "its version record is missing or unreadable: " + version, e);
    }
    if (formatVersion > MAX_FORMAT_VERSION) {
      throw new IllegalArgumentException(
          "Invalid model torchscript:"
              + source
              + ": TorchScript file format version "
              + formatVersion
              + " was written by a newer PyTorch than the executors' libtorch, which reads versions"
              + " up to "
              + MAX_FORMAT_VERSION
              + ": export the model with the PyTorch version of the executors' libtorch (or older)");
    }
    Metadata metadata = meta == null ? null : Metadata.parse(source, meta);
    return new TorchScriptFile(source, bytes.clone(), formatVersion, storages, metadata);
  }

  private static IllegalArgumentException notTorchScript(
      String source, String why, Exception cause) {
    return new IllegalArgumentException(
        "Invalid model torchscript:"
            + source
            + ": not a TorchScript file: "
            + why
            + ". Write it with torch.jit.save of a scripted or traced module, e.g. with"
            + " python/export_torchscript.py",
        cause);
  }

  /** Where it was read from (for messages and the model's description). */
  public String source() {
    return source;
  }

  /** The file's content. */
  public byte[] bytes() {
    return bytes.clone();
  }

  byte[] bytesView() {
    return bytes;
  }

  /** The archive's file format version. */
  public long formatVersion() {
    return formatVersion;
  }

  /** Tensor storages in the archive (parameters, buffers and other tensor attributes). */
  public int storages() {
    return storages;
  }

  /** The export helper's description; null for a file saved without it. */
  public Metadata metadata() {
    return metadata;
  }

  /** One forward argument as the export helper recorded it. */
  public record Input(String name, long[] shape, String dtype) implements Serializable {}

  /**
   * What {@code python/export_torchscript.py} records: the PyTorch version that wrote the file, how
   * the module was compiled, its forward arguments (per-example shapes and data types), the
   * per-example output shape, and the names of its buffers (in the order of its {@code
   * sparktrainer_buffers()} method) and parameters.
   */
  public record Metadata(
      String torch,
      String method,
      List<Input> inputs,
      long[] outputShape,
      List<String> buffers,
      List<String> parameters)
      implements Serializable {

    static Metadata parse(String source, String json) {
      try {
        JsonNode root = new ObjectMapper().readTree(json);
        List<Input> inputs = new ArrayList<>();
        for (JsonNode in : root.path("inputs")) {
          inputs.add(
              new Input(
                  in.path("name").asText("x"),
                  longs(in.path("shape")),
                  in.path("dtype").asText("float32")));
        }
        return new Metadata(
            root.path("torch").asText(""),
            root.path("method").asText(""),
            List.copyOf(inputs),
            longs(root.path("output").path("shape")),
            strings(root.path("buffers")),
            strings(root.path("parameters")));
      } catch (IOException | RuntimeException e) {
        throw new IllegalArgumentException(
            "Invalid model torchscript:"
                + source
                + ": its "
                + METADATA
                + " cannot be read: "
                + e.getMessage(),
            e);
      }
    }

    private static long[] longs(JsonNode a) {
      long[] out = new long[a.size()];
      for (int i = 0; i < out.length; i++) {
        out[i] = a.get(i).asLong();
      }
      return out;
    }

    private static List<String> strings(JsonNode a) {
      List<String> out = new ArrayList<>();
      for (JsonNode n : a) {
        out.add(n.asText());
      }
      return List.copyOf(out);
    }
  }
}
