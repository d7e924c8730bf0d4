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
          TrainerOption.Target.TRAINER, DistributedTrainer.Builder.class,
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
        publicMethods(DistributedTrainer.Builder.class).stream()
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
            Arrays.stream(DistributedTrainer.Builder.class.getMethods())
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

  /** A Builder with its required settings (no data is read before {@code fit}). */
  private static DistributedTrainer.Builder required() {
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
