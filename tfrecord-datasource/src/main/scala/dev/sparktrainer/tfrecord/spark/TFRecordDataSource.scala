package dev.sparktrainer.tfrecord.spark

import org.apache.spark.sql.connector.catalog.Table
import org.apache.spark.sql.execution.datasources.FileFormat
import org.apache.spark.sql.execution.datasources.v2.FileDataSourceV2
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * The `tfrecord` data source: `spark.read.format("tfrecord")`, `df.write.format("tfrecord")`.
 *
 * Reads go through the V2 [[TFRecordTable]]; Spark routes `DataFrameWriter.save` and catalog
 * tables of file sources to the V1 [[TFRecordFileFormat]] (SPARK-28396), which shares the same
 * record-level code.
 */
class TFRecordDataSource extends FileDataSourceV2 {
  override def fallbackFileFormat: Class[_ <: FileFormat] = classOf[TFRecordFileFormat]

  override def shortName(): String = TFRecordDataSource.ShortName

  override protected def getTable(options: CaseInsensitiveStringMap): Table = {
    val paths = getPaths(options)
    TFRecordTable(getTableName(options, paths), sparkSession, getOptionsWithoutPaths(options),
      paths, None, fallbackFileFormat)
  }

  override protected def getTable(options: CaseInsensitiveStringMap, schema: StructType): Table = {
    val paths = getPaths(options)
    TFRecordTable(getTableName(options, paths), sparkSession, getOptionsWithoutPaths(options),
      paths, Some(schema), fallbackFileFormat)
  }
}

object TFRecordDataSource {
  val ShortName = "tfrecord"
}
