/**
 * The {@code tfrecord} Spark DataSource V2 ({@code spark.read.format("tfrecord")}), built on
 * Spark's own file-source machinery ({@code FileTable}, {@code FileScan}, {@code FileScanBuilder},
 * {@code FileWrite}) for listing, partition discovery, split planning and the commit protocol. The
 * thin Spark bindings are Scala (they implement Scala traits); the record-level work — options,
 * schema inference, decoding records into {@code UnsafeRow}s, encoding rows — is Java, shared by
 * the V2 scan, the V2 write and the V1 {@code FileFormat} Spark falls back to for {@code df.write}.
 */
package dev.sparktrainer.tfrecord.spark;
