package dev.sparktrainer.it.s3;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.sparktrainer.it.hdfs.HadoopFsContract;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.util.VersionInfo;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * {@link HadoopFsContract} on {@code s3a://}: hadoop-aws (AWS SDK v2) against s3proxy, a real S3
 * API server started by this test as a separate JVM on 127.0.0.1 (see {@link S3ProxyServer}), with
 * path-style access, signed requests with fixed test credentials and plain HTTP. The settings in
 * {@link #S3A} are the ones the README documents for S3-compatible stores.
 */
class S3IT extends HadoopFsContract {
  static final String BUCKET = "spark-trainer-it";
  private static final String ACCESS_KEY = "it-access-key";
  private static final String SECRET_KEY = "it-secret-key";

  @TempDir static Path tmp;
  private static S3ProxyServer server;
  private static SparkSession spark;
  private static S3Client s3;

  /** The s3a settings of this test (the Hadoop keys, without {@code spark.hadoop.}). */
  static Map<String, String> s3aSettings(String endpoint) {
    return Map.of(
        "fs.s3a.endpoint", endpoint,
        "fs.s3a.endpoint.region", "us-east-1",
        "fs.s3a.path.style.access", "true",
        "fs.s3a.connection.ssl.enabled", "false",
        "fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.access.key", ACCESS_KEY,
        "fs.s3a.secret.key", SECRET_KEY,
        // a dead endpoint fails the test in seconds instead of retrying for minutes
        "fs.s3a.retry.limit", "3",
        "fs.s3a.attempts.maximum", "3");
  }

  @BeforeAll
  static void startS3() throws Exception {
    // hadoop-aws 3.4 speaks AWS SDK v2; the spark-3.5 profile's Hadoop 3.3 would need SDK v1.
    assumeTrue(
        !VersionInfo.getVersion().startsWith("3.3"), "s3a with AWS SDK v2 needs Hadoop 3.4+");
    server = S3ProxyServer.start(tmp.resolve("proxy"), ACCESS_KEY, SECRET_KEY);
    s3 =
        S3Client.builder()
            .endpointOverride(URI.create(server.endpoint()))
            .forcePathStyle(true)
            .region(Region.US_EAST_1)
            .credentialsProvider(
                StaticCredentialsProvider.create(
                    AwsBasicCredentials.create(ACCESS_KEY, SECRET_KEY)))
            .build();
    s3.createBucket(b -> b.bucket(BUCKET));
    SparkSession.Builder b = sessionBuilder("S3IT");
    s3aSettings(server.endpoint()).forEach((k, v) -> b.config("spark.hadoop." + k, v));
    spark = b.getOrCreate();
  }

  @AfterAll
  static void stopS3() throws Exception {
    try {
      if (spark != null) {
        FileSystem.get(
                URI.create("s3a://" + BUCKET + "/"), spark.sparkContext().hadoopConfiguration())
            .close();
        spark.stop();
        SparkSession.clearActiveSession();
        SparkSession.clearDefaultSession();
      }
      if (s3 != null) {
        s3.close();
      }
    } finally {
      if (server != null) {
        server.close();
      }
    }
  }

  @Override
  protected SparkSession spark() {
    return spark;
  }

  @Override
  protected Class<? extends FileSystem> flakyFileSystem() {
    return FlakyS3AFileSystem.class;
  }

  @Override
  protected String root() {
    return "s3a://" + BUCKET + "/it";
  }

  /** What the store itself holds after a data source write: objects, no temporary ones left. */
  @Test
  void theStoreHoldsTheCommittedObjectsOnly() throws IOException {
    String dir = root() + "/committed";
    spark
        .range(0, 1000, 1, 3)
        .selectExpr("id", "cast(id as string) as name")
        .write()
        .format("tfrecord")
        .option("compression", "gzip")
        .save(dir);
    List<String> keys =
        s3.listObjectsV2Paginator(r -> r.bucket(BUCKET).prefix("it/committed/")).contents().stream()
            .map(S3Object::key)
            .collect(Collectors.toList());
    assertThat(keys)
        .as("objects under it/committed/")
        .contains("it/committed/_SUCCESS")
        .noneMatch(k -> k.contains("_temporary"));
    assertThat(keys.stream().filter(k -> k.endsWith(".tfrecord.gz"))).hasSize(3);
    assertThat(spark.read().format("tfrecord").load(dir).count()).isEqualTo(1000);
  }
}
