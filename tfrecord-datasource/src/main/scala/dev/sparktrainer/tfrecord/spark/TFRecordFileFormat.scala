package dev.sparktrainer.tfrecord.spark

import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileStatus, Path}
import org.apache.hadoop.mapreduce.Job
import org.apache.spark.TaskContext
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.execution.datasources.{FileFormat, OutputWriterFactory, PartitionedFile}
import org.apache.spark.sql.sources.Filter
import org.apache.spark.sql.types.{DataType, StructType}
import org.apache.spark.util.SerializableConfiguration

/**
 * The V1 face of the source, which Spark uses for `df.write` (the V2 file write path is disabled
 * in Spark, SPARK-28396) and for catalog tables (`CREATE TABLE ... USING tfrecord`). Same options,
 * inference, decoder and encoder as the V2 classes.
 */
class TFRecordFileFormat extends FileFormat {

  override def inferSchema(
      sparkSession: SparkSession,
      options: Map[String, String],
      files: Seq[FileStatus]): Option[StructType] = {
    val parsed = TFRecordSpark.parseOptions(sparkSession, options)
    val conf = sparkSession.sessionState.newHadoopConfWithOptions(options)
    val inferred = TFRecordSchemaInference.infer(files.asJava, conf, parsed)
    if (inferred.isPresent) Some(inferred.get) else None
  }

  override def prepareWrite(
      sparkSession: SparkSession,
      job: Job,
      options: Map[String, String],
      dataSchema: StructType): OutputWriterFactory = {
    val parsed = TFRecordSpark.parseOptions(sparkSession, options)
    TFRecordRowEncoder.validateWriteSchema(dataSchema, parsed.recordType())
    new TFRecordOutputWriter.Factory(parsed)
  }

  override def isSplitable(
      sparkSession: SparkSession,
      options: Map[String, String],
      path: Path): Boolean =
    TFRecordFileOpener.isSplittable(path, TFRecordSpark.parseOptions(sparkSession, options))

  override protected def buildReader(
      sparkSession: SparkSession,
      dataSchema: StructType,
      partitionSchema: StructType,
      requiredSchema: StructType,
      filters: Seq[Filter],
      options: Map[String, String],
      hadoopConf: Configuration): PartitionedFile => Iterator[InternalRow] = {
    val parsed = TFRecordSpark.parseOptions(sparkSession, options)
    TFRecordRowDecoder.validateReadSchema(requiredSchema, parsed.recordType())
    val broadcastedConf =
      sparkSession.sparkContext.broadcast(new SerializableConfiguration(hadoopConf))
    (file: PartitionedFile) => {
      val reader = new TFRecordPartitionReader(file.toPath, file.start, file.length,
        broadcastedConf.value.value, requiredSchema, parsed, new AtomicLong())
      Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit](_ => reader.close()))
      new Iterator[InternalRow] {
        private var ready = false
        private var more = true
        override def hasNext: Boolean = {
          if (!ready && more) {
            more = reader.next()
            ready = true
            if (!more) reader.close()
          }
          more
        }
        override def next(): InternalRow = {
          if (!hasNext) throw new NoSuchElementException
          ready = false
          reader.get()
        }
      }
    }
  }

  override def supportDataType(dataType: DataType): Boolean =
    TFRecordSpark.supportsDataType(dataType)

  override def toString: String = "TFRecord"

  override def hashCode(): Int = getClass.hashCode()

  override def equals(other: Any): Boolean = other.isInstanceOf[TFRecordFileFormat]
}
