package dev.sparktrainer.tfrecord.spark

import java.util.concurrent.atomic.AtomicLong

import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.catalyst.{FileSourceOptions, InternalRow}
import org.apache.spark.sql.connector.metric.CustomTaskMetric
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReader}
import org.apache.spark.sql.execution.datasources.{FilePartition, PartitionedFile}
import org.apache.spark.sql.execution.datasources.v2.{FilePartitionReader, FilePartitionReaderFactory, PartitionReaderWithPartitionValues}
import org.apache.spark.sql.types.StructType
import org.apache.spark.util.SerializableConfiguration

/** Runs on executors: one reader per file split, partition values appended. */
case class TFRecordPartitionReaderFactory(
    broadcastedConf: Broadcast[SerializableConfiguration],
    readDataSchema: StructType,
    partitionSchema: StructType,
    parsedOptions: TFRecordOptions)
  extends FilePartitionReaderFactory {

  override protected def options: FileSourceOptions =
    new FileSourceOptions(org.apache.spark.sql.catalyst.util.CaseInsensitiveMap(Map.empty[String, String]))

  override def createReader(partition: InputPartition): PartitionReader[InternalRow] = {
    val dropped = new AtomicLong()
    val files = partition.asInstanceOf[FilePartition].files
    val reader = new FilePartitionReader[InternalRow](
      files.iterator, (f: PartitionedFile) => buildReader(f, dropped), options)
    new TFRecordPartitionReaderFactory.WithMetrics(reader, dropped)
  }

  override def buildReader(file: PartitionedFile): PartitionReader[InternalRow] =
    buildReader(file, new AtomicLong())

  private def buildReader(file: PartitionedFile, dropped: AtomicLong): PartitionReader[InternalRow] = {
    val reader = new TFRecordPartitionReader(file.toPath, file.start, file.length,
      broadcastedConf.value.value, readDataSchema, parsedOptions, dropped)
    new PartitionReaderWithPartitionValues(reader, readDataSchema, partitionSchema,
      file.partitionValues)
  }
}

object TFRecordPartitionReaderFactory {
  /** Reports the dropped-records task metric of a whole input partition. */
  private class WithMetrics(reader: PartitionReader[InternalRow], dropped: AtomicLong)
    extends PartitionReader[InternalRow] {
    override def next(): Boolean = reader.next()
    override def get(): InternalRow = reader.get()
    override def close(): Unit = reader.close()
    override def currentMetricsValues(): Array[CustomTaskMetric] =
      Array(DroppedRecordsMetric.value(dropped.get()))
  }
}
