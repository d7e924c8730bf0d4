package dev.sparktrainer.tfrecord.spark

import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._

import org.apache.spark.broadcast.Broadcast
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.connector.read.{InputPartition, PartitionReader, PartitionReaderFactory}
import org.apache.spark.sql.execution.datasources.{FileFormat, FilePartition, PartitionedFile}
import org.apache.spark.sql.execution.datasources.v2.PartitionReaderWithPartitionValues
import org.apache.spark.sql.types.{StructField, StructType}
import org.apache.spark.sql.vectorized.ColumnarBatch
import org.apache.spark.util.SerializableConfiguration

/**
 * Runs on executors: one reader per file split, partition values appended, then the requested
 * fields of the `_metadata` column (if any), filled per file as Spark fills them for its own file
 * formats.
 */
case class TFRecordPartitionReaderFactory(
    broadcastedConf: Broadcast[SerializableConfiguration],
    readDataSchema: StructType,
    partitionSchema: StructType,
    parsedOptions: TFRecordOptions,
    ignoreMissingFiles: Boolean,
    ignoreCorruptFiles: Boolean = false,
    metadataSchema: StructType = new StructType())
  extends PartitionReaderFactory {

  /** The partition columns, and `_metadata` after them when it is read. */
  private val constantSchema =
    if (metadataSchema.isEmpty) partitionSchema
    else partitionSchema.add(StructField(FileFormat.METADATA_NAME, metadataSchema, nullable = false))

  private val columnar = parsedOptions.columnar() &&
    TFRecordColumnarReader.supports(readDataSchema, constantSchema, parsedOptions.recordType())

  override def supportColumnarReads(partition: InputPartition): Boolean = columnar

  /** A file's partition values, and its `_metadata` struct when it is read. */
  private def constantValues(file: PartitionedFile): InternalRow = {
    if (metadataSchema.isEmpty) {
      file.partitionValues
    } else {
      val metadata = InternalRow.fromSeq(metadataSchema.fields.toSeq.map { f =>
        FileFormat.getFileConstantMetadataColumnValue(f.name, file, FileFormat.BASE_METADATA_EXTRACTORS).value
      })
      InternalRow.fromSeq(file.partitionValues.toSeq(partitionSchema) :+ metadata)
    }
  }

  override def createColumnarReader(partition: InputPartition): PartitionReader[ColumnarBatch] = {
    val dropped = new AtomicLong()
    val files = partition.asInstanceOf[FilePartition].files
    new TFRecordSplitsReader[ColumnarBatch](
      files.iterator.asJava,
      (f: PartitionedFile) => new TFRecordColumnarReader(f.toPath, f.start, f.length,
        broadcastedConf.value.value, readDataSchema, constantSchema, constantValues(f),
        parsedOptions, parsedOptions.batchSize(), dropped),
      ignoreMissingFiles,
      ignoreCorruptFiles,
      dropped)
  }

  override def createReader(partition: InputPartition): PartitionReader[InternalRow] = {
    val dropped = new AtomicLong()
    val files = partition.asInstanceOf[FilePartition].files
    new TFRecordSplitsReader[InternalRow](
      files.iterator.asJava,
      (f: PartitionedFile) => buildReader(f, dropped),
      ignoreMissingFiles,
      ignoreCorruptFiles,
      dropped)
  }

  private def buildReader(file: PartitionedFile, dropped: AtomicLong): PartitionReader[InternalRow] = {
    val reader = new TFRecordPartitionReader(file.toPath, file.start, file.length,
      broadcastedConf.value.value, readDataSchema, parsedOptions, dropped)
    new PartitionReaderWithPartitionValues(reader, readDataSchema, constantSchema, constantValues(file))
  }
}
