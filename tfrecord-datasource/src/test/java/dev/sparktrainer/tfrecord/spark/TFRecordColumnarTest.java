package dev.sparktrainer.tfrecord.spark;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.jdk.javaapi.CollectionConverters;

/** The columnar and the row readers return the same rows. */
class TFRecordColumnarTest {
  private final SparkSession spark = SparkTestSession.get();

  @TempDir Path dir;

  private static boolean scansColumnar(Dataset<Row> df) {
    SparkPlan plan = df.queryExecution().executedPlan();
    return CollectionConverters.asJava(plan.collectLeaves()).stream()
        .anyMatch(SparkPlan::supportsColumnar);
  }

  private static List<String> rows(Dataset<Row> df) {
    return df.collectAsList().stream().map(Row::toString).sorted().collect(Collectors.toList());
  }

  @Test
  void columnarAndRowReadersAgree() {
    String out = dir.resolve("t").toString();
    spark
        .range(0, 2000, 1, 3)
        .selectExpr(
            "id",
            "cast(id % 7 as int) as small",
            "if(id % 5 = 0, null, concat('s', id)) as name",
            "if(id % 11 = 0, null, transform(sequence(0, cast(id % 4 as int)), x -> cast(x * id as float))) as floats",
            "transform(sequence(0, cast(id % 3 as int)), x -> x + id) as longs",
            "array(cast(id as string), 'x') as tags",
            "id % 2 = 0 as even",
            "cast(id % 3 as string) as part")
        .write()
        .format("tfrecord")
        .partitionBy("part")
        .save(out);
    StructType schema =
        new StructType()
            .add("id", DataTypes.LongType)
            .add("small", DataTypes.ShortType)
            .add("name", DataTypes.StringType)
            .add("floats", DataTypes.createArrayType(DataTypes.DoubleType))
            .add("longs", DataTypes.createArrayType(DataTypes.LongType))
            .add("tags", DataTypes.createArrayType(DataTypes.BinaryType))
            .add("even", DataTypes.BooleanType)
            .add("part", DataTypes.IntegerType);
    for (boolean userSchema : new boolean[] {false, true}) {
      Dataset<Row> col = read(out, "true", userSchema ? schema : null);
      Dataset<Row> row = read(out, "false", userSchema ? schema : null);
      assertThat(scansColumnar(col)).isTrue();
      assertThat(scansColumnar(row)).isFalse();
      List<String> a =
          rows(
              col.selectExpr(
                  "id",
                  "small",
                  "name",
                  "floats",
                  "longs",
                  "cast(tags as array<string>)",
                  "even",
                  "part"));
      List<String> b =
          rows(
              row.selectExpr(
                  "id",
                  "small",
                  "name",
                  "floats",
                  "longs",
                  "cast(tags as array<string>)",
                  "even",
                  "part"));
      assertThat(a).hasSize(2000).isEqualTo(b);
    }
    // Small batches: many batches per split.
    Dataset<Row> tiny = spark.read().format("tfrecord").option("batchSize", "7").load(out);
    assertThat(tiny.selectExpr("sum(id)").first().getLong(0)).isEqualTo(1999L * 2000 / 2);
  }

  private Dataset<Row> read(String path, String columnar, StructType schema) {
    var r = spark.read().format("tfrecord").option("columnar", columnar);
    return (schema == null ? r : r.schema(schema)).load(path);
  }
}
