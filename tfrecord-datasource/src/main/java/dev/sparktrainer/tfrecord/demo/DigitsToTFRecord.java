package dev.sparktrainer.tfrecord.demo;

import static org.apache.spark.sql.functions.array;
import static org.apache.spark.sql.functions.col;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;

/**
 * Converts the bundled digits data (CSV: 64 pixels, then the class) to sharded TFRecord files —
 * {@code pixels: array<float>}, {@code label: bigint} — and reads them back with the {@code
 * tfrecord} source, checking that every record survived.
 *
 * <p>Usage: {@code DigitsToTFRecord [OUTPUT_DIR] [SHARDS]} (default {@code
 * target/quickstart/digits-tfrecord}, 4 shards), on local Spark unless {@code spark.master} is set.
 */
public final class DigitsToTFRecord {
  private DigitsToTFRecord() {}

  public static void main(String[] args) throws IOException {
    Path out = Paths.get(args.length > 0 ? args[0] : "target/quickstart/digits-tfrecord").toAbsolutePath();
    int shards = args.length > 1 ? Integer.parseInt(args[1]) : 4;
    SparkSession spark =
        SparkSession.builder()
            .appName("digits-to-tfrecord")
            .master(System.getProperty("spark.master", "local[2]"))
            .config("spark.ui.enabled", "false")
            .getOrCreate();
    try {
      Path csv = Files.createTempFile("digits", ".csv.gz");
      try (InputStream in = DigitsToTFRecord.class.getResourceAsStream("/sample-data/digits.csv.gz")) {
        Files.copy(in, csv, StandardCopyOption.REPLACE_EXISTING);
      }
      Dataset<Row> raw = spark.read().option("inferSchema", "true").csv(csv.toUri().toString());
      List<Column> pixels = new ArrayList<>();
      for (int i = 0; i < 64; i++) {
        pixels.add(col("_c" + i).cast(DataTypes.FloatType));
      }
      Dataset<Row> digits =
          raw.select(array(pixels.toArray(new Column[0])).as("pixels"), col("_c64").cast("long").as("label"));
      long written = digits.count();
      digits.repartition(shards).write().mode(SaveMode.Overwrite).format("tfrecord").save(out.toString());
      Files.deleteIfExists(csv);

      Dataset<Row> back = spark.read().format("tfrecord").load(out.toString());
      long read = back.count();
      System.out.println("Wrote " + written + " digits as " + shards + " TFRecord shards to " + out);
      System.out.println("Read back with spark.read.format(\"tfrecord\"): " + read + " records, schema "
          + back.schema().simpleString());
      back.groupBy("label").count().orderBy("label").show(10, false);
      if (read != written) {
        System.err.println("MISMATCH: wrote " + written + " records but read " + read);
        System.exit(1);
      }
    } finally {
      spark.stop();
    }
  }
}
