package dev.sparktrainer.it.fuzz;

import dev.sparktrainer.tfrecord.codec.CorruptRecordPolicy;
import dev.sparktrainer.tfrecord.codec.LittleEndian;
import dev.sparktrainer.tfrecord.codec.TFRecordCompression;
import dev.sparktrainer.tfrecord.codec.TFRecordCorruptException;
import dev.sparktrainer.tfrecord.codec.TFRecordFiles;
import dev.sparktrainer.tfrecord.codec.TFRecordReader;
import dev.sparktrainer.tfrecord.example.ExampleScanner;
import dev.sparktrainer.tfrecord.example.Examples;
import dev.sparktrainer.tfrecord.example.Feature;
import dev.sparktrainer.tfrecord.example.FeatureKind;
import dev.sparktrainer.tfrecord.example.FeatureLookup;
import dev.sparktrainer.tfrecord.example.FeatureValues;
import dev.sparktrainer.tfrecord.example.MalformedRecordException;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;

/**
 * A seeded mutation fuzzer of the TFRecord framing reader and the Example and SequenceExample
 * decoders, run by {@link TFRecordFuzzIT} as a separate JVM with a bounded heap (an allocation the
 * input does not justify ends in an OutOfMemoryError, reported with the input).
 *
 * <p>Every input is derived from {@code (seed, target, index)} alone, so a failure is reproduced by
 * running the same index again. For each input it checks:
 *
 * <ul>
 *   <li>only documented exceptions: {@link TFRecordCorruptException} from the reader under FAILFAST
 *       (and from {@link TFRecordFiles#open} for an unreadable compressed header), nothing at all
 *       under DROPMALFORMED; {@link MalformedRecordException} from the decoders; every corruption
 *       message names the file and a byte offset inside the input;
 *   <li>no hang: a watchdog stops the JVM when one input takes longer than the per-input deadline;
 *   <li>consistency: FAILFAST and DROPMALFORMED agree (a failure under one is a drop under the
 *       other; no failure means the same records and no drop); split reads of undamaged streams
 *       return every record exactly once for random split points; a record decodes the same alone
 *       and embedded in a larger buffer (nothing read outside its range); the whole-record parser,
 *       the scanner with the reusable FeatureValues (what the Spark readers use) and the
 *       packed-float fast path (what the input pipeline uses) agree on every record the parser
 *       accepts, and the fast path accepts nothing the parser rejects; padded varints decode like
 *       canonical ones; and a parsed record re-encoded parses to the same features.
 * </ul>
 *
 * <p>Usage: {@code TFRecordFuzzer SEED FRAMING_INPUTS EXAMPLE_INPUTS SEQUENCE_INPUTS SCRATCH_DIR
 * [DEADLINE_MS]}. Prints {@code STAT} lines and {@code FAIL} lines (at most 20); exits 0 when
 * nothing failed, 1 on failures, 3 on a hang, 4 on OutOfMemoryError.
 */
public final class TFRecordFuzzer {
  /**
   * The bound the framing fuzzer reads with (forged lengths with a valid length CRC ask for up to
   * this). The reader now grows its buffer only as bytes arrive (DataSourceRegressionIT), so the
   * bound just keeps the loop fast.
   */
  static final int MAX_RECORD_LENGTH = 1 << 20;

  private final long seed;
  private final Path scratch;
  private final Configuration conf = new Configuration();
  private final Map<String, long[]> stats = new TreeMap<>(); // target -> inputs, rejected
  private final Map<String, Long> exceptions = new TreeMap<>();
  private final List<String> failures = new ArrayList<>();
  private long failureCount;

  private volatile String currentTarget = "";
  private volatile long currentIndex = -1;
  private volatile long currentStart = System.nanoTime();
  private volatile byte[] currentInput = new byte[0];

  TFRecordFuzzer(long seed, Path scratch) {
    this.seed = seed;
    this.scratch = scratch;
  }

  public static void main(String[] args) throws Exception {
    long seed = Long.parseLong(args[0]);
    int framing = Integer.parseInt(args[1]);
    int examples = Integer.parseInt(args[2]);
    int sequences = Integer.parseInt(args[3]);
    Path scratch = Paths.get(args[4]);
    long deadlineMs = args.length > 5 ? Long.parseLong(args[5]) : 5000;
    Files.createDirectories(scratch);
    TFRecordFuzzer f = new TFRecordFuzzer(seed, scratch);
    f.startWatchdog(deadlineMs);
    long t0 = System.nanoTime();
    try {
      for (int i = 0; i < framing; i++) {
        f.framing(i);
      }
      for (int i = 0; i < examples; i++) {
        f.example(i);
      }
      for (int i = 0; i < sequences; i++) {
        f.sequence(i);
      }
    } catch (OutOfMemoryError e) {
      System.out.println(
          "OOM target="
              + f.currentTarget
              + " index="
              + f.currentIndex
              + " inputLength="
              + f.currentInput.length
              + " input="
              + hex(f.currentInput));
      System.out.flush();
      Runtime.getRuntime().halt(4);
    }
    f.report(System.out, (System.nanoTime() - t0) / 1e9);
    System.exit(f.failureCount == 0 ? 0 : 1);
  }

  private void startWatchdog(long deadlineMs) {
    Thread main = Thread.currentThread();
    Thread w =
        new Thread(
            () -> {
              while (true) {
                try {
                  Thread.sleep(100);
                } catch (InterruptedException e) {
                  return;
                }
                long ms = (System.nanoTime() - currentStart) / 1_000_000;
                if (currentIndex >= 0 && ms > deadlineMs) {
                  StringBuilder sb = new StringBuilder();
                  for (StackTraceElement el : main.getStackTrace()) {
                    sb.append("\n    at ").append(el);
                  }
                  System.out.println(
                      "HANG target="
                          + currentTarget
                          + " index="
                          + currentIndex
                          + " after "
                          + ms
                          + " ms, input="
                          + hex(currentInput)
                          + sb);
                  System.out.flush();
                  Runtime.getRuntime().halt(3);
                }
              }
            },
            "fuzz-watchdog");
    w.setDaemon(true);
    w.start();
  }

  private Random begin(String target, long index) {
    currentTarget = target;
    currentIndex = index;
    currentStart = System.nanoTime();
    stats.computeIfAbsent(target, k -> new long[2])[0]++;
    long h =
        seed * 0x9E3779B97F4A7C15L
            + target.hashCode() * 0xBF58476D1CE4E5B9L
            + index * 0x94D049BB133111EBL;
    return new Random(h ^ (h >>> 29));
  }

  private void documented(String target, Throwable e) {
    stats.get(target)[1]++;
    exceptions.merge(target + " " + e.getClass().getSimpleName(), 1L, Long::sum);
  }

  private void fail(String what, byte[] input, Throwable e) {
    failureCount++;
    if (failures.size() < 20) {
      StringBuilder sb =
          new StringBuilder(
              "FAIL target="
                  + currentTarget
                  + " index="
                  + currentIndex
                  + " "
                  + what
                  + "\n  input ("
                  + input.length
                  + " bytes) = "
                  + hex(input));
      if (e != null) {
        StringWriter sw = new StringWriter();
        e.printStackTrace(new PrintWriter(sw));
        sb.append("\n  ").append(sw.toString().replace("\n", "\n  "));
      }
      failures.add(sb.toString());
    }
  }

  static String hex(byte[] b) {
    return b.length <= 4096
        ? HexFormat.of().formatHex(b)
        : HexFormat.of().formatHex(b, 0, 4096) + "...";
  }

  void report(PrintStream out, double seconds) {
    long total = 0;
    for (Map.Entry<String, long[]> e : stats.entrySet()) {
      out.println(
          "STAT target="
              + e.getKey()
              + " inputs="
              + e.getValue()[0]
              + " rejected="
              + e.getValue()[1]);
      total += e.getValue()[0];
    }
    for (Map.Entry<String, Long> e : exceptions.entrySet()) {
      out.println("EXCEPTION " + e.getKey() + " " + e.getValue());
    }
    out.printf(
        "TOTAL inputs=%d failures=%d seconds=%.1f maxHeapMiB=%d%n",
        total, failureCount, seconds, Runtime.getRuntime().maxMemory() >> 20);
    for (String f : failures) {
      out.println(f);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The framing reader.

  /** The records a reader returns, or the exception it threw. */
  private record Read(List<byte[]> records, long dropped, Throwable error) {}

  private Read read(TFRecordReader r) {
    List<byte[]> out = new ArrayList<>();
    try (r) {
      while (r.next()) {
        if (r.dataLength() > MAX_RECORD_LENGTH) {
          throw new AssertionError("record of " + r.dataLength() + " bytes above maxRecordLength");
        }
        out.add(r.copyData());
      }
      return new Read(out, r.droppedRecords(), null);
    } catch (IOException | RuntimeException | AssertionError e) {
      return new Read(out, -1, e);
    }
  }

  private Read readStream(byte[] input, TFRecordCompression c, CorruptRecordPolicy policy) {
    if (c == TFRecordCompression.NONE) {
      return read(
          new TFRecordReader(
              new ByteArrayInputStream(input),
              "fuzz.tfrecord",
              0,
              Long.MAX_VALUE,
              MAX_RECORD_LENGTH,
              policy));
    }
    // compressed: through the public entry point that owns decompression (and its header errors)
    try {
      Path file = scratch.resolve("fuzz" + c.extension());
      Files.write(file, input);
      return read(
          TFRecordFiles.open(
              new org.apache.hadoop.fs.Path(file.toUri()),
              0,
              Long.MAX_VALUE,
              conf,
              c,
              MAX_RECORD_LENGTH,
              policy));
    } catch (IOException | RuntimeException e) {
      return new Read(List.of(), -1, e);
    }
  }

  /**
   * Checks a reader's exception is a documented corruption report naming the file and an offset.
   */
  private boolean checkCorruption(Throwable e, byte[] input, boolean uncompressed) {
    if (!(e instanceof TFRecordCorruptException)) {
      fail("undocumented exception from the reader: " + e, input, e);
      return false;
    }
    TFRecordCorruptException c = (TFRecordCorruptException) e;
    if (!c.getMessage().startsWith("Corrupt TFRecord file ")
        || !c.getMessage().contains(" at byte offset " + c.offset() + ": ")
        || c.file() == null
        || !c.getMessage().contains(c.file())) {
      fail("corruption message does not name file and offset: " + c.getMessage(), input, e);
      return false;
    }
    if (c.offset() < 0 || (uncompressed && c.offset() > input.length)) {
      fail(
          "corruption offset " + c.offset() + " outside the " + input.length + "-byte input",
          input,
          e);
      return false;
    }
    return true;
  }

  void framing(int index) {
    Random r = begin("framing", index);
    int n = r.nextInt(7);
    List<byte[]> records = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      records.add(Inputs.payload(r));
    }
    long[] offsets = new long[n];
    byte[] clean = Inputs.frame(records, offsets);
    int kind = r.nextInt(10);
    TFRecordCompression c =
        kind < 7
            ? TFRecordCompression.NONE
            : kind < 9 ? TFRecordCompression.GZIP : TFRecordCompression.ZLIB;
    boolean mutated = r.nextInt(8) != 0;
    byte[] input = clean;
    if (mutated) {
      switch (r.nextInt(4)) {
        case 0:
          input = Inputs.corruptLength(r, clean, offsets, n, r.nextBoolean(), MAX_RECORD_LENGTH);
          break;
        case 1:
          { // a damaged payload with valid CRCs around it: only the decoders can tell
            input = clean.clone();
            if (n > 0) {
              int rec = r.nextInt(n);
              int len = records.get(rec).length;
              if (len > 0) {
                input[(int) offsets[rec] + 12 + r.nextInt(len)] ^= (byte) (1 + r.nextInt(255));
                Inputs.fixDataCrc(input, (int) offsets[rec], len);
              }
            }
            break;
          }
        default:
          input = Inputs.mutate(r, clean, 4);
      }
    }
    if (c != TFRecordCompression.NONE) {
      input = compress(input, c);
      if (r.nextInt(3) != 0) { // damage the compressed bytes themselves
        input = Inputs.mutate(r, input, 3);
        mutated = true;
      }
    }
    currentInput = input;
    boolean unchanged = !mutated;

    Read strict = readStream(input, c, CorruptRecordPolicy.FAILFAST);
    Read lenient = readStream(input, c, CorruptRecordPolicy.DROPMALFORMED);
    if (strict.error() != null) {
      if (!checkCorruption(strict.error(), input, c == TFRecordCompression.NONE)) {
        return;
      }
      documented("framing", strict.error());
    }
    if (lenient.error() != null) {
      // DROPMALFORMED throws nothing, except TFRecordFiles.open on an unreadable compressed header
      boolean header =
          c != TFRecordCompression.NONE
              && lenient.error() instanceof TFRecordCorruptException
              && lenient.error().getMessage().contains("unreadable " + c + " header");
      if (!header) {
        fail("DROPMALFORMED threw " + lenient.error(), input, lenient.error());
      }
      return;
    }
    if (strict.error() == null) {
      if (lenient.dropped() != 0 || !same(strict.records(), lenient.records())) {
        fail(
            "FAILFAST read cleanly but DROPMALFORMED dropped "
                + lenient.dropped()
                + " or read other records",
            input,
            null);
      }
    } else if (lenient.dropped() < 1) {
      fail(
          "FAILFAST failed (" + strict.error().getMessage() + ") but DROPMALFORMED dropped nothing",
          input,
          null);
    } else if (!isPrefix(strict.records(), lenient.records())) {
      fail(
          "records before the first corruption differ between FAILFAST and DROPMALFORMED",
          input,
          null);
    }
    if (unchanged && (strict.error() != null || !same(strict.records(), records))) {
      fail("an undamaged stream did not read back exactly", input, strict.error());
    }
    if (c == TFRecordCompression.NONE) {
      splits(r, input, unchanged ? records : null);
    }
  }

  /** Split reads at random cut points: exactly once when undamaged, documented errors otherwise. */
  private void splits(Random r, byte[] input, List<byte[]> expected) {
    int cuts = 1 + r.nextInt(4);
    long[] points = new long[cuts + 2];
    points[0] = 0;
    points[cuts + 1] = input.length;
    for (int i = 1; i <= cuts; i++) {
      points[i] = input.length == 0 ? 0 : r.nextInt(input.length + 1);
    }
    Arrays.sort(points);
    for (CorruptRecordPolicy policy : CorruptRecordPolicy.values()) {
      List<byte[]> all = new ArrayList<>();
      for (int s = 0; s + 1 < points.length; s++) {
        long start = points[s];
        long end = s + 2 == points.length ? Long.MAX_VALUE : points[s + 1];
        ByteArrayInputStream in =
            new ByteArrayInputStream(input, (int) start, input.length - (int) start);
        Read part =
            read(new TFRecordReader(in, "fuzz.tfrecord", start, end, MAX_RECORD_LENGTH, policy));
        if (part.error() != null) {
          if (policy == CorruptRecordPolicy.DROPMALFORMED) {
            fail(
                "DROPMALFORMED split [" + start + ", " + end + ") threw " + part.error(),
                input,
                part.error());
          } else {
            checkCorruption(part.error(), input, true);
          }
          break;
        }
        all.addAll(part.records());
      }
      if (expected != null && !same(all, expected)) {
        fail(
            "split reads at "
                + Arrays.toString(points)
                + " ("
                + policy
                + ") returned "
                + all.size()
                + " of "
                + expected.size()
                + " records or other records",
            input,
            null);
      }
    }
  }

  private static byte[] compress(byte[] data, TFRecordCompression c) {
    ByteArrayOutputStream bos = new ByteArrayOutputStream();
    try (OutputStream out = c.compress(bos)) {
      out.write(data);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bos.toByteArray();
  }

  private static boolean same(List<byte[]> a, List<byte[]> b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (int i = 0; i < a.size(); i++) {
      if (!Arrays.equals(a.get(i), b.get(i))) {
        return false;
      }
    }
    return true;
  }

  private static boolean isPrefix(List<byte[]> prefix, List<byte[]> all) {
    return prefix.size() <= all.size() && same(prefix, all.subList(0, prefix.size()));
  }

  // ---------------------------------------------------------------------------------------------
  // The Example and SequenceExample decoders.

  /** The input at a random offset of a larger buffer full of other bytes. */
  private static byte[] embed(Random r, byte[] input, int[] offset) {
    int pre = r.nextInt(8);
    byte[] buf = Inputs.randomBytes(r, pre + input.length + r.nextInt(8));
    System.arraycopy(input, 0, buf, pre, input.length);
    offset[0] = pre;
    return buf;
  }

  void example(int index) {
    Random r = begin("example", index);
    if (r.nextInt(10) == 0) {
      paddedVarints(r, false);
    }
    boolean mutate = r.nextInt(10) != 0;
    byte[] valid = Inputs.example(r);
    byte[] input = mutate ? Inputs.mutate(r, valid, 4) : valid;
    currentInput = input;

    Map<String, Feature> parsed = null;
    try {
      parsed = Examples.parseExample(input);
    } catch (MalformedRecordException e) {
      documented("example", e);
    } catch (RuntimeException e) {
      fail("parseExample threw " + e, input, e);
      return;
    }
    if (!mutate && parsed == null) {
      fail("a valid Example does not parse", input, null);
    }
    int[] off = new int[1];
    byte[] big = embed(r, input, off);
    try {
      Map<String, Feature> again = Examples.parseExample(big, off[0], input.length);
      if (parsed == null || !parsed.equals(again)) {
        fail("parseExample differs when the record is embedded in a larger buffer", input, null);
      }
    } catch (MalformedRecordException e) {
      if (parsed != null) {
        fail("parseExample fails only when the record is embedded in a larger buffer", input, e);
      }
    } catch (RuntimeException e) {
      fail("parseExample (embedded) threw " + e, input, e);
    }
    scanExample(r, big, off[0], input, parsed);
    if (parsed != null) {
      roundTrip(input, parsed);
    }
  }

  /**
   * The same record with canonical and with padded varints (both valid protobuf) decodes the same.
   */
  private void paddedVarints(Random r, boolean sequence) {
    long s = r.nextLong();
    byte[] canonical =
        sequence ? Inputs.sequenceExample(new Random(s), 0) : Inputs.protoExample(new Random(s), 0);
    byte[] padded =
        sequence
            ? Inputs.sequenceExample(new Random(s), 0.5)
            : Inputs.protoExample(new Random(s), 0.5);
    currentInput = padded;
    try {
      if (sequence) {
        Examples.Sequence a = Examples.parseSequenceExample(canonical);
        Examples.Sequence b = Examples.parseSequenceExample(padded);
        if (!a.context.equals(b.context) || !equalLists(a.featureLists, b.featureLists)) {
          fail("a SequenceExample with padded varints decodes differently", padded, null);
        }
      } else if (!Examples.parseExample(canonical).equals(Examples.parseExample(padded))) {
        fail("an Example with padded varints decodes differently", padded, null);
      }
    } catch (RuntimeException e) {
      fail("a valid record with padded varints does not decode", padded, e);
    }
  }

  private void roundTrip(byte[] input, Map<String, Feature> parsed) {
    Map<String, Feature> back = Examples.parseExample(Examples.encodeExample(parsed));
    if (!back.equals(parsed)) {
      fail("re-encoding the parsed features changes them: " + parsed + " vs " + back, input, null);
    }
  }

  /** The scanner + FeatureValues path and the packed-float fast path, against the parser. */
  private void scanExample(
      Random r, byte[] buf, int off, byte[] input, Map<String, Feature> parsed) {
    Set<String> names = new LinkedHashSet<>();
    if (parsed != null) {
      names.addAll(comparable(parsed.keySet()));
    }
    for (int i = r.nextInt(4); i > 0; i--) {
      names.add(Inputs.NAMES[r.nextInt(Inputs.NAMES.length)]);
    }
    List<String> list = new ArrayList<>(names);
    ExampleScanner scanner = new ExampleScanner(new FeatureLookup(list), null);
    FeatureValues fv = new FeatureValues();
    try {
      scanner.scanExample(buf, off, input.length);
      // The offsets refer to the scanner's copy when it merged a map entry given twice.
      byte[] sb = scanner.buffer();
      int lo = sb == buf ? off : 0;
      int hi = sb == buf ? off + input.length : sb.length;
      for (int i = 0; i < list.size(); i++) {
        int fo = scanner.featureOffset[i];
        Feature expected = parsed == null ? null : parsed.get(list.get(i));
        if (fo < 0) {
          if (expected != null) {
            fail("scanner misses feature '" + list.get(i) + "' the parser found", input, null);
          }
          continue;
        }
        int fl = scanner.featureLength[i];
        if (fo < lo || fo + fl > hi) {
          fail("scanner located feature '" + list.get(i) + "' outside the record", input, null);
          continue;
        }
        checkFastPath(sb, fo, fl, input, r);
        Feature got = fv.decode(sb, fo, fl).toFeature();
        if (parsed != null && !Objects.equals(expected, got)) {
          fail(
              "scanner + FeatureValues decode '"
                  + list.get(i)
                  + "' as "
                  + got
                  + ", the parser as "
                  + expected,
              input,
              null);
        }
      }
    } catch (MalformedRecordException e) {
      if (parsed != null) {
        fail("the scanner path rejects a record the parser accepts", input, e);
      }
    } catch (RuntimeException e) {
      fail("the scanner path threw " + e, input, e);
    }
  }

  /**
   * FeatureValues.packedFloatsAt (the input pipeline's fast path) may decline anything, but what it
   * accepts must be exactly what the full decoder reads.
   */
  private void checkFastPath(byte[] buf, int fo, int fl, byte[] input, Random r) {
    FeatureValues full = new FeatureValues();
    FeatureKind kind;
    int count;
    float[] values;
    try {
      full.decode(buf, fo, fl);
      kind = full.kind();
      count = full.count();
      values = Arrays.copyOf(full.floatArray(), count);
    } catch (MalformedRecordException e) {
      kind = null;
      count = -1;
      values = null;
    }
    int n = count >= 0 && kind == FeatureKind.FLOAT && r.nextBoolean() ? count : r.nextInt(8);
    int at;
    try {
      at = FeatureValues.packedFloatsAt(buf, fo, fl, n);
    } catch (RuntimeException e) {
      fail("packedFloatsAt threw " + e, input, e);
      return;
    }
    if (at < 0) {
      return;
    }
    if (values == null) {
      fail(
          "packedFloatsAt accepts a Feature the decoder rejects as malformed ("
              + n
              + " floats at "
              + (at - fo)
              + " of the "
              + fl
              + "-byte Feature)",
          input,
          null);
      return;
    }
    if (kind != FeatureKind.FLOAT || count != n || at + 4L * n > fo + fl) {
      fail("packedFloatsAt finds " + n + " floats, the decoder " + count + " " + kind, input, null);
      return;
    }
    for (int i = 0; i < n; i++) {
      int bits = LittleEndian.getInt(buf, at + 4 * i);
      if (bits != Float.floatToRawIntBits(values[i])) {
        fail("packedFloatsAt value " + i + " differs from the decoder's", input, null);
        return;
      }
    }
  }

  void sequence(int index) {
    Random r = begin("sequence", index);
    if (r.nextInt(10) == 0) {
      paddedVarints(r, true);
    }
    boolean mutate = r.nextInt(10) != 0;
    byte[] valid = Inputs.sequenceExample(r, r.nextInt(4) == 0 ? 0.3 : 0);
    byte[] input = mutate ? Inputs.mutate(r, valid, 4) : valid;
    currentInput = input;
    Examples.Sequence parsed = null;
    try {
      parsed = Examples.parseSequenceExample(input);
    } catch (MalformedRecordException e) {
      documented("sequence", e);
    } catch (RuntimeException e) {
      fail("parseSequenceExample threw " + e, input, e);
      return;
    }
    int[] off = new int[1];
    byte[] big = embed(r, input, off);
    Set<String> ctx = new LinkedHashSet<>();
    Set<String> lists = new LinkedHashSet<>();
    if (parsed != null) {
      ctx.addAll(comparable(parsed.context.keySet()));
      lists.addAll(comparable(parsed.featureLists.keySet()));
      Examples.Sequence back = null;
      try {
        back =
            Examples.parseSequenceExample(
                Examples.encodeSequenceExample(parsed.context, parsed.featureLists));
      } catch (RuntimeException e) {
        fail("re-encoding a parsed SequenceExample does not parse: " + e, input, e);
      }
      if (back != null
          && (!back.context.equals(parsed.context)
              || !equalLists(back.featureLists, parsed.featureLists))) {
        fail("re-encoding the parsed SequenceExample changes it", input, null);
      }
    }
    ctx.add(Inputs.NAMES[r.nextInt(Inputs.NAMES.length)]);
    lists.add(Inputs.NAMES[r.nextInt(Inputs.NAMES.length)]);
    List<String> ctxNames = new ArrayList<>(ctx);
    List<String> listNames = new ArrayList<>(lists);
    ExampleScanner scanner =
        new ExampleScanner(new FeatureLookup(ctxNames), new FeatureLookup(listNames));
    FeatureValues fv = new FeatureValues();
    try {
      scanner.scanSequenceExample(big, off[0], input.length);
      byte[] sb = scanner.buffer(); // the scanner's copy when it merged a map entry given twice
      for (int i = 0; i < ctxNames.size(); i++) {
        Feature expected = parsed == null ? null : parsed.context.get(ctxNames.get(i));
        int fo = scanner.featureOffset[i];
        Feature got = fo < 0 ? null : fv.decode(sb, fo, scanner.featureLength[i]).toFeature();
        if (parsed != null && !Objects.equals(expected, got)) {
          fail(
              "context feature '" + ctxNames.get(i) + "': scanner " + got + ", parser " + expected,
              input,
              null);
        }
      }
      for (int i = 0; i < listNames.size(); i++) {
        List<Feature> expected = parsed == null ? null : parsed.featureLists.get(listNames.get(i));
        int lo = scanner.listOffset[i];
        if (lo < 0) {
          if (expected != null) {
            fail("scanner misses feature list '" + listNames.get(i) + "'", input, null);
          }
          continue;
        }
        int ll = scanner.listLength[i];
        int count = scanner.countInList(sb, lo, ll);
        List<Feature> got = new ArrayList<>();
        int visited =
            scanner.forEachInList(
                sb,
                lo,
                ll,
                (j, b, fo, fl) -> got.add(new FeatureValues().decode(b, fo, fl).toFeature()));
        if (count != visited || count != got.size()) {
          fail("countInList " + count + " but forEachInList visits " + visited, input, null);
        }
        if (parsed != null && !equalList(expected, got)) {
          fail(
              "feature list '" + listNames.get(i) + "': scanner " + got + ", parser " + expected,
              input,
              null);
        }
      }
    } catch (MalformedRecordException e) {
      if (parsed != null) {
        fail("the scanner path rejects a SequenceExample the parser accepts", input, e);
      }
    } catch (RuntimeException e) {
      fail("the SequenceExample scanner path threw " + e, input, e);
    }
  }

  /**
   * The names a byte-level lookup can find again: a key that is not valid UTF-8 decodes with
   * U+FFFD, whose encoding is not the key's bytes (and two such keys may decode alike).
   */
  private static List<String> comparable(Set<String> names) {
    List<String> out = new ArrayList<>();
    for (String n : names) {
      if (n.indexOf('\uFFFD') < 0) {
        out.add(n);
      }
    }
    return out;
  }

  private static boolean equalLists(Map<String, List<Feature>> a, Map<String, List<Feature>> b) {
    if (!a.keySet().equals(b.keySet())) {
      return false;
    }
    for (String k : a.keySet()) {
      if (!equalList(a.get(k), b.get(k))) {
        return false;
      }
    }
    return true;
  }

  private static boolean equalList(List<Feature> a, List<Feature> b) {
    return Objects.equals(a, b);
  }
}
