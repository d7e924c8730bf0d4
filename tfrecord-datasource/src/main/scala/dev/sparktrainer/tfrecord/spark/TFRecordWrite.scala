package dev.sparktrainer.tfrecord.spark

import org.apache.hadoop.mapreduce.Job
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.write.LogicalWriteInfo
import org.apache.spark.sql.execution.datasources.OutputWriterFactory
import org.apache.spark.sql.execution.datasources.v2.FileWrite
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DataType, StructType}

/** A V2 write (DataFrameWriterV2, catalogs); FileWrite runs the commit protocol. */
case class TFRecordWrite(
    paths: Seq[String],
    formatName: String,
    supportsDataType: DataType => Boolean,
    info: LogicalWriteInfo) extends FileWrite {

  override def prepareWrite(
      sqlConf: SQLConf,
      job: Job,
      options: Map[String, String],
      dataSchema: StructType): OutputWriterFactory = {
    val parsed = TFRecordSpark.parseOptions(SparkSession.active, options)
    TFRecordRowEncoder.validateWriteSchema(dataSchema, parsed.recordType())
    new TFRecordOutputWriter.Factory(parsed)
  }
}
