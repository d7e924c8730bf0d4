package dev.sparktrainer.tfrecord.spark

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.datasources.{FileFormat, PartitioningAwareFileIndex}
import org.apache.spark.sql.execution.datasources.v2.FileScanBuilder
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/**
 * Column pruning and partition filters come from FileScanBuilder; the `_metadata` column
 * ([[TFRecordTable.metadataColumns]]), which is neither a data nor a partition column, is picked out
 * of the required columns here, with only the fields the query reads.
 */
case class TFRecordScanBuilder(
    sparkSession: SparkSession,
    fileIndex: PartitioningAwareFileIndex,
    schema: StructType,
    dataSchema: StructType,
    options: CaseInsensitiveStringMap)
  extends FileScanBuilder(sparkSession, fileIndex, dataSchema) {

  override def build(): TFRecordScan =
    TFRecordScan(sparkSession, fileIndex, dataSchema, readDataSchema(), readPartitionSchema(),
      options, partitionFilters, dataFilters, readMetadataSchema())

  private def readMetadataSchema(): StructType = {
    val resolver = sparkSession.sessionState.conf.resolver
    val shadowed = schema.fieldNames.exists(resolver(_, FileFormat.METADATA_NAME)) // a column of that name
    requiredSchema.fields.find(f => resolver(f.name, FileFormat.METADATA_NAME)) match {
      case Some(f) if !shadowed => f.dataType.asInstanceOf[StructType]
      case _ => new StructType()
    }
  }
}
