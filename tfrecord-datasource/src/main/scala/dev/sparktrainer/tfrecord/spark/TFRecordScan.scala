package dev.sparktrainer.tfrecord.spark

import scala.jdk.CollectionConverters._

import org.apache.hadoop.fs.Path
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.connector.metric.CustomMetric
import org.apache.spark.sql.connector.read.PartitionReaderFactory
import org.apache.spark.sql.execution.datasources.{FileFormat, PartitioningAwareFileIndex}
import org.apache.spark.sql.execution.datasources.v2.FileScan
import org.apache.spark.sql.types.{StructField, StructType}
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.apache.spark.util.SerializableConfiguration

/**
 * A scan of TFRecord files; Spark's FileScan plans the splits (uncompressed files are split).
 * `readMetadataSchema` holds the fields of the `_metadata` column the query reads (empty: none); they
 * come after the data and partition columns.
 */
case class TFRecordScan(
    sparkSession: SparkSession,
    fileIndex: PartitioningAwareFileIndex,
    dataSchema: StructType,
    readDataSchema: StructType,
    readPartitionSchema: StructType,
    options: CaseInsensitiveStringMap,
    partitionFilters: Seq[Expression] = Seq.empty,
    dataFilters: Seq[Expression] = Seq.empty,
    readMetadataSchema: StructType = new StructType())
  extends FileScan {

  override def readSchema(): StructType =
    if (readMetadataSchema.isEmpty) super.readSchema()
    else super.readSchema().add(StructField(FileFormat.METADATA_NAME, readMetadataSchema, nullable = false))

  private lazy val parsedOptions =
    TFRecordSpark.parseOptions(sparkSession, options.asCaseSensitiveMap.asScala.toMap)

  override def isSplitable(path: Path): Boolean = TFRecordFileOpener.isSplittable(path, parsedOptions)

  override def getFileUnSplittableReason(path: Path): String =
    s"the file is ${parsedOptions.compressionOf(path.getName)} compressed"

  override def createReaderFactory(): PartitionReaderFactory = {
    // Fails on the driver, before tasks launch, for columns that cannot be read.
    TFRecordRowDecoder.validateReadSchema(readDataSchema, parsedOptions.recordType())
    val hadoopConf = sparkSession.sessionState.newHadoopConfWithOptions(
      options.asCaseSensitiveMap.asScala.toMap)
    val broadcastedConf =
      sparkSession.sparkContext.broadcast(new SerializableConfiguration(hadoopConf))
    // As Spark's FileSourceOptions: the read option, else the session conf.
    def flag(name: String): Boolean = Option(options.get(name)).map(_.trim.toBoolean)
      .getOrElse(sparkSession.conf.get(s"spark.sql.files.$name", "false").trim.toBoolean)
    TFRecordPartitionReaderFactory(broadcastedConf, readDataSchema, readPartitionSchema,
      parsedOptions, flag("ignoreMissingFiles"), flag("ignoreCorruptFiles"), readMetadataSchema)
  }

  override def supportedCustomMetrics(): Array[CustomMetric] = Array(new DroppedRecordsMetric)

  override def equals(obj: Any): Boolean = obj match {
    case s: TFRecordScan => super.equals(s) && dataSchema == s.dataSchema && options == s.options &&
      readMetadataSchema == s.readMetadataSchema
    case _ => false
  }

  override def hashCode(): Int = super.hashCode()
}
