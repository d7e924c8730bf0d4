package dev.sparktrainer.tfrecord.spark

import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._

import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReader, PartitionReaderFactory}
import org.apache.spark.sql.execution.datasources.{FilePartition, PartitionedFile}
import org.apache.spark.sql.execution.datasources.v2.PartitionReaderWithPartitionValues
import org.apache.spark.sql.types.StructType
import org.apache.spark.sql.vectorized.ColumnarBatch
import org.apache.spark.util.SerializableConfiguration

/** Runs on executors: one reader per file split, partition values appended. */
case class TFRecordPartitionReaderFactory(
    broadcastedConf: Broadcast[SerializableConfiguration],
    readDataSchema: StructType,
    partitionSchema: StructType,
    parsedOptions: TFRecordOptions,
    ignoreMissingFiles: Boolean)
  extends PartitionReaderFactory {

  private val columnar = parsedOptions.columnar() &&
    TFRecordColumnarReader.supports(readDataSchema, partitionSchema, parsedOptions.recordType())

  override def supportColumnarReads(partition: InputPartition): Boolean = columnar

  override def createColumnarReader(partition: InputPartition): PartitionReader[ColumnarBatch] = {
    val dropped = new AtomicLong()
    val files = partition.asInstanceOf[FilePartition].files
    new TFRecordSplitsReader[PartitionedFile, ColumnarBatch](
      files.iterator.asJava,
      (f: PartitionedFile) => new TFRecordColumnarReader(f.toPath, f.start, f.length,
        broadcastedConf.value.value, readDataSchema, partitionSchema, f.partitionValues,
        parsedOptions, parsedOptions.batchSize(), dropped),
      (f: PartitionedFile) => f.toString,
      ignoreMissingFiles,
      dropped)
  }

  override def createReader(partition: InputPartition): PartitionReader[InternalRow] = {
    val dropped = new AtomicLong()
    val files = partition.asInstanceOf[FilePartition].files
    new TFRecordSplitsReader[PartitionedFile, InternalRow](
      files.iterator.asJava,
      (f: PartitionedFile) => buildReader(f, dropped),
      (f: PartitionedFile) => f.toString,
      ignoreMissingFiles,
      dropped)
  }

  private def buildReader(file: PartitionedFile, dropped: AtomicLong): PartitionReader[InternalRow] = {
    val reader = new TFRecordPartitionReader(file.toPath, file.start, file.length,
      broadcastedConf.value.value, readDataSchema, parsedOptions, dropped)
    new PartitionReaderWithPartitionValues(reader, readDataSchema, partitionSchema,
      file.partitionValues)
  }
}
