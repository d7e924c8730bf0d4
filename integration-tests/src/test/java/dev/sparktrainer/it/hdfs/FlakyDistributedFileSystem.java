package dev.sparktrainer.it.hdfs;

import java.io.IOException;
import java.net.SocketTimeoutException;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DistributedFileSystem;

/**
 * HDFS whose opens of checkpoints fail while {@link FlakyCheckpointReads} says so, with the
 * exception a DataNode that stops answering gives: a {@link SocketTimeoutException}.
 */
public class FlakyDistributedFileSystem extends DistributedFileSystem {
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
            new SocketTimeoutException(
                "simulated: 60000 millis timeout while waiting for channel to be ready for read of "
                    + p));
    return super.open(f, bufferSize);
  }
}
