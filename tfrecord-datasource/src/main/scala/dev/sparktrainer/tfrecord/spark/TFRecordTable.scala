package dev.sparktrainer.tfrecord.spark

import scala.jdk.CollectionConverters._

import org.apache.hadoop.fs.FileStatus
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.connector.catalog.{MetadataColumn, SupportsMetadataColumns}
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, Write, WriteBuilder}
import org.apache.spark.sql.execution.datasources.FileFormat
import org.apache.spark.sql.execution.datasources.v2.FileTable
import org.apache.spark.sql.types.{DataType, StructField, StructType}
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * A set of TFRecord files as a V2 table: listing and partition discovery come from FileTable. It
 * offers the hidden `_metadata` column of Spark's file sources (`file_path`, `file_name`,
 * `file_size`, `file_block_start`, `file_block_length`, `file_modification_time`): Spark 4.1 gives
 * it to V1 file formats only (FileSourceStrategy), and V2 `FileTable`s have none of their own.
 */
case class TFRecordTable(
    name: String,
    sparkSession: SparkSession,
    options: CaseInsensitiveStringMap,
    paths: Seq[String],
    userSpecifiedSchema: Option[StructType],
    fallbackFileFormat: Class[_ <: FileFormat])
  extends FileTable(sparkSession, options, paths, userSpecifiedSchema) with SupportsMetadataColumns {

  private lazy val parsedOptions =
    TFRecordSpark.parseOptions(sparkSession, options.asCaseSensitiveMap.asScala.toMap)

  override def newScanBuilder(options: CaseInsensitiveStringMap): TFRecordScanBuilder =
    TFRecordScanBuilder(sparkSession, fileIndex, schema, dataSchema, withTableOptions(options))

  override def inferSchema(files: Seq[FileStatus]): Option[StructType] = {
    val hadoopConf = sparkSession.sessionState.newHadoopConfWithOptions(
      options.asCaseSensitiveMap.asScala.toMap)
    val inferred = TFRecordSchemaInference.infer(files.asJava, hadoopConf, parsedOptions)
    if (inferred.isPresent) Some(inferred.get) else None
  }

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder = new WriteBuilder {
    override def build(): Write = {
      val merged = withTableOptions(info.options())
      val mergedInfo = new LogicalWriteInfo {
        override def queryId(): String = info.queryId()
        override def schema(): StructType = info.schema()
        override def options(): CaseInsensitiveStringMap = merged
      }
      TFRecordWrite(paths, formatName, supportsDataType, mergedInfo)
    }
  }

  /** The table's options overridden by the scan's or write's (works on Spark 3.5 and 4). */
  private def withTableOptions(more: CaseInsensitiveStringMap): CaseInsensitiveStringMap =
    new CaseInsensitiveStringMap(
      (options.asCaseSensitiveMap.asScala ++ more.asCaseSensitiveMap.asScala).asJava)

  override def supportsDataType(dataType: DataType): Boolean =
    TFRecordSpark.supportsDataType(dataType)

  override def formatName: String = "TFRecord"

  override def metadataColumns(): Array[MetadataColumn] = Array(TFRecordTable.FileMetadataColumn)
}

object TFRecordTable {
  /** `_metadata`: the same fields, types and nullability as Spark gives Parquet's, without row_index. */
  object FileMetadataColumn extends MetadataColumn {
    override def name(): String = FileFormat.METADATA_NAME
    // Without the fields' metadata, which marks V1 file-source attributes for V1 planning rules.
    override def dataType(): DataType =
      StructType(FileFormat.BASE_METADATA_FIELDS.map(f => StructField(f.name, f.dataType, f.nullable)))
    override def isNullable: Boolean = false
    override def comment(): String = "the file a row was read from"
}
}
