package dev.sparktrainer.data;

import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.codec.TFRecordFiles;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.util.functional.FutureIO;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.SerializableConfiguration;

/**
 * Makes a {@link DatasetPlan} on the driver: expands paths and globs, lists directories
 * (recursively; names starting with {@code _} or {@code .} are skipped), splits big uncompressed
 * TFRecord files into byte ranges, and counts the records of every split — with a Spark job when a
 * session is given (a framing scan per split on the executors, nothing but counts comes back), or
 * with local threads otherwise. Parquet files are counted from their footers.
 */
public final class DatasetPlanner {
  private DatasetPlanner() {}

  /** Plans with local counting (tests, tools, a single machine). */
  public static DatasetPlan plan(DatasetSpec spec, PipelineOptions options, Configuration conf)
      throws IOException {
    List<Split> splits = list(spec, options, conf);
    ExecutorService pool =
        Executors.newFixedThreadPool(
            Math.min(8, Math.max(1, splits.size())),
            r -> {
              Thread t = new Thread(r, "plan-count");
              t.setDaemon(true);
              return t;
            });
    try {
      List<Future<Long>> counts = new ArrayList<>();
      for (Split s : splits) {
        counts.add(pool.submit(() -> count(s, spec.format(), conf)));
      }
      List<Long> n = new ArrayList<>();
      for (Future<Long> f : counts) {
        n.add(FutureIO.awaitFuture(f));
      }
      return finish(spec, splits, n);
    } finally {
      pool.shutdownNow();
    }
  }

  /** Plans with the record counts made by a Spark job on the cluster. */
  public static DatasetPlan plan(DatasetSpec spec, PipelineOptions options, SparkSession spark)
      throws IOException {
    Configuration conf = spark.sessionState().newHadoopConf();
    List<Split> splits = list(spec, options, conf);
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    SerializableConfiguration sconf = new SerializableConfiguration(conf);
    DatasetSpec.Format format = spec.format();
    int slices = Math.max(1, Math.min(splits.size(), jsc.defaultParallelism() * 4));
    // A job tag and a description, not a job group: the caller's group (which a notebook or a
    // scheduler cancels) stays theirs and covers the counting job too.
    SparkContext sc = spark.sparkContext();
    String tag = "spark-trainer-plan-" + UUID.randomUUID();
    String previousDescription = sc.getLocalProperty("spark.job.description");
    sc.addJobTag(tag);
    sc.setJobDescription(
        "spark-trainer: count records of "
            + splits.size()
            + " splits"
            + (previousDescription == null ? "" : " (" + previousDescription + ")"));
    try {
      // A corrupt file is returned, not thrown: Spark would retry the task (spark.task.maxFailures)
      // only to meet the same bytes again. Other I/O errors (a lost datanode) are thrown and
      // retried.
      List<Object> results =
          jsc.parallelize(splits, slices)
              .map(
                  s -> {
                    try {
                      return (Object) count(s, format, sconf.value());
                    } catch (TFRecordCorruptException e) {
                      return (Object) new TFRecordCorruptException(e.file(), e.offset(), e.what());
                    } catch (IOException e) {
                      throw new UncheckedIOException(e);
                    }
                  })
              .collect();
      List<Long> counts = new ArrayList<>(results.size());
      for (Object r : results) {
        if (r instanceof TFRecordCorruptException e) {
          throw new TFRecordCorruptException(
              e.file(),
              e.offset(),
              e.what() + " (found while counting the records of the dataset)");
        }
        counts.add((Long) r);
      }
      return finish(spec, splits, counts);
    } finally {
      sc.removeJobTag(tag);
      sc.setJobDescription(previousDescription);
    }
  }

  private static DatasetPlan finish(DatasetSpec spec, List<Split> splits, List<Long> counts) {
    List<Split> out = new ArrayList<>();
    for (int i = 0; i < splits.size(); i++) {
      if (counts.get(i) > 0) {
        out.add(splits.get(i).withRecords(out.size(), counts.get(i)));
      }
    }
    if (out.isEmpty()) {
      throw new IllegalArgumentException(
          "No records in " + spec.paths() + " (" + splits.size() + " files or splits, all empty)");
    }
    return new DatasetPlan(spec, out);
  }

  /** The files of the spec, split, in canonical order; counts not yet known. */
  static List<Split> list(DatasetSpec spec, PipelineOptions options, Configuration conf)
      throws IOException {
    List<FileStatus> files = new ArrayList<>();
    for (String p : spec.paths()) {
      Path path = new Path(p);
      FileSystem fs = path.getFileSystem(conf);
      FileStatus[] matched = fs.globStatus(path);
      if (matched == null || matched.length == 0) {
        throw new FileNotFoundException("Data path " + p + " matches no file");
      }
      int before = files.size();
      for (FileStatus st : matched) {
        if (st.isDirectory()) {
          RemoteIterator<LocatedFileStatus> it = fs.listFiles(st.getPath(), true);
          while (it.hasNext()) {
            LocatedFileStatus f = it.next();
            if (visible(st.getPath(), f.getPath())) {
              files.add(f);
            }
          }
        } else {
          files.add(st);
        }
      }
      if (files.size() == before) {
        throw new FileNotFoundException("Data path " + p + " holds no data file");
      }
    }
    files.sort(Comparator.comparing(f -> f.getPath().toString()));
    List<Split> splits = new ArrayList<>();
    String last = null;
    for (FileStatus f : files) {
      String name = f.getPath().toString();
      if (name.equals(last)) {
        continue; // the same file named twice
      }
      last = name;
      boolean splittable =
          spec.format() == DatasetSpec.Format.TFRECORD
              && TFRecordCompression.fromFileName(f.getPath().getName()).isSplittable();
      long size = options.splitSizeBytes();
      String version = Split.fileVersion(f);
      if (splittable && f.getLen() > size) {
        for (long start = 0; start < f.getLen(); start += size) {
          splits.add(
              new Split(
                  splits.size(), name, start, Math.min(size, f.getLen() - start), -1, version));
        }
      } else {
        splits.add(new Split(splits.size(), name, 0, Long.MAX_VALUE, -1, version));
      }
    }
    return splits;
  }

  /**
   * Skips hidden and metadata files ({@code _SUCCESS}, {@code .crc}, {@code _temporary/...}) under
   * {@code root}.
   */
  private static boolean visible(Path root, Path file) {
    for (Path p = file; p != null && !p.equals(root); p = p.getParent()) {
      String n = p.getName();
      if (n.startsWith("_") || n.startsWith(".")) {
        return false;
      }
    }
    return true;
  }

  static long count(Split s, DatasetSpec.Format format, Configuration conf) throws IOException {
    Path path = new Path(s.path());
    if (format == DatasetSpec.Format.PARQUET) {
      // The stream's opener: a footer that does not parse fails naming the file, as reading does.
      try (ParquetFileReader r = ParquetStream.open(s.path(), conf)) {
        return r.getRecordCount();
      }
    }
    try (TFRecordReader r =
        TFRecordFiles.open(
            path,
            s.start(),
            s.length(),
            conf,
            TFRecordCompression.fromFileName(path.getName()),
            TFRecordReader.DEFAULT_MAX_RECORD_LENGTH,
            CorruptRecordPolicy.FAILFAST)) {
      long n = 0;
      while (r.next()) {
        n++;
      }
      return n;
    }
  }
}
