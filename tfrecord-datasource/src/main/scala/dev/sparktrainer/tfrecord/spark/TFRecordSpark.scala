package dev.sparktrainer.tfrecord.spark

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.SparkSession

/** Glue shared by the V2 and V1 bindings. */
private[spark] object TFRecordSpark {
  /**
   * Parses options with the session's `spark.sql.tfrecord.*` fallbacks. Bad options throw an
   * IllegalArgumentException, as Spark's own sources do for theirs.
   */
  def parseOptions(session: SparkSession, options: Map[String, String]): TFRecordOptions = {
    val conf = session.conf.getAll.filter(_._1.startsWith(TFRecordOptions.SESSION_CONF_PREFIX))
    TFRecordOptions.parse(options.asJava, conf.asJava)
  }

  /**
   * Whether a column of this type can be written under some record type: SequenceExample maps the
   * most types (Example's, plus arrays of arrays). The record type actually chosen is checked
   * later, with a message naming the column, by `TFRecordRowEncoder.validateWriteSchema`.
   */
  def supportsDataType(dataType: org.apache.spark.sql.types.DataType): Boolean = {
    val schema = new org.apache.spark.sql.types.StructType().add("c", dataType)
    try {
      TFRecordRowEncoder.validateWriteSchema(schema, RecordType.SequenceExample)
      true
    } catch {
      case _: IllegalArgumentException => false
    }
  }
}
