package dev.sparktrainer.tfrecord.spark;

import dev.sparktrainer.tfrecord.codec.TFRecordWriter;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.OutputWriter;
import org.apache.spark.sql.execution.datasources.OutputWriterFactory;
import org.apache.spark.sql.types.StructType;

/** Writes one task's file; the commit protocol decides whether it becomes visible. */
final class TFRecordOutputWriter extends OutputWriter {
  private final String path;
  private final TFRecordWriter writer;
  private final TFRecordRowEncoder encoder;

  TFRecordOutputWriter(
      String path, StructType schema, TaskAttemptContext ctx, TFRecordOptions options)
      throws IOException {
    this.path = path;
    this.encoder = new TFRecordRowEncoder(schema, options.recordType());
    Path p = new Path(path);
    this.writer =
        new TFRecordWriter(
            options
                .writeCompression()
                .compress(
                    new BufferedOutputStream(
                        p.getFileSystem(ctx.getConfiguration()).create(p, false), 1 << 16)));
  }

  @Override
  public void write(InternalRow row) {
    try {
      writer.write(encoder.encode(row));
    } catch (IOException e) {
      throw new UncheckedIOException("Writing TFRecord file " + path, e);
    }
  }

  @Override
  public void close() {
    try {
      writer.close();
    } catch (IOException e) {
      throw new UncheckedIOException("Closing TFRecord file " + path, e);
    }
  }

  @Override
  public String path() {
    return path;
  }

  /** Makes the writers of a write job; shared by the V2 write and the V1 fallback. */
  static final class Factory extends OutputWriterFactory {
    private static final long serialVersionUID = 1L;
    private final TFRecordOptions options;

    Factory(TFRecordOptions options) {
      this.options = options;
    }

    @Override
    public String getFileExtension(TaskAttemptContext context) {
      return options.writeCompression().extension();
    }

    @Override
    public OutputWriter newInstance(
        String path, StructType dataSchema, TaskAttemptContext context) {
      try {
        return new TFRecordOutputWriter(path, dataSchema, context, options);
      } catch (IOException e) {
        throw new UncheckedIOException("Creating TFRecord file " + path, e);
      }
    }
  }
}
