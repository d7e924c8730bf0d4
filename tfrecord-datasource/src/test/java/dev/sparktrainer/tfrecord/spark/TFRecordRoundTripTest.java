package dev.sparktrainer.tfrecord.spark;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TFRecordRoundTripTest {
  private final SparkSession spark = SparkTestSession.get();

  @TempDir Path dir;

  private Dataset<Row> sample() {
    StructType schema =
        new StructType()
            .add("id", DataTypes.LongType)
            .add("label", DataTypes.IntegerType)
            .add("score", DataTypes.DoubleType)
            .add("name", DataTypes.StringType)
            .add("flag", DataTypes.BooleanType)
            .add("pixels", DataTypes.createArrayType(DataTypes.FloatType))
            .add("tags", DataTypes.createArrayType(DataTypes.StringType))
            .add("blob", DataTypes.BinaryType);
    List<Row> rows =
        Arrays.asList(
            RowFactory.create(
                1L,
                3,
                0.5,
                "one",
                true,
                new float[] {1f, 2f},
                new String[] {"a"},
                new byte[] {1, 2}),
            RowFactory.create(
                2L, 4, 1.5, null, false, new float[] {}, new String[] {"b", "c"}, new byte[] {}),
            RowFactory.create(3L, 5, 2.5, "three", null, new float[] {3f, 4f, 5f}, null, null));
    return spark.createDataFrame(
        rows.stream()
            .map(
                r -> {
                  Object[] v = new Object[r.size()];
                  for (int i = 0; i < r.size(); i++) {
                    Object o = r.get(i);
                    if (o instanceof float[]) {
                      float[] f = (float[]) o;
                      Float[] boxed = new Float[f.length];
                      for (int j = 0; j < f.length; j++) boxed[j] = f[j];
                      o = Arrays.asList(boxed);
                    } else if (o instanceof String[]) {
                      o = Arrays.asList((String[]) o);
                    }
                    v[i] = o;
                  }
                  return RowFactory.create(v);
                })
            .collect(Collectors.toList()),
        schema);
  }

  @Test
  void writesAndReadsBackWithInferredSchema() {
    String out = dir.resolve("t").toString();
    sample().repartition(2).write().format("tfrecord").save(out);
    Dataset<Row> back = spark.read().format("tfrecord").load(out);
    assertThat(back.schema().simpleString())
        .isEqualTo(
            "struct<blob:string,flag:bigint,id:bigint,label:bigint,name:string,pixels:array<float>,score:float,tags:array<string>>");
    List<Row> rows = back.orderBy("id").collectAsList();
    assertThat(rows).hasSize(3);
    assertThat(rows.get(0).getLong(rows.get(0).fieldIndex("label"))).isEqualTo(3L);
    assertThat(rows.get(2).getList(rows.get(2).fieldIndex("pixels"))).containsExactly(3f, 4f, 5f);
    assertThat(rows.get(1).getList(rows.get(1).fieldIndex("pixels"))).isEmpty();
    assertThat(rows.get(1).isNullAt(rows.get(1).fieldIndex("name"))).isTrue();
    assertThat(rows.get(2).isNullAt(rows.get(2).fieldIndex("tags"))).isTrue();
  }

  @Test
  void honoursUserSchemaWithCasts() {
    String out = dir.resolve("u").toString();
    sample().write().format("tfrecord").save(out);
    StructType schema =
        new StructType()
            .add("id", DataTypes.IntegerType)
            .add("score", DataTypes.DoubleType)
            .add("pixels", DataTypes.createArrayType(DataTypes.DoubleType))
            .add("blob", DataTypes.BinaryType)
            .add("missing", DataTypes.LongType);
    List<Row> rows =
        spark.read().format("tfrecord").schema(schema).load(out).orderBy("id").collectAsList();
    assertThat(rows.get(0).getInt(0)).isEqualTo(1);
    assertThat(rows.get(2).getDouble(1)).isEqualTo(2.5);
    assertThat(rows.get(2).getList(2)).containsExactly(3.0, 4.0, 5.0);
    assertThat((byte[]) rows.get(0).get(3)).containsExactly(1, 2);
    assertThat(rows.get(0).isNullAt(4)).isTrue();
  }

  @Test
  void unsupportedWriteTypeFailsBeforeAnyFile() {
    String out = dir.resolve("bad").toString();
    Dataset<Row> df = spark.sql("select map('a', 1) as m");
    assertThatThrownBy(() -> df.write().format("tfrecord").save(out))
        .hasStackTraceContaining("column `m` of the type \"MAP<STRING, INT>\"");
    assertThat(Files.exists(dir.resolve("bad"))).isFalse();
  }

  @Test
  void nestedArraysNeedSequenceExample() {
    String out = dir.resolve("nested").toString();
    Dataset<Row> df = spark.sql("select array(array(1L, 2L)) as frames");
    assertThatThrownBy(() -> df.write().format("tfrecord").save(out))
        .hasStackTraceContaining(
            "Column 'frames' of type array<array<bigint>> cannot be written as a TFRecord Example"
                + " feature (arrays of arrays need recordType SequenceExample)");
    assertThat(Files.exists(dir.resolve("nested").resolve("_SUCCESS"))).isFalse();
  }
}
