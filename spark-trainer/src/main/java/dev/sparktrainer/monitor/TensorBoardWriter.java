package dev.sparktrainer.monitor;

import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import dev.sparktrainer.tfrecord.proto.Event;
import dev.sparktrainer.tfrecord.proto.Summary;
import java.io.Closeable;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Writes a TensorBoard event file — TFRecord framing (the project's {@link TFRecordWriter}) of
 * {@code tensorflow.Event} protos (the classes protoc generates from TensorFlow's event.proto and
 * summary.proto, {@link Event}): first the {@code file_version} event, then scalar summaries — to a
 * directory on any Hadoop FileSystem. Point {@code tensorboard --logdir} at the directory (or its
 * parent).
 *
 * <pre>{@code
 * try (TensorBoardWriter tb = TensorBoardWriter.create("hdfs:///jobs/run1/logs/train", conf)) {
 *   tb.scalar("epoch_loss", epoch, loss);
 * }
 * }</pre>
 *
 * <p>The file is named {@code events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2} as TensorFlow
 * names its own, so several writers (a retried attempt, another run) never collide. Not
 * thread-safe.
 */
public final class TensorBoardWriter implements Closeable {
  private static final AtomicInteger COUNTER = new AtomicInteger();

  /** The first record of every event file: TensorBoard checks it. */
  static final String FILE_VERSION = "brain.Event:2";

  private final Path file;
  private final OutputStream stream;
  private final TFRecordWriter writer;

  private TensorBoardWriter(Path file, OutputStream stream) throws IOException {
    this.file = file;
    this.stream = stream;
    this.writer = new TFRecordWriter(stream);
    writer.write(
        Event.newBuilder().setWallTime(now()).setFileVersion(FILE_VERSION).build().toByteArray());
    flush();
  }

  /** A new event file in {@code dir} (created if missing). */
  public static TensorBoardWriter create(String dir, Configuration conf) throws IOException {
    Path d = new Path(dir);
    FileSystem fs = d.getFileSystem(conf);
    // Hadoop's checksummed local FS would add ".events.out.tfevents....crc" files, which
    // TensorBoard
    // would try to read as event files (it picks up every name containing "tfevents").
    if (fs instanceof LocalFileSystem) {
      fs = ((LocalFileSystem) fs).getRawFileSystem();
    }
    fs.mkdirs(d);
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      host = "localhost";
    }
    String name =
        String.format(
            "events.out.tfevents.%010d.%s.%d.%d.v2",
            System.currentTimeMillis() / 1000,
            host,
            ProcessHandle.current().pid(),
            COUNTER.incrementAndGet());
    Path file = new Path(d, name);
    FSDataOutputStream out = fs.create(file, false);
    return new TensorBoardWriter(file, out);
  }

  /** The event file. */
  public Path file() {
    return file;
  }

  /** One scalar at {@code step}. */
  public void scalar(String tag, long step, double value) throws IOException {
    Map<String, Double> m = new LinkedHashMap<>();
    m.put(tag, value);
    scalars(step, m);
  }

  /** Several scalars at {@code step}, in one event (non-finite values are skipped). */
  public void scalars(long step, Map<String, Double> values) throws IOException {
    Summary.Builder summary = Summary.newBuilder();
    for (Map.Entry<String, Double> v : values.entrySet()) {
      if (v.getValue() != null && Double.isFinite(v.getValue())) {
        summary.addValue(
            Summary.Value.newBuilder()
                .setTag(v.getKey())
                .setSimpleValue(v.getValue().floatValue()));
      }
    }
    writer.write(
        Event.newBuilder()
            .setWallTime(now())
            .setStep(step)
            .setSummary(summary)
            .build()
            .toByteArray());
  }

  /** Makes what was written visible to readers (hflush on HDFS). */
  public void flush() throws IOException {
    if (stream instanceof FSDataOutputStream) {
      ((FSDataOutputStream) stream).hflush();
    } else {
      stream.flush();
    }
  }

  @Override
  public void close() throws IOException {
    writer.close();
  }

  private static double now() {
    return System.currentTimeMillis() / 1000.0;
  }
}
