package dev.sparktrainer.tfrecord.spark

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex
import org.apache.spark.sql.execution.datasources.v2.FileScanBuilder
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.util.CaseInsensitiveStringMap

/** Column pruning and partition filters come from FileScanBuilder. */
case class TFRecordScanBuilder(
    sparkSession: SparkSession,
    fileIndex: PartitioningAwareFileIndex,
    schema: StructType,
    dataSchema: StructType,
    options: CaseInsensitiveStringMap)
  extends FileScanBuilder(sparkSession, fileIndex, dataSchema) {

  override def build(): TFRecordScan =
    TFRecordScan(sparkSession, fileIndex, dataSchema, readDataSchema(), readPartitionSchema(),
      options, partitionFilters, dataFilters)
}
