package dev.sparktrainer.ml;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.max;
import static org.apache.spark.sql.functions.min;

import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ExampleTransform;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.data.SequenceStatistics;
import dev.sparktrainer.model.Activation;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.SpecStrings;
import dev.sparktrainer.model.sequence.SequenceInput;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.DistributedTrainerBuilder;
import dev.sparktrainer.train.TrainedModel;
import dev.sparktrainer.train.TrainerOption;
import dev.sparktrainer.train.elastic.Rescale;
import dev.sparktrainer.train.step.OptimizerPlacement;
import dev.sparktrainer.train.step.Precision;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.ml.Estimator;
import org.apache.spark.ml.attribute.Attribute;
import org.apache.spark.ml.attribute.AttributeGroup;
import org.apache.spark.ml.attribute.NominalAttribute;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.ml.param.DoubleParam;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.LongParam;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.util.DefaultParamsReader;
import org.apache.spark.ml.util.DefaultParamsWritable;
import org.apache.spark.ml.util.Identifiable$;
import org.apache.spark.ml.util.MLReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Spark ML Estimator: synchronous data-parallel training ({@link DistributedTrainer}) of a model on
 * a DataFrame's feature vector column, usable in a {@code Pipeline} after {@code VectorAssembler} /
 * {@code StandardScaler}, from Java, Scala and notebooks. {@link #fit} returns a {@link
 * SparkTrainerModel} whose {@code transform} is distributed batch inference.
 *
 * <pre>{@code
 * SparkTrainerEstimator trainer = new SparkTrainerEstimator()
 *     .setFeaturesCol("features").setLabelCol("label")
 *     .setModelSpec("mlp:128,64").setNumWorkers(2).setEpochs(10).setBatchSize(32).setLearningRate(1e-3);
 * PipelineModel model = new Pipeline().setStages(new PipelineStage[] {assembler, scaler, trainer}).fit(train);
 * model.transform(test).select("prediction", "probability").show();
 * }</pre>
 *
 * <p>The DataFrame is read by the trainer's input pipeline: a plain scan of TFRecord or Parquet
 * files directly, anything else (the output of a feature transformer, for instance) staged once to
 * Parquet under {@code stagingDir} and deleted after training. The number of classes comes from
 * {@code numClasses}, else the label column's nominal attribute (StringIndexer), else its maximum +
 * 1.
 *
 * <p>A sequence model ({@code embed:DIM}, {@code transformer:...}) reads a features column of token
 * ids ({@code array<bigint>}, {@code array<int>}), padded per batch (with {@code padValue}, in
 * {@code bucketBoundaries} length buckets); {@code vocabSize} and {@code maxLength} default to the
 * training data's largest id + 1 and longest sequence.
 *
 * <p>Why this file is long: Spark ML's Java-friendly convention is a typed setter per Param on the
 * Estimator itself (40 of them, one line of logic each, documented for notebook users); the Params
 * themselves are declared once in {@link TrainingParams}, shared with the Model, and {@link #fit}
 * maps them onto the trainer's builder through the option table.
 */
public final class SparkTrainerEstimator extends Estimator<SparkTrainerModel>
    implements DefaultParamsWritable, SharedParams<SparkTrainerEstimator>, TrainingParams {
  private static final long serialVersionUID = 1L;

  private final String uid;
  private final SharedParams.Holder shared;
  private final TrainingParams.Holder training;

  public SparkTrainerEstimator() {
    this(Identifiable$.MODULE$.randomUID("sparkTrainer"));
  }

  public SparkTrainerEstimator(String uid) {
    this.uid = uid;
    this.shared = new SharedParams.Holder(this);
    this.training = new TrainingParams.Holder(this);
  }

  @Override
  public String uid() {
    return uid;
  }

  @Override
  public SharedParams.Holder sharedParams() {
    return shared;
  }

  @Override
  public TrainingParams.Holder trainingParams() {
    return training;
  }

  // ---- Setters (the Params: TrainingParams and SharedParams) ----
  public SparkTrainerEstimator setLabelCol(String v) {
    set(labelCol(), v);
    return this;
  }

  public SparkTrainerEstimator setNumWorkers(int v) {
    set(numWorkers(), v);
    return this;
  }

  public SparkTrainerEstimator setBatchSize(int v) {
    set(batchSize(), v);
    return this;
  }

  public SparkTrainerEstimator setEpochs(int v) {
    set(epochs(), v);
    return this;
  }

  public SparkTrainerEstimator setLearningRate(double v) {
    set(learningRate(), v);
    return this;
  }

  public SparkTrainerEstimator setOptimizer(String v) {
    set(optimizer(), v);
    return this;
  }

  public SparkTrainerEstimator setModelSpec(String v) {
    set(modelSpec(), v);
    return this;
  }

  public SparkTrainerEstimator setActivation(String v) {
    set(activation(), v);
    return this;
  }

  public SparkTrainerEstimator setDropout(double v) {
    set(dropout(), v);
    return this;
  }

  public SparkTrainerEstimator setNumClasses(int v) {
    set(numClasses(), v);
    return this;
  }

  public SparkTrainerEstimator setLoss(String v) {
    set(loss(), v);
    return this;
  }

  public SparkTrainerEstimator setCheckpointDir(String v) {
    set(checkpointDir(), v);
    return this;
  }

  public SparkTrainerEstimator setStagingDir(String v) {
    set(stagingDir(), v);
    return this;
  }

  public SparkTrainerEstimator setSeed(long v) {
    set(seed(), v);
    return this;
  }

  public SparkTrainerEstimator setShuffleBuffer(int v) {
    set(shuffleBuffer(), v);
    return this;
  }

  public SparkTrainerEstimator setUseGpus(boolean v) {
    set(useGpus(), v);
    return this;
  }

  public SparkTrainerEstimator setDeterministic(boolean v) {
    set(deterministic(), v);
    return this;
  }

  /**
   * uint8, float32 or auto (see {@code --image-transfer}).
   *
   * @throws IllegalArgumentException naming the option and its allowed values
   */
  public SparkTrainerEstimator setImageTransfer(String v) {
    set(
        imageTransfer(),
        PipelineOptions.ImageTransfer.parse(v).name().toLowerCase(java.util.Locale.ROOT));
    return this;
  }

  public SparkTrainerEstimator setRingTransport(String v) {
    set(ringTransport(), v);
    return this;
  }

  public SparkTrainerEstimator setBucketMb(double v) {
    set(bucketMb(), v);
    return this;
  }

  public SparkTrainerEstimator setOverlap(boolean v) {
    set(overlap(), v);
    return this;
  }

  public SparkTrainerEstimator setAccumulateSteps(int v) {
    set(accumulateSteps(), v);
    return this;
  }

  public SparkTrainerEstimator setRescale(String v) {
    set(rescale(), v);
    return this;
  }

  public SparkTrainerEstimator setMinWorkers(int v) {
    set(minWorkers(), v);
    return this;
  }

  public SparkTrainerEstimator setOptimizerPlacement(String v) {
    set(optimizerPlacement(), v);
    return this;
  }

  /**
   * {@code fp32} (default) or {@code bf16}: see {@link DistributedTrainerBuilder#optPrecision}. A
   * bad value fails here, naming the allowed ones.
   */
  public SparkTrainerEstimator setPrecision(String v) {
    set(precision(), Precision.parse("precision", v).name().toLowerCase(java.util.Locale.ROOT));
    return this;
  }

  /** Augmentation of the training data: see {@link DistributedTrainerBuilder#optTransform}. */
  public SparkTrainerEstimator setTransform(ExampleTransform v) {
    set(transform(), v);
    return this;
  }

  public SparkTrainerEstimator setNormalize(String v) {
    set(normalize(), v);
    return this;
  }

  /** See {@link DistributedTrainerBuilder#optGrow}. */
  public SparkTrainerEstimator setGrow(boolean v) {
    set(grow(), v);
    return this;
  }

  /** Seconds; see {@link DistributedTrainerBuilder#optSlotWait}. */
  public SparkTrainerEstimator setSlotWait(long v) {
    set(slotWait(), v);
    return this;
  }

  /**
   * {@code fp32} (default) or {@code bf16}: see {@link
   * DistributedTrainerBuilder#optGradientPrecision}.
   *
   * @throws IllegalArgumentException naming the value and the allowed ones (fp16: and why not)
   */
  public SparkTrainerEstimator setGradientPrecision(String v) {
    set(
        gradientPrecision(),
        TrainerOption.gradientPrecision("gradientPrecision", v)
            .name()
            .toLowerCase(java.util.Locale.ROOT));
    return this;
  }

  public SparkTrainerEstimator setCheckpointEverySteps(long v) {
    set(checkpointEverySteps(), v);
    return this;
  }

  public SparkTrainerEstimator setKeepCheckpoints(int v) {
    set(keepCheckpoints(), v);
    return this;
  }

  /** Seconds; see {@link DistributedTrainerBuilder#optCollectiveTimeout}. */
  public SparkTrainerEstimator setCollectiveTimeout(long v) {
    set(collectiveTimeout(), v);
    return this;
  }

  public SparkTrainerEstimator setMomentum(double v) {
    set(momentum(), v);
    return this;
  }

  public SparkTrainerEstimator setWeightDecay(double v) {
    set(weightDecay(), v);
    return this;
  }

  public SparkTrainerEstimator setWarmupSteps(long v) {
    set(warmupSteps(), v);
    return this;
  }

  public SparkTrainerEstimator setCosineDecaySteps(long v) {
    set(cosineDecaySteps(), v);
    return this;
  }

  public SparkTrainerEstimator setSharding(String v) {
    set(sharding(), v);
    return this;
  }

  public SparkTrainerEstimator setCacheDir(String v) {
    set(cacheDir(), v);
    return this;
  }

  /** Sequence models: the longest sequence fed to the model (see {@code --max-length}). */
  public SparkTrainerEstimator setMaxLength(int v) {
    set(maxLength(), v);
    return this;
  }

  /**
   * Sequence models: the vocabulary size, every id in {@code 0..v-1} (see {@code --vocab-size}).
   */
  public SparkTrainerEstimator setVocabSize(long v) {
    set(vocabSize(), v);
    return this;
  }

  /** Sequence models: the value padding sequences to their batch's longest. */
  public SparkTrainerEstimator setPadValue(double v) {
    set(padValue(), v);
    return this;
  }

  /**
   * Sequence models: length buckets (see {@code --bucket-boundaries}).
   *
   * @throws IllegalArgumentException unless strictly increasing positive lengths
   */
  public SparkTrainerEstimator setBucketBoundaries(int[] v) {
    PipelineOptions.builder().optBucketBoundaries(v); // checks, naming the Param
    set(bucketBoundaries(), v);
    return this;
  }

  @Override
  public SparkTrainerModel fit(Dataset<?> dataset) {
    Dataset<Row> df = dataset.toDF();
    TrainedModel trained = trainer(df).fit(df.sparkSession());
    SparkTrainerModel model = new SparkTrainerModel(uid, trained);
    copyValues(model, extractParamMap());
    model.setParent(this);
    return model;
  }

  /**
   * The trainer {@link #fit} runs on {@code df}: the model, loss and columns read from the data,
   * and every Param mapped onto the trainer's builder. Its {@link DistributedTrainer#config()} is
   * what the training tasks will run with.
   */
  DistributedTrainer trainer(Dataset<Row> df) {
    transformSchema(df.schema());
    String features = getOrDefault(featuresCol());
    String label = getOrDefault(labelCol());
    LossSpec lossSpec = LossSpec.parse(getOrDefault(loss()));
    int outputs = lossSpec == LossSpec.SOFTMAX_CROSS_ENTROPY ? classes(df, label) : 1;
    String modelText = getOrDefault(modelSpec());
    DatasetSpec.Builder columns =
        DatasetSpec.builder()
            .addPath("dataframe")
            .setLabel(
                label,
                lossSpec == LossSpec.SOFTMAX_CROSS_ENTROPY
                    ? DatasetSpec.LabelType.INT
                    : DatasetSpec.LabelType.FLOAT);
    ModelSpec spec;
    if (SpecStrings.isSequenceModel(modelText)) {
      SequenceInput input = sequenceInput(df, features);
      columns.addSequenceFeature(
          features, DatasetSpec.ValueType.INT64, input.maxLength(), input.vocabSize());
      spec =
          SpecStrings.model(
              modelText,
              List.of(features),
              new long[][] {{input.maxLength()}},
              outputs,
              Activation.parse(getOrDefault(activation())),
              (float) doubleParam(dropout()),
              input);
    } else {
      for (org.apache.spark.ml.param.Param<?> p :
          List.of(maxLength(), vocabSize(), bucketBoundaries())) {
        if (isSet(p)) {
          throw new IllegalArgumentException(
              "Invalid "
                  + p.name()
                  + ": it applies to sequence models (embed:DIM, transformer:...), and modelSpec is '"
                  + modelText
                  + "'");
        }
      }
      long[] shape = {featureSize(df, features)};
      spec =
          SpecStrings.model(
              modelText,
              List.of(features),
              new long[][] {shape},
              outputs,
              Activation.parse(getOrDefault(activation())),
              (float) doubleParam(dropout()));
      columns.addFeature(features, shape);
    }
    return trainer(df, spec, lossSpec, columns.build()).build();
  }

  /**
   * A sequence model's input: the features column's vocabulary size and maximum length, from the
   * Params, else from one pass over the data ({@link SequenceStatistics}, as the command line's
   * {@code train}); the ids checked against the vocabulary.
   */
  private SequenceInput sequenceInput(Dataset<Row> df, String features) {
    DataType t = df.schema().apply(features).dataType();
    DataType element = t instanceof ArrayType ? ((ArrayType) t).elementType() : t;
    if (!(element instanceof IntegerType
        || element instanceof LongType
        || element instanceof ShortType
        || element instanceof ByteType)) {
      throw new IllegalArgumentException(
          "Feature column '"
              + features
              + "' has type "
              + t.simpleString()
              + ": the sequence model '"
              + getOrDefault(modelSpec())
              + "' reads token ids, expected array<int> or array<bigint>");
    }
    int maxLen = isSet(maxLength()) ? intParam(maxLength()) : 0;
    SequenceStatistics.Stats st =
        SequenceStatistics.of(df, List.of(features), List.of(true), maxLen).get(features);
    long vocab = isSet(vocabSize()) ? longParam(vocabSize()) : st.defaultVocabSize();
    st.checkVocabulary(
        "the training data", vocab, isSet(vocabSize()) ? "vocabSize" : "the largest id + 1");
    return new SequenceInput(vocab, maxLen > 0 ? maxLen : st.defaultMaxLength());
  }

  /**
   * The one place where the Params map onto the builders: the names, unit conversions and allowed
   * values are the option table's ({@link TrainerOption}), as on the command line.
   */
  private DistributedTrainerBuilder trainer(
      Dataset<Row> df, ModelSpec spec, LossSpec lossSpec, DatasetSpec columns) {
    long seedValue = longParam(seed());
    PipelineOptions.Builder pipeline =
        PipelineOptions.builder()
            .optBatchSize(intParam(batchSize()))
            .optShuffleBuffer(intParam(shuffleBuffer()))
            .optSeed(seedValue)
            .optSharding(PipelineOptions.ShardingPolicy.parse(getOrDefault(sharding())))
            .optDeterministic((Boolean) getOrDefault(deterministic()))
            .optImageTransfer(getOrDefault(imageTransfer()))
            .optPadValue(doubleParam(padValue()));
    if (isSet(bucketBoundaries())) {
      pipeline.optBucketBoundaries(getOrDefault(bucketBoundaries()));
    }
    if (!getOrDefault(cacheDir()).isEmpty()) {
      pipeline.optCacheDir(getOrDefault(cacheDir()));
    }
    DistributedTrainerBuilder b =
        DistributedTrainer.builder()
            .setModel(spec)
            .setLoss(lossSpec)
            .setOptimizer(
                SpecStrings.optimizer(
                    getOrDefault(optimizer()),
                    (float) doubleParam(learningRate()),
                    (float) doubleParam(momentum()),
                    (float) doubleParam(weightDecay()),
                    longParam(warmupSteps()),
                    longParam(cosineDecaySteps())))
            .setTrainingData(df, columns, pipeline.build())
            .setNumWorkers(intParam(numWorkers()))
            .optEpochs(intParam(epochs()))
            .optSeed(seedValue)
            .optGpus((Boolean) getOrDefault(useGpus()))
            .optRingTransport(
                TrainerOption.ringTransport("ringTransport", getOrDefault(ringTransport())))
            .optCollectiveTimeout(
                TrainerOption.collectiveTimeout(
                    "collectiveTimeout", longParam(collectiveTimeout())))
            .optBucketMb(doubleParam(bucketMb()))
            .optOverlap((Boolean) getOrDefault(overlap()))
            .optAccumulateSteps(intParam(accumulateSteps()))
            .optRescale(Rescale.parse("rescale", getOrDefault(rescale())))
            .optMinWorkers(intParam(minWorkers()))
            .optGrow((Boolean) getOrDefault(grow()))
            .optSlotWait(TrainerOption.slotWait("slotWait", longParam(slotWait())))
            .optOptimizerPlacement(
                OptimizerPlacement.parse("optimizerPlacement", getOrDefault(optimizerPlacement())))
            .optPrecision(Precision.parse("precision", getOrDefault(precision())))
            .optGradientPrecision(
                TrainerOption.gradientPrecision(
                    "gradientPrecision", getOrDefault(gradientPrecision())))
            .optNormalize(Normalization.Mode.parse(getOrDefault(normalize())))
            .optKeepCheckpoints(intParam(keepCheckpoints()));
    if (isDefined(transform())) {
      b.optTransform(getOrDefault(transform()));
    }
    if (!getOrDefault(checkpointDir()).isEmpty()) {
      b.optCheckpointDir(getOrDefault(checkpointDir()))
          .optCheckpointEverySteps(longParam(checkpointEverySteps()));
    }
    if (!getOrDefault(stagingDir()).isEmpty()) {
      b.optStagingDir(getOrDefault(stagingDir()));
    }
    return b;
  }

  /**
   * Values per example of the features column: the Vector's size (from its metadata or first row),
   * or the array's.
   */
  private static long featureSize(Dataset<Row> df, String features) {
    StructField f = df.schema().apply(features);
    DataType t = f.dataType();
    if (t instanceof NumericType) {
      return 1;
    }
    if (t.sameType(SQLDataTypes.VectorType())) {
      int size = AttributeGroup.fromStructField(f).size();
      if (size > 0) {
        return size;
      }
    }
    List<Row> first =
        df.select(col(features)).where(col(features).isNotNull()).limit(1).collectAsList();
    if (first.isEmpty()) {
      throw new IllegalArgumentException(
          "Invalid training data: no row with a non-null '" + features + "' column");
    }
    Object v = first.get(0).get(0);
    return v instanceof Vector ? ((Vector) v).size() : first.get(0).getList(0).size();
  }

  private int classes(Dataset<Row> df, String label) {
    int k = intParam(numClasses());
    if (k > 0) {
      return k;
    }
    Attribute a = Attribute.fromStructField(df.schema().apply(label));
    if (a instanceof NominalAttribute && ((NominalAttribute) a).getNumValues().isDefined()) {
      return (Integer) ((NominalAttribute) a).getNumValues().get();
    }
    Row r = df.agg(min(col(label)), max(col(label))).head();
    if (r.isNullAt(1)) {
      throw new IllegalArgumentException(
          "Invalid training data: the label column '" + label + "' has no values");
    }
    double lo = ((Number) r.get(0)).doubleValue();
    double hi = ((Number) r.get(1)).doubleValue();
    if (lo < 0 || hi != Math.rint(hi)) {
      throw new IllegalArgumentException(
          "Invalid label column '"
              + label
              + "': values from "
              + lo
              + " to "
              + hi
              + ", expected class indices 0, 1, ... (use StringIndexer, or loss l2 for regression)");
    }
    return (int) hi + 1;
  }

  @Override
  public StructType transformSchema(StructType schema) {
    String features = getOrDefault(featuresCol());
    String label = getOrDefault(labelCol());
    BatchInference.checkFeatureColumns(schema, List.of(features));
    if (!Arrays.asList(schema.fieldNames()).contains(label)) {
      throw new IllegalArgumentException(
          "No label column '"
              + label
              + "' in the data (columns: "
              + String.join(", ", schema.fieldNames())
              + ")");
    }
    DataType lt = schema.apply(label).dataType();
    if (!(lt instanceof NumericType)) {
      throw new IllegalArgumentException(
          "Label column '"
              + label
              + "' has type "
              + lt.simpleString()
              + ": expected a number (a class index; StringIndexer turns strings into one)");
    }
    if (schema.apply(features).dataType() instanceof ArrayType
        && !(((ArrayType) schema.apply(features).dataType()).elementType()
            instanceof NumericType)) {
      throw new IllegalArgumentException("Feature column '" + features + "' must hold numbers");
    }
    StructType out = schema.add(getOrDefault(predictionCol()), DataTypes.DoubleType, false);
    if (!getOrDefault(probabilityCol()).isEmpty()) {
      out = out.add(getOrDefault(probabilityCol()), SQLDataTypes.VectorType(), true);
    }
    if (!getOrDefault(rawPredictionCol()).isEmpty()) {
      out = out.add(getOrDefault(rawPredictionCol()), SQLDataTypes.VectorType(), true);
    }
    return out;
  }

  @Override
  public SparkTrainerEstimator copy(ParamMap extra) {
    return (SparkTrainerEstimator) defaultCopy(extra);
  }

  /** Reads an Estimator saved with {@code write().save(path)}. */
  public static MLReader<SparkTrainerEstimator> read() {
    return new DefaultParamsReader<>();
  }

  public static SparkTrainerEstimator load(String path) {
    return read().load(path);
  }

  private int intParam(IntParam p) {
    Object v = getOrDefault(p);
    return ((Number) v).intValue();
  }

  private long longParam(LongParam p) {
    return ((Number) getOrDefault(p)).longValue();
  }

  private double doubleParam(DoubleParam p) {
    Object v = getOrDefault(p);
    return ((Number) v).doubleValue();
  }
}
