package dev.sparktrainer.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.collective.WirePrecision;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.ml.SharedParams;
import dev.sparktrainer.ml.SparkTrainerEstimator;
import dev.sparktrainer.ml.SparkTrainerModel;
import dev.sparktrainer.optim.OptimizerSpec;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.DistributedTrainerBuilder;
import dev.sparktrainer.train.RingTransport;
import dev.sparktrainer.train.TrainerOption;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.spark.ml.param.Param;
import org.junit.jupiter.api.Test;

/**
 * The option table ({@link TrainerOption}) against the three surfaces it names: every option of the
 * trainer's Builder is a row; every row's {@code train} flag and Estimator Param exist, or the row
 * says why that surface lacks it; nothing on a surface escapes the table; and the option tables of
 * {@code docs/cli.md} list every flag and Param.
 */
class OptionTableTest {
  /** The builder class of each target. */
  private static final Map<TrainerOption.Target, Class<?>> BUILDERS =
      Map.of(
          TrainerOption.Target.TRAINER, DistributedTrainerBuilder.class,
          TrainerOption.Target.PIPELINE, PipelineOptions.Builder.class,
          TrainerOption.Target.OPTIMIZER, OptimizerSpec.Builder.class);

  /** {@code train} flags that are the command's own, not settings of the training. */
  private static final Set<String> COMMAND_FLAGS =
      Set.of("skip-label-check", "overwrite", "master", "conf", "config", "verbose");

  /** Estimator Params of {@code transform}, not of training (shared with the Model). */
  private static final Set<String> INFERENCE_PARAMS =
      Set.of("predictionCol", "probabilityCol", "rawPredictionCol", "inferenceBatchSize");

  private static Set<String> publicMethods(Class<?> c) {
    return Arrays.stream(c.getMethods())
        .filter(m -> Modifier.isPublic(m.getModifiers()) && !Modifier.isStatic(m.getModifiers()))
        .map(Method::getName)
        .collect(Collectors.toCollection(TreeSet::new));
  }

  private static Set<String> trainFlags() {
    Set<String> names = new LinkedHashSet<>();
    new TrainCommand().flags().all().forEach(f -> names.add(f.name()));
    return names;
  }

  private static Set<String> estimatorParams() {
    return Arrays.stream(new SparkTrainerEstimator().params())
        .map(Param::name)
        .collect(Collectors.toCollection(TreeSet::new));
  }

  @Test
  void everyBuilderOptionIsARowAndEveryRowsMethodExists() {
    Set<String> named = new TreeSet<>();
    List<String> missing = new ArrayList<>();
    for (TrainerOption o : TrainerOption.values()) {
      Set<String> methods = publicMethods(BUILDERS.get(o.target()));
      if (!methods.contains(o.builderMethod())) {
        missing.add(o + ": no " + o.target() + " builder method " + o.builderMethod());
      }
      if (o.target() == TrainerOption.Target.TRAINER) {
        named.add(o.builderMethod());
        named.addAll(o.deprecatedBuilderMethods());
      }
    }
    assertThat(missing).isEmpty();
    Set<String> options =
        publicMethods(DistributedTrainerBuilder.class).stream()
            .filter(m -> m.startsWith("opt") || m.startsWith("set"))
            .collect(Collectors.toCollection(TreeSet::new));
    assertThat(options).as("the Builder's options").hasSizeGreaterThan(30);
    assertThat(named).as("the Builder options the table names").containsAll(options);
  }

  @Test
  void oldBuilderNamesAreDeprecatedAliases() throws Exception {
    int aliases = 0;
    for (TrainerOption o : TrainerOption.values()) {
      for (String old : o.deprecatedBuilderMethods()) {
        aliases++;
        Method m =
            Arrays.stream(DistributedTrainerBuilder.class.getMethods())
                .filter(x -> x.getName().equals(old))
                .findFirst()
                .orElseThrow(() -> new AssertionError("no Builder method " + old));
        assertThat(m.isAnnotationPresent(Deprecated.class)).as(old + " is @Deprecated").isTrue();
      }
    }
    assertThat(aliases).isEqualTo(4);
  }

  @Test
  void everyRowReachesTheCliAndTheEstimatorOrSaysWhyNot() {
    Set<String> flags = trainFlags();
    Set<String> params = estimatorParams();
    List<String> problems = new ArrayList<>();
    for (TrainerOption o : TrainerOption.values()) {
      if (o.flag() != null && !flags.contains(o.flag())) {
        problems.add(o + ": train has no --" + o.flag());
      }
      if (o.param() != null && !params.contains(o.param())) {
        problems.add(o + ": the Estimator has no Param " + o.param());
      }
      String why = o.absentBecause();
      if (o.flag() == null && (why == null || !why.startsWith("CLI"))) {
        problems.add(o + ": no flag, and no reason naming the CLI");
      }
      if (o.param() == null && (why == null || !why.contains("Estimator"))) {
        problems.add(o + ": no Param, and no reason naming the Estimator");
      }
      if (why != null && o.flag() != null && o.param() != null) {
        problems.add(o + ": a reason for a surface it is on: " + why);
      }
    }
    assertThat(problems).isEmpty();
  }

  @Test
  void nothingOnASurfaceEscapesTheTable() {
    Set<String> rowFlags = new TreeSet<>();
    Set<String> rowParams = new TreeSet<>();
    for (TrainerOption o : TrainerOption.values()) {
      if (o.flag() != null) {
        rowFlags.add(o.flag());
      }
      if (o.param() != null) {
        rowParams.add(o.param());
      }
    }
    Set<String> flags = new TreeSet<>(trainFlags());
    flags.removeAll(rowFlags);
    flags.removeAll(COMMAND_FLAGS);
    assertThat(flags).as("train flags that are no row of the option table").isEmpty();
    Set<String> params = estimatorParams();
    params.removeAll(rowParams);
    params.removeAll(INFERENCE_PARAMS);
    assertThat(params).as("Estimator Params that are no row of the option table").isEmpty();
  }

  @Test
  void theEstimatorAndTheModelShareTheInferenceParams() throws Exception {
    for (String name : INFERENCE_PARAMS) {
      for (Class<?> stage : List.of(SparkTrainerEstimator.class, SparkTrainerModel.class)) {
        assertThat(stage.getMethod(name).getDeclaringClass())
            .as(stage.getSimpleName() + "." + name)
            .isEqualTo(SharedParams.class);
      }
    }
    assertThat(SparkTrainerEstimator.class.getMethod("featuresCol").getDeclaringClass())
        .isEqualTo(SharedParams.class);
    SparkTrainerEstimator e = new SparkTrainerEstimator().setFeaturesCol("pixels");
    assertThat(e.getOrDefault(e.featuresCol())).isEqualTo("pixels");
    assertThat(e.getOrDefault(e.inferenceBatchSize())).isEqualTo(256);
  }

  @Test
  void theDocsOptionTablesListEveryFlagAndParam() throws IOException {
    Path root = Path.of("").toAbsolutePath();
    while (root != null && !Files.exists(root.resolve("README.md"))) {
      root = root.getParent();
    }
    assertThat(root).isNotNull();
    String cli = Files.readString(root.resolve("docs/cli.md"));
    Set<String> docFlags = new TreeSet<>();
    Set<String> docParams = new TreeSet<>();
    Pattern firstCell = Pattern.compile("^\\|([^|]*)\\|", Pattern.MULTILINE);
    Pattern flag = Pattern.compile("`--([a-z][a-z0-9-]*)");
    Pattern param = Pattern.compile("`([a-z][A-Za-z]*)`");
    Matcher rows = firstCell.matcher(cli);
    while (rows.find()) {
      Matcher f = flag.matcher(rows.group(1));
      while (f.find()) {
        docFlags.add(f.group(1));
      }
      Matcher p = param.matcher(rows.group(1));
      while (p.find()) {
        docParams.add(p.group(1));
      }
    }
    List<String> missing = new ArrayList<>();
    for (TrainerOption o : TrainerOption.values()) {
      if (o.flag() != null && !docFlags.contains(o.flag())) {
        missing.add("--" + o.flag());
      }
    }
    for (String p : estimatorParams()) {
      if (!docParams.contains(p)) {
        missing.add(p);
      }
    }
    assertThat(missing).as("options missing from the option tables of docs/cli.md").isEmpty();

    // The table of the three surfaces: one row per setting, with its names on each.
    List<String> lines = List.of(cli.split("\n"));
    List<String> rowsMissing = new ArrayList<>();
    for (TrainerOption o : TrainerOption.values()) {
      String flagCell = o.flag() == null ? "| — |" : "| `--" + o.flag() + "` |";
      String paramCell = o.param() == null ? "| — |" : "| `" + o.param() + "` |";
      boolean found =
          lines.stream()
              .anyMatch(
                  l ->
                      l.startsWith(flagCell)
                          && l.contains(o.builderMethod() + "`")
                          && l.contains(paramCell)
                          && o.deprecatedBuilderMethods().stream()
                              .allMatch(old -> l.contains("`" + old + "`")));
      if (!found) {
        rowsMissing.add(o + " " + flagCell + " " + o.builderMethod() + " " + paramCell);
      }
    }
    assertThat(rowsMissing)
        .as("rows missing from docs/cli.md's 'One option, three surfaces'")
        .isEmpty();
  }

  @Test
  void conversionsAndMessagesAreTheTables() {
    assertThat(TrainerOption.bucketBytes("--bucket-mb", 25))
        .isEqualTo(TrainerOption.DEFAULT_BUCKET_BYTES)
        .isEqualTo(DistributedTrainer.DEFAULT_BUCKET_BYTES);
    assertThat(TrainerOption.defaultBucketMb()).isEqualTo("25");
    assertThat(TrainerOption.bucketBytes("x", 0.5)).isEqualTo(1 << 19);
    assertThat(TrainerOption.bucketBytes("x", 1.0 / 1024)).isEqualTo(1024);
    assertThat(TrainerOption.bucketBytes("x", 0.0100001) % 8).isZero();
    assertThatThrownBy(() -> TrainerOption.bucketBytes("bucketMb", 2048))
        .hasMessage("Invalid bucketMb '2048.0': expected 0.001 to 1024 (MiB)");
    assertThat(TrainerOption.ringTransport("x", "TCP")).isEqualTo(RingTransport.TCP);
    assertThat(TrainerOption.ringTransport("x", "auto").sharedMemory()).isTrue();
    assertThatThrownBy(() -> TrainerOption.ringTransport("ringTransport", "shm"))
        .hasMessage("Invalid ringTransport 'shm': expected auto or tcp");
    assertThat(TrainerOption.gradientPrecision("x", "bf16")).isEqualTo(WirePrecision.BF16);
    assertThatThrownBy(() -> TrainerOption.gradientPrecision("gradientPrecision", "fp16"))
        .hasMessageStartingWith("Invalid gradientPrecision 'fp16': expected fp32 or bf16 (fp16");
    assertThat(TrainerOption.slotWait("x", 0)).isEqualTo(Duration.ZERO);
    assertThatThrownBy(() -> TrainerOption.slotWait("slotWait", -1))
        .hasMessage("Invalid slotWait -1: expected >= 0");
    assertThat(TrainerOption.collectiveTimeout("x", 300)).isEqualTo(Duration.ofMinutes(5));
    assertThatThrownBy(() -> TrainerOption.collectiveTimeout("collectiveTimeout", 0))
        .hasMessage("Invalid collectiveTimeout 0: expected at least 1 (seconds)");
    assertThat(TrainerOption.OPTIMIZER_PLACEMENT.expected()).isEqualTo("auto, device or host");
    assertThat(TrainerOption.NORMALIZE.choice("x", "MinMax")).isEqualTo("minmax");
    // The Builder's own names convert through the same table.
    assertThatThrownBy(() -> DistributedTrainer.builder().optBucketMb(0))
        .hasMessage("Invalid bucketMb '0.0': expected 0.001 to 1024 (MiB)");
  }

  /**
   * The gradient bucket size is the step's setting, not the collective's: converted from MiB once
   * and handed to the step; the ring's options do not carry what the ring never reads.
   */
  @Test
  void theBucketSizeIsTheSteps() {
    assertThat(
            Arrays.stream(dev.sparktrainer.collective.CommOptions.class.getRecordComponents())
                .map(java.lang.reflect.RecordComponent::getName))
        .as("the collective's options")
        .doesNotContain("bucketBytes", "overlap");
    Flags f = new TrainCommand().flags();
    f.parse(new String[] {"--bucket-mb", "0.5", "--no-overlap"}, List.of());
    TrainerFlags.check(f);
    dev.sparktrainer.train.config.TrainingConfig cfg =
        TrainerFlags.apply(f, required()).build().config();
    assertThat(cfg.step().bucketBytes()).isEqualTo(1 << 19);
    assertThat(cfg.step().overlap()).isFalse();
    assertThatThrownBy(
            () -> {
              Flags g = new TrainCommand().flags();
              g.parse(new String[] {"--bucket-mb", "4096"}, List.of());
              TrainerFlags.check(g);
            })
        .hasMessage("Invalid --bucket-mb '4096.0': expected 0.001 to 1024 (MiB)");
  }

  /**
   * One default per setting: the command line's flag defaults, the Builder's settings when only the
   * required ones are given, and the Estimator's Param defaults are the option table's; a surface
   * that starts elsewhere says why in the table, and does start elsewhere.
   */
  @Test
  void everySurfaceStartsFromTheTablesDefault() throws Exception {
    Flags f = new TrainCommand().flags();
    f.parse(new String[0], List.of());
    Map<String, Flags.Flag> flags = new java.util.HashMap<>();
    f.all().forEach(x -> flags.put(x.name(), x));
    DistributedTrainerBuilder b = required().setNumWorkers(2);
    DistributedTrainer trainer = b.build();
    SparkTrainerEstimator e = new SparkTrainerEstimator();
    List<String> disagree = new ArrayList<>();
    List<String> stale = new ArrayList<>();
    for (TrainerOption o : TrainerOption.values()) {
      Object table = o.defaultValue();
      Map<TrainerOption.Surface, Object> seen =
          new java.util.EnumMap<>(TrainerOption.Surface.class);
      if (o.flag() != null) {
        seen.put(TrainerOption.Surface.CLI, cliDefault(f, flags.get(o.flag()), o));
      }
      if (o.target() != TrainerOption.Target.TRAINER || !o.builderMethod().startsWith("set")) {
        seen.put(TrainerOption.Surface.BUILDER, builderDefault(o, b, trainer));
      }
      if (o.param() != null) {
        Object v = e.getDefault(e.getParam(o.param())).getOrElse(() -> null);
        // The Estimator's text Params say "none" with the empty string.
        seen.put(TrainerOption.Surface.ESTIMATOR, "".equals(v) ? null : v);
      }
      for (Map.Entry<TrainerOption.Surface, Object> s : seen.entrySet()) {
        boolean same = java.util.Objects.equals(table, s.getValue());
        String why = o.defaultDiffers(s.getKey());
        if (why == null && !same) {
          disagree.add(o + " " + s.getKey() + " " + s.getValue() + " (table: " + table + ")");
        } else if (why != null && same) {
          stale.add(o + " " + s.getKey() + " is the table's " + table + ", yet: " + why);
        }
      }
    }
    assertThat(disagree).as("defaults that are not the option table's").isEmpty();
    assertThat(stale).as("reasons for a difference that is not there").isEmpty();
  }

  /** The flag's value when not given, in the table's terms (a switch negating its row). */
  private static Object cliDefault(Flags f, Flags.Flag flag, TrainerOption o) {
    String name = flag.name();
    switch (flag.kind()) {
      case BOOL:
        return o.flagNegates() != f.bool(name);
      case INT:
        return f.has(name) ? f.integer(name) : null;
      case LONG:
        return f.has(name) ? f.longValue(name) : null;
      case DOUBLE:
        return f.has(name) ? f.number(name) : null;
      default:
        return f.has(name) ? f.string(name) : null;
    }
  }

  /** The Builder's setting when only the required ones are given, in the table's type and unit. */
  private static Object builderDefault(
      TrainerOption o, DistributedTrainerBuilder b, DistributedTrainer trainer) throws Exception {
    dev.sparktrainer.train.config.TrainingConfig c = trainer.config();
    PipelineOptions p = PipelineOptions.builder().build();
    OptimizerSpec adam = OptimizerSpec.adam().build();
    switch (o) {
      case VALIDATION_DATA:
        return c.data().validation();
      case MIN_WORKERS:
        // 0, the table's "as many as numWorkers", is resolved by build.
        return c.elastic().minWorkers() == c.numWorkers() ? 0 : c.elastic().minWorkers();
      case GROW:
        return c.elastic().grow();
      case SLOT_WAIT:
        return (Long) field(trainer, "slotWaitMillis") / 1000;
      case EPOCHS:
        return c.data().epochs();
      case BATCH_SIZE:
        return p.batchSize();
      case ACCUMULATE_STEPS:
        return c.data().accumulateSteps();
      case LEARNING_RATE:
        // The table's default optimizer is adam; the Builder's, OptimizerSpec.adam(), in float.
        return adam.baseLearningRate() == (float) o.doubleDefault()
            ? (Object) o.doubleDefault()
            : (double) adam.baseLearningRate();
      case MOMENTUM:
        return (double) (float) field(OptimizerSpec.sgd().build(), "momentum");
      case WEIGHT_DECAY:
        return (double) (float) field(adam, "weightDecay");
      case WARMUP_STEPS:
        return field(adam, "warmupSteps");
      case COSINE_DECAY_STEPS:
        return field(adam, "decay") == OptimizerSpec.Decay.NONE ? 0L : field(adam, "decaySteps");
      case SEED:
        // The trainer's seed and the input pipeline's own are one default.
        return p.seed() == c.model().seed()
            ? (Object) c.model().seed()
            : "trainer " + c.model().seed() + ", pipeline " + p.seed();
      case SHUFFLE_BUFFER:
        return p.shuffleBuffer();
      case DETERMINISTIC:
        return p.deterministic();
      case IMAGE_TRANSFER:
        return p.imageTransfer().name().toLowerCase(java.util.Locale.ROOT);
      case SHARDING:
        return p.sharding().name().toLowerCase(java.util.Locale.ROOT);
      case CACHE_DIR:
        return p.cacheDir();
      case PAD_VALUE:
        return p.padValue();
      case BUCKET_BOUNDARIES:
        return p.bucketBoundaries().length == 0 ? null : p.bucketBoundaries();
      case TRANSFORM:
        return field(b, "transform");
      case RESIZE:
        return p.imageResize();
      case NORMALIZE:
        return ((dev.sparktrainer.data.Normalization.Mode) field(trainer, "normalize")).id();
      case STAGING_DIR:
        return field(trainer, "stagingDir");
      case BUCKET_MB:
        return c.step().bucketBytes() / (double) (1 << 20);
      case OVERLAP:
        return c.step().overlap();
      case OPTIMIZER_PLACEMENT:
        return c.devices().placement().name().toLowerCase(java.util.Locale.ROOT);
      case PRECISION:
        return c.model().precision().name().toLowerCase(java.util.Locale.ROOT);
      case GRADIENT_PRECISION:
        return c.comm().wirePrecision().name().toLowerCase(java.util.Locale.ROOT);
      case CHECKPOINT_DIR:
        return c.checkpoints().dir();
      case CHECKPOINT_EVERY_STEPS:
        return c.checkpoints().everySteps();
      case KEEP_CHECKPOINTS:
        return c.checkpoints().keep();
      case RESCALE:
        return c.elastic().rescale() == dev.sparktrainer.train.elastic.Rescale.GLOBAL_BATCH
            ? "batch"
            : "lr";
      case RING_KEYSTORE:
      case RING_TRUSTSTORE:
        return c.comm().tls();
      case RING_TRANSPORT:
        return c.comm().sharedMemory() ? "auto" : "tcp";
      case COLLECTIVE_TIMEOUT:
        return c.comm().operationTimeout().toSeconds();
      case GPUS:
        return c.devices().gpus();
      case RING_HOST:
        return field(trainer, "ringHost");
      case CPU_DEVICES_PER_WORKER:
        return c.devices().cpuDevicesPerWorker();
      case OUTPUT_DIR:
        return field(trainer, "outputDir");
      case CALLBACK:
        return field(trainer, "callback");
      default:
        throw new AssertionError("no reading of the Builder's " + o);
    }
  }

  /** A private field's value: settings the Builder keeps outside {@code TrainingConfig}. */
  private static Object field(Object owner, String name) throws ReflectiveOperationException {
    java.lang.reflect.Field x = owner.getClass().getDeclaredField(name);
    x.setAccessible(true);
    return x.get(owner);
  }

  /** A Builder with its required settings (no data is read before {@code fit}). */
  private static DistributedTrainerBuilder required() {
    return DistributedTrainer.builder()
        .setModel(dev.sparktrainer.model.MlpSpec.of(4, 2, 3))
        .setLoss(dev.sparktrainer.model.LossSpec.SOFTMAX_CROSS_ENTROPY)
        .setOptimizer(OptimizerSpec.sgd().build())
        .setTrainingData(
            dev.sparktrainer.data.DatasetSpec.builder().addPath("x").addFeature("f", 4).build(),
            PipelineOptions.builder().build());
  }

  @Test
  void theEstimatorChecksItsNewParamsWhenSet() {
    SparkTrainerEstimator e =
        new SparkTrainerEstimator()
            .setGradientPrecision("BF16")
            .setGrow(true)
            .setSlotWait(5)
            .setCheckpointEverySteps(10)
            .setKeepCheckpoints(2)
            .setCollectiveTimeout(60)
            .setMomentum(0.5)
            .setWeightDecay(0.01)
            .setWarmupSteps(3)
            .setCosineDecaySteps(100)
            .setSharding("file")
            .setCacheDir("/tmp/cache");
    assertThat(e.getOrDefault(e.gradientPrecision())).isEqualTo("bf16");
    assertThat(e.getOrDefault(e.slotWait())).isEqualTo(5L);
    assertThatThrownBy(() -> new SparkTrainerEstimator().setGradientPrecision("fp16"))
        .hasMessageContaining("gradientPrecision 'fp16': expected fp32 or bf16 (fp16");
    assertThatThrownBy(() -> new SparkTrainerEstimator().setSlotWait(-1))
        .hasMessageContaining("slotWait");
    assertThatThrownBy(() -> new SparkTrainerEstimator().setCollectiveTimeout(0))
        .hasMessageContaining("collectiveTimeout");
    assertThatThrownBy(() -> new SparkTrainerEstimator().setSharding("rows"))
        .hasMessageContaining("sharding");
  }
}
