package dev.sparktrainer.it.hdfs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link HadoopFsContract} on HDFS: a MiniDFSCluster (one NameNode, one DataNode, in this JVM, on
 * 127.0.0.1, its storage in a temporary directory) with a 1 MiB block size, so the big file of the
 * split tests spans several blocks and split reads cross block boundaries.
 */
class HdfsIT extends HadoopFsContract {
  private static final long BLOCK_SIZE = 1L << 20;

  @TempDir static Path tmp;
  private static MiniDFSCluster cluster;
  private static SparkSession spark;
  private static String root;

  @BeforeAll
  static void startHdfs() throws IOException {
    Configuration conf = new Configuration();
    conf.setLong("dfs.blocksize", BLOCK_SIZE);
    conf.setInt("dfs.replication", 1);
    cluster = new MiniDFSCluster.Builder(conf, tmp.resolve("dfs").toFile()).numDataNodes(1).build();
    cluster.waitActive();
    InetSocketAddress nn = cluster.getNameNode().getNameNodeAddress();
    assertThat(nn.getAddress().isLoopbackAddress())
        .as("NameNode bound to loopback: %s", nn)
        .isTrue();
    root = "hdfs://127.0.0.1:" + nn.getPort() + "/it";
    spark =
        sessionBuilder("HdfsIT")
            // what a client of this cluster needs: the block size and replication it writes with
            .config("spark.hadoop.dfs.blocksize", String.valueOf(BLOCK_SIZE))
            .config("spark.hadoop.dfs.replication", "1")
            .getOrCreate();
  }

  @AfterAll
  static void stopHdfs() throws IOException {
    try {
      if (spark != null) {
        spark.stop();
        SparkSession.clearActiveSession();
        SparkSession.clearDefaultSession();
      }
    } finally {
      if (cluster != null) {
        FileSystem.get(cluster.getURI(), new Configuration()).close();
        cluster.shutdown(true);
      }
    }
  }

  @Override
  protected SparkSession spark() {
    return spark;
  }

  @Override
  protected Class<? extends FileSystem> flakyFileSystem() {
    return FlakyDistributedFileSystem.class;
  }

  @Override
  protected String root() {
    return root;
  }

  @Override
  protected void checkSpansSeveralBlocks(org.apache.hadoop.fs.Path file) throws IOException {
    FileStatus st = fs().getFileStatus(file);
    assertThat(st.getBlockSize()).isEqualTo(BLOCK_SIZE);
    BlockLocation[] blocks = fs().getFileBlockLocations(st, 0, st.getLen());
    assertThat(blocks.length)
        .as("HDFS blocks of %s (%d bytes)", file, st.getLen())
        .isGreaterThan(1);
  }
}
