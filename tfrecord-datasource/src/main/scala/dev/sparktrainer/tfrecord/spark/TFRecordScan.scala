package dev.sparktrainer.tfrecord.spark

import scala.jdk.CollectionConverters._

import org.apache.hadoop.fs.Path
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.connector.metric.CustomMetric
import org.apache.spark.sql.connector.read.PartitionReaderFactory
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex
import org.apache.spark.sql.execution.datasources.v2.FileScan
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.apache.spark.util.SerializableConfiguration

/** A scan of TFRecord files; Spark's FileScan plans the splits (uncompressed files are split). */
case class TFRecordScan(
    sparkSession: SparkSession,
    fileIndex: PartitioningAwareFileIndex,
    dataSchema: StructType,
    readDataSchema: StructType,
    readPartitionSchema: StructType,
    options: CaseInsensitiveStringMap,
    partitionFilters: Seq[Expression] = Seq.empty,
    dataFilters: Seq[Expression] = Seq.empty)
  extends FileScan {

  private lazy val parsedOptions =
    TFRecordSpark.parseOptions(sparkSession, options.asCaseSensitiveMap.asScala.toMap)

  override def isSplitable(path: Path): Boolean = TFRecordFiles.isSplittable(path, parsedOptions)

  override def getFileUnSplittableReason(path: Path): String =
    s"the file is ${parsedOptions.compressionOf(path.getName)} compressed"

  override def createReaderFactory(): PartitionReaderFactory = {
    // Fails on the driver, before tasks launch, for columns that cannot be read.
    TFRecordRowDecoder.validateReadSchema(readDataSchema, parsedOptions.recordType())
    val hadoopConf = sparkSession.sessionState.newHadoopConfWithOptions(
      options.asCaseSensitiveMap.asScala.toMap)
    val broadcastedConf =
      sparkSession.sparkContext.broadcast(new SerializableConfiguration(hadoopConf))
    val ignoreMissingFiles = Option(options.get("ignoreMissingFiles")).map(_.toBoolean)
      .getOrElse(sparkSession.conf.get("spark.sql.files.ignoreMissingFiles", "false").toBoolean)
    TFRecordPartitionReaderFactory(broadcastedConf, readDataSchema, readPartitionSchema,
      parsedOptions, ignoreMissingFiles)
  }

  override def supportedCustomMetrics(): Array[CustomMetric] = Array(new DroppedRecordsMetric)

  override def equals(obj: Any): Boolean = obj match {
    case s: TFRecordScan => super.equals(s) && dataSchema == s.dataSchema && options == s.options
    case _ => false
  }

  override def hashCode(): Int = super.hashCode()
}
