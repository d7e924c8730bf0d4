package dev.sparktrainer.it.s3;

import dev.sparktrainer.it.hdfs.FlakyCheckpointReads;
import java.io.IOException;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;

/**
 * s3a whose opens of checkpoints fail while {@link FlakyCheckpointReads} says so, as an object
 * store that is overloaded answers: 503 (S3A's own retries already given up).
 */
public class FlakyS3AFileSystem extends S3AFileSystem {
  @Override
  public void initialize(URI uri, Configuration conf) throws IOException {
    super.initialize(uri, conf);
    FlakyCheckpointReads.created(this);
  }

  @Override
  public FSDataInputStream open(Path f, int bufferSize) throws IOException {
    FlakyCheckpointReads.beforeOpen(
        f,
        p ->
            new IOException(
                "simulated: open "
                    + p
                    + ": 503 Service Unavailable (Slow Down), S3A retries exhausted"));
    return super.open(f, bufferSize);
  }
}
