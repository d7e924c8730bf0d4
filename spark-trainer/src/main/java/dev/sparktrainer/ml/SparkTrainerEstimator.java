package dev.sparktrainer.ml;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.max;
import static org.apache.spark.sql.functions.min;

import dev.sparktrainer.data.DatasetSpec;
import dev.sparktrainer.data.ExampleTransform;
import dev.sparktrainer.data.Normalization;
import dev.sparktrainer.data.PipelineOptions;
import dev.sparktrainer.model.Activation;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.train.DistributedTrainer;
import dev.sparktrainer.train.OptimizerPlacement;
import dev.sparktrainer.train.Precision;
import dev.sparktrainer.train.Rescale;
import dev.sparktrainer.train.TrainedModel;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.ml.Estimator;
import org.apache.spark.ml.attribute.Attribute;
import org.apache.spark.ml.attribute.AttributeGroup;
import org.apache.spark.ml.attribute.NominalAttribute;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.ml.param.BooleanParam;
import org.apache.spark.ml.param.DoubleParam;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.LongParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.param.ParamValidators;
import org.apache.spark.ml.util.DefaultParamsReader;
import org.apache.spark.ml.util.DefaultParamsWritable;
import org.apache.spark.ml.util.Identifiable$;
import org.apache.spark.ml.util.MLReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.NumericType;
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
 */
public final class SparkTrainerEstimator extends Estimator<SparkTrainerModel>
    implements DefaultParamsWritable {
  private static final long serialVersionUID = 1L;

  private final String uid;
  final Param<String> featuresCol;
  final Param<String> labelCol;
  final Param<String> predictionCol;
  final Param<String> probabilityCol;
  final Param<String> rawPredictionCol;
  final IntParam numWorkers;
  final IntParam batchSize;
  final IntParam accumulateSteps;
  final Param<String> rescale;
  final IntParam minWorkers;
  final IntParam inferenceBatchSize;
  final IntParam epochs;
  final DoubleParam learningRate;
  final Param<String> optimizer;
  final Param<String> modelSpec;
  final Param<String> activation;
  final DoubleParam dropout;
  final IntParam numClasses;
  final Param<String> loss;
  final Param<String> checkpointDir;
  final Param<String> stagingDir;
  final LongParam seed;
  final IntParam shuffleBuffer;
  final BooleanParam useGpus;
  final BooleanParam deterministic;
  final Param<String> imageTransfer;
  final Param<String> ringTransport;
  final DoubleParam bucketMb;
  final BooleanParam overlap;
  final Param<String> optimizerPlacement;
  final Param<String> precision;
  final TransformParam transform;
  final Param<String> normalize;

  public SparkTrainerEstimator() {
    this(Identifiable$.MODULE$.randomUID("sparkTrainer"));
  }

  public SparkTrainerEstimator(String uid) {
    this.uid = uid;
    featuresCol =
        new Param<>(
            this, "featuresCol", "features column: an ml Vector, an array of numbers or a number");
    labelCol =
        new Param<>(this, "labelCol", "label column: class index (or a number for the l2 loss)");
    predictionCol = new Param<>(this, "predictionCol", "prediction column name");
    probabilityCol = new Param<>(this, "probabilityCol", "class probabilities column name");
    rawPredictionCol =
        new Param<>(this, "rawPredictionCol", "raw model outputs (logits) column name");
    numWorkers =
        new IntParam(
            this,
            "numWorkers",
            "number of workers (barrier tasks, one replica each)",
            ParamValidators.gtEq(1));
    batchSize =
        new IntParam(
            this,
            "batchSize",
            "per-worker batch size (global batch = batchSize x numWorkers)",
            ParamValidators.gtEq(1));
    accumulateSteps =
        new IntParam(
            this,
            "accumulateSteps",
            "batches per optimizer step, gradients summed locally"
                + " and all-reduced once (global batch = batchSize x accumulateSteps x numWorkers)",
            ParamValidators.gtEq(1));
    setDefault(accumulateSteps, 1);
    rescale =
        new Param<>(
            this,
            "rescale",
            "resuming a checkpoint of another worker count: batch (keep the global"
                + " batch) or lr (keep batchSize, scale the learning rate)",
            ParamValidators.inArray(new String[] {"batch", "lr"}));
    setDefault(rescale, "batch");
    minWorkers =
        new IntParam(
            this,
            "minWorkers",
            "elastic training: the fewest workers to go on with when executors"
                + " are lost for good (0: numWorkers, never fewer)",
            ParamValidators.gtEq(0));
    setDefault(minWorkers, 0);
    inferenceBatchSize =
        new IntParam(
            this, "inferenceBatchSize", "rows per batch in transform", ParamValidators.gtEq(1));
    epochs = new IntParam(this, "epochs", "number of epochs", ParamValidators.gtEq(1));
    learningRate =
        new DoubleParam(this, "learningRate", "base learning rate", ParamValidators.gt(0));
    optimizer =
        new Param<>(
            this,
            "optimizer",
            "adam, adamw or sgd",
            ParamValidators.inArray(new String[] {"adam", "adamw", "sgd"}));
    modelSpec = new Param<>(this, "modelSpec", "the model: " + SpecStrings.MODEL_FORMS);
    activation =
        new Param<>(
            this,
            "activation",
            "activation of the MLP's hidden layers: relu, tanh, sigmoid or gelu",
            ParamValidators.inArray(new String[] {"relu", "tanh", "sigmoid", "gelu"}));
    dropout =
        new DoubleParam(
            this,
            "dropout",
            "dropout rate after hidden layers (0: none)",
            ParamValidators.inRange(0, 1, true, false));
    numClasses =
        new IntParam(
            this,
            "numClasses",
            "number of classes (0: from the label column)",
            ParamValidators.gtEq(0));
    loss =
        new Param<>(
            this,
            "loss",
            "softmax_cross_entropy, sigmoid_binary_cross_entropy or l2",
            ParamValidators.inArray(
                new String[] {"softmax_cross_entropy", "sigmoid_binary_cross_entropy", "l2"}));
    checkpointDir =
        new Param<>(this, "checkpointDir", "checkpoint directory (any Hadoop FS; empty: none)");
    stagingDir =
        new Param<>(
            this,
            "stagingDir",
            "where a DataFrame that is not a file scan is staged, on a file system every executor reads (empty:"
                + " under checkpointDir when that is on a shared file system, else the temp dir: local master only)");
    seed = new LongParam(this, "seed", "random seed");
    shuffleBuffer =
        new IntParam(
            this,
            "shuffleBuffer",
            "records in the shuffle buffer (0: no shuffling)",
            ParamValidators.gtEq(0));
    useGpus =
        new BooleanParam(
            this,
            "useGpus",
            "train on the GPUs Spark assigns each task (needs spark.task.resource.gpu.amount and CUDA natives)");
    setDefault(useGpus, false);
    deterministic =
        new BooleanParam(
            this,
            "deterministic",
            "reproducible batch order (tf.data deterministic); false with shuffleBuffer 0: readers make whole"
                + " batches and hand them on as they are ready (faster)");
    setDefault(deterministic, true);
    imageTransfer =
        new Param<>(
            this,
            "imageTransfer",
            "uint8, float32 or auto: how image features cross to the device (uint8: one byte per"
                + " pixel, scaled, augmented and normalized there; auto: uint8 on GPUs, float32 on"
                + " CPUs)",
            ParamValidators.inArray(new String[] {"auto", "uint8", "float32"}));
    setDefault(imageTransfer, "auto");
    ringTransport =
        new Param<>(
            this,
            "ringTransport",
            "auto (same-host ring neighbours exchange gradients through shared memory, others over TCP) or tcp",
            ParamValidators.inArray(new String[] {"auto", "tcp"}));
    setDefault(ringTransport, "auto");
    bucketMb =
        new DoubleParam(
            this,
            "bucketMb",
            "gradient bucket size in MiB: one all-reduce each, started while backward goes on",
            ParamValidators.gt(0));
    setDefault(bucketMb, DistributedTrainer.DEFAULT_BUCKET_BYTES / (double) (1 << 20));
    overlap =
        new BooleanParam(
            this,
            "overlap",
            "all-reduce gradient buckets while backward goes on (false: after the whole backward)");
    setDefault(overlap, true);
    optimizerPlacement =
        new Param<>(
            this,
            "optimizerPlacement",
            "where parameters and optimizer state live: auto (device on GPUs, the faster one on CPU), device or host",
            ParamValidators.inArray(new String[] {"auto", "device", "host"}));
    setDefault(optimizerPlacement, "auto");
    precision =
        new Param<>(
            this,
            "precision",
            "arithmetic of forward and backward: fp32, or bf16 (mixed precision on a bfloat16 copy of"
                + " the float32 master weights)",
            ParamValidators.inArray(new String[] {"fp32", "bf16"}));
    setDefault(precision, "fp32");
    transform =
        new TransformParam(
            this,
            "transform",
            "a per-example map of the training data (augmentation):"
                + " a serializable dev.sparktrainer.data.ExampleTransform, e.g. ImageAugment.parse(\"flip,crop:4\","
                + " Layout.CHW).withImageShape(3, 32, 32).training(); never applied to transform's input (no default)");
    normalize =
        new Param<>(
            this,
            "normalize",
            "feature normalization fitted on the training data and saved with the model: standard ((x - mean) / std),"
                + " minmax ((x - min) / (max - min)) or none",
            ParamValidators.inArray(new String[] {"none", "standard", "minmax"}));
    setDefault(normalize, "none");
    setDefault(featuresCol, "features");
    setDefault(labelCol, "label");
    setDefault(predictionCol, "prediction");
    setDefault(probabilityCol, "probability");
    setDefault(rawPredictionCol, "rawPrediction");
    setDefault(numWorkers, 2);
    setDefault(batchSize, 32);
    setDefault(inferenceBatchSize, 256);
    setDefault(epochs, 10);
    setDefault(learningRate, 1e-3);
    setDefault(optimizer, "adam");
    setDefault(modelSpec, "mlp:128");
    setDefault(activation, "relu");
    setDefault(dropout, 0.0);
    setDefault(numClasses, 0);
    setDefault(loss, "softmax_cross_entropy");
    setDefault(checkpointDir, "");
    setDefault(stagingDir, "");
    setDefault(seed, 0L);
    setDefault(shuffleBuffer, 10000);
  }

  @Override
  public String uid() {
    return uid;
  }

  // ---- Params (Spark ML discovers them through these public methods) ----
  public Param<String> featuresCol() {
    return featuresCol;
  }

  public Param<String> labelCol() {
    return labelCol;
  }

  public Param<String> predictionCol() {
    return predictionCol;
  }

  public Param<String> probabilityCol() {
    return probabilityCol;
  }

  public Param<String> rawPredictionCol() {
    return rawPredictionCol;
  }

  public IntParam numWorkers() {
    return numWorkers;
  }

  public IntParam batchSize() {
    return batchSize;
  }

  public IntParam inferenceBatchSize() {
    return inferenceBatchSize;
  }

  public IntParam epochs() {
    return epochs;
  }

  public DoubleParam learningRate() {
    return learningRate;
  }

  public Param<String> optimizer() {
    return optimizer;
  }

  public Param<String> modelSpec() {
    return modelSpec;
  }

  public Param<String> activation() {
    return activation;
  }

  public DoubleParam dropout() {
    return dropout;
  }

  public IntParam numClasses() {
    return numClasses;
  }

  public Param<String> loss() {
    return loss;
  }

  public Param<String> checkpointDir() {
    return checkpointDir;
  }

  public Param<String> stagingDir() {
    return stagingDir;
  }

  public LongParam seed() {
    return seed;
  }

  public IntParam shuffleBuffer() {
    return shuffleBuffer;
  }

  public BooleanParam useGpus() {
    return useGpus;
  }

  public BooleanParam deterministic() {
    return deterministic;
  }

  public Param<String> imageTransfer() {
    return imageTransfer;
  }

  public Param<String> ringTransport() {
    return ringTransport;
  }

  public DoubleParam bucketMb() {
    return bucketMb;
  }

  public BooleanParam overlap() {
    return overlap;
  }

  public IntParam accumulateSteps() {
    return accumulateSteps;
  }

  public Param<String> rescale() {
    return rescale;
  }

  public IntParam minWorkers() {
    return minWorkers;
  }

  public Param<String> optimizerPlacement() {
    return optimizerPlacement;
  }

  public Param<String> precision() {
    return precision;
  }

  public Param<ExampleTransform> transform() {
    return transform;
  }

  public Param<String> normalize() {
    return normalize;
  }

  public SparkTrainerEstimator setFeaturesCol(String v) {
    set(featuresCol, v);
    return this;
  }

  public SparkTrainerEstimator setLabelCol(String v) {
    set(labelCol, v);
    return this;
  }

  public SparkTrainerEstimator setPredictionCol(String v) {
    set(predictionCol, v);
    return this;
  }

  public SparkTrainerEstimator setProbabilityCol(String v) {
    set(probabilityCol, v);
    return this;
  }

  public SparkTrainerEstimator setRawPredictionCol(String v) {
    set(rawPredictionCol, v);
    return this;
  }

  public SparkTrainerEstimator setNumWorkers(int v) {
    set(numWorkers, v);
    return this;
  }

  public SparkTrainerEstimator setBatchSize(int v) {
    set(batchSize, v);
    return this;
  }

  public SparkTrainerEstimator setInferenceBatchSize(int v) {
    set(inferenceBatchSize, v);
    return this;
  }

  public SparkTrainerEstimator setEpochs(int v) {
    set(epochs, v);
    return this;
  }

  public SparkTrainerEstimator setLearningRate(double v) {
    set(learningRate, v);
    return this;
  }

  public SparkTrainerEstimator setOptimizer(String v) {
    set(optimizer, v);
    return this;
  }

  public SparkTrainerEstimator setModelSpec(String v) {
    set(modelSpec, v);
    return this;
  }

  public SparkTrainerEstimator setActivation(String v) {
    set(activation, v);
    return this;
  }

  public SparkTrainerEstimator setDropout(double v) {
    set(dropout, v);
    return this;
  }

  public SparkTrainerEstimator setNumClasses(int v) {
    set(numClasses, v);
    return this;
  }

  public SparkTrainerEstimator setLoss(String v) {
    set(loss, v);
    return this;
  }

  public SparkTrainerEstimator setCheckpointDir(String v) {
    set(checkpointDir, v);
    return this;
  }

  public SparkTrainerEstimator setStagingDir(String v) {
    set(stagingDir, v);
    return this;
  }

  public SparkTrainerEstimator setSeed(long v) {
    set(seed, v);
    return this;
  }

  public SparkTrainerEstimator setShuffleBuffer(int v) {
    set(shuffleBuffer, v);
    return this;
  }

  public SparkTrainerEstimator setUseGpus(boolean v) {
    set(useGpus, v);
    return this;
  }

  public SparkTrainerEstimator setDeterministic(boolean v) {
    set(deterministic, v);
    return this;
  }

  /**
   * uint8, float32 or auto (see {@code --image-transfer}).
   *
   * @throws IllegalArgumentException naming the option and its allowed values
   */
  public SparkTrainerEstimator setImageTransfer(String v) {
    set(
        imageTransfer,
        PipelineOptions.ImageTransfer.parse(v).name().toLowerCase(java.util.Locale.ROOT));
    return this;
  }

  public SparkTrainerEstimator setRingTransport(String v) {
    set(ringTransport, v);
    return this;
  }

  public SparkTrainerEstimator setBucketMb(double v) {
    set(bucketMb, v);
    return this;
  }

  public SparkTrainerEstimator setOverlap(boolean v) {
    set(overlap, v);
    return this;
  }

  public SparkTrainerEstimator setAccumulateSteps(int v) {
    set(accumulateSteps, v);
    return this;
  }

  public SparkTrainerEstimator setRescale(String v) {
    set(rescale, v);
    return this;
  }

  public SparkTrainerEstimator setMinWorkers(int v) {
    set(minWorkers, v);
    return this;
  }

  public SparkTrainerEstimator setOptimizerPlacement(String v) {
    set(optimizerPlacement, v);
    return this;
  }

  /**
   * {@code fp32} (default) or {@code bf16}: see {@link DistributedTrainer.Builder#optPrecision}. A
   * bad value fails here, naming the allowed ones.
   */
  public SparkTrainerEstimator setPrecision(String v) {
    set(precision, Precision.parse("precision", v).name().toLowerCase(java.util.Locale.ROOT));
    return this;
  }

  /** Augmentation of the training data: see {@link DistributedTrainer.Builder#optTransform}. */
  public SparkTrainerEstimator setTransform(ExampleTransform v) {
    set(transform, v);
    return this;
  }

  public SparkTrainerEstimator setNormalize(String v) {
    set(normalize, v);
    return this;
  }

  @Override
  public SparkTrainerModel fit(Dataset<?> dataset) {
    Dataset<Row> df = dataset.toDF();
    transformSchema(df.schema());
    String features = getOrDefault(featuresCol);
    String label = getOrDefault(labelCol);
    LossSpec lossSpec = LossSpec.parse(getOrDefault(loss));
    long[] shape = {featureSize(df, features)};
    int outputs = lossSpec == LossSpec.SOFTMAX_CROSS_ENTROPY ? classes(df, label) : 1;
    ModelSpec spec =
        SpecStrings.model(
            getOrDefault(modelSpec),
            new long[][] {shape},
            outputs,
            Activation.parse(getOrDefault(activation)),
            (float) doubleParam(dropout));
    DatasetSpec columns =
        DatasetSpec.builder()
            .addPath("dataframe")
            .addFeature(features, shape)
            .setLabel(
                label,
                lossSpec == LossSpec.SOFTMAX_CROSS_ENTROPY
                    ? DatasetSpec.LabelType.INT
                    : DatasetSpec.LabelType.FLOAT)
            .build();
    long seedValue = ((Number) getOrDefault(seed)).longValue();
    PipelineOptions options =
        PipelineOptions.builder()
            .optBatchSize(intParam(batchSize))
            .optShuffleBuffer(intParam(shuffleBuffer))
            .optSeed(seedValue)
            .optDeterministic((Boolean) getOrDefault(deterministic))
            .optImageTransfer(getOrDefault(imageTransfer))
            .build();
    DistributedTrainer.Builder b =
        DistributedTrainer.builder()
            .setModel(spec)
            .setLoss(lossSpec)
            .setOptimizer(
                SpecStrings.optimizer(
                    getOrDefault(optimizer), (float) doubleParam(learningRate), 0.9f, 0f, 0, 0))
            .setTrainingData(df, columns, options)
            .setNumWorkers(intParam(numWorkers))
            .optEpochs(intParam(epochs))
            .optSeed(seedValue)
            .optUseGpus((Boolean) getOrDefault(useGpus))
            .optRingSharedMemory(getOrDefault(ringTransport).equals("auto"))
            .optFusionBucketBytes(DistributedTrainer.bucketBytes((Double) getOrDefault(bucketMb)))
            .optOverlap((Boolean) getOrDefault(overlap))
            .optAccumulateSteps(intParam(accumulateSteps))
            .optRescale(Rescale.parse("rescale", getOrDefault(rescale)))
            .optMinWorkers(intParam(minWorkers))
            .optOptimizerPlacement(
                OptimizerPlacement.parse("optimizerPlacement", getOrDefault(optimizerPlacement)))
            .optPrecision(Precision.parse("precision", getOrDefault(precision)))
            .optNormalize(Normalization.Mode.parse(getOrDefault(normalize)));
    if (isDefined(transform)) {
      b.optTransform(getOrDefault(transform));
    }
    if (!getOrDefault(checkpointDir).isEmpty()) {
      b.optCheckpointDir(getOrDefault(checkpointDir));
    }
    if (!getOrDefault(stagingDir).isEmpty()) {
      b.optStagingDir(getOrDefault(stagingDir));
    }
    TrainedModel trained = b.build().fit(df.sparkSession());
    SparkTrainerModel model = new SparkTrainerModel(uid, trained);
    copyValues(model, extractParamMap());
    model.setParent(this);
    return model;
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
    int k = intParam(numClasses);
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
    String features = getOrDefault(featuresCol);
    String label = getOrDefault(labelCol);
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
    StructType out = schema.add(getOrDefault(predictionCol), DataTypes.DoubleType, false);
    if (!getOrDefault(probabilityCol).isEmpty()) {
      out = out.add(getOrDefault(probabilityCol), SQLDataTypes.VectorType(), true);
    }
    if (!getOrDefault(rawPredictionCol).isEmpty()) {
      out = out.add(getOrDefault(rawPredictionCol), SQLDataTypes.VectorType(), true);
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

  private double doubleParam(DoubleParam p) {
    Object v = getOrDefault(p);
    return ((Number) v).doubleValue();
  }
}
