package dev.sparktrainer.ml;

import dev.sparktrainer.data.ExampleTransform;
import dev.sparktrainer.model.SpecStrings;
import dev.sparktrainer.train.TrainerOption;
import java.io.Serializable;
import org.apache.spark.ml.param.BooleanParam;
import org.apache.spark.ml.param.DoubleParam;
import org.apache.spark.ml.param.IntArrayParam;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.LongParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamValidators;
import org.apache.spark.ml.param.Params;

/**
 * The training Params of {@link SparkTrainerEstimator}, each defined once (name, doc, validator,
 * default) and named as in the option table ({@link TrainerOption}), whose allowed values the
 * validators use. As {@link SharedParams}: the Param objects live in a {@link Holder} the Estimator
 * makes in its constructor, and Spark ML finds them through the accessors below.
 */
public interface TrainingParams extends Params {
  /**
   * This stage's training Param objects, made once in its constructor ({@code new Holder(this)}).
   */
  Holder trainingParams();

  default Param<String> labelCol() {
    return trainingParams().labelCol;
  }

  default IntParam numWorkers() {
    return trainingParams().numWorkers;
  }

  default IntParam batchSize() {
    return trainingParams().batchSize;
  }

  default IntParam epochs() {
    return trainingParams().epochs;
  }

  default DoubleParam learningRate() {
    return trainingParams().learningRate;
  }

  default Param<String> optimizer() {
    return trainingParams().optimizer;
  }

  default Param<String> modelSpec() {
    return trainingParams().modelSpec;
  }

  default Param<String> activation() {
    return trainingParams().activation;
  }

  default DoubleParam dropout() {
    return trainingParams().dropout;
  }

  default IntParam numClasses() {
    return trainingParams().numClasses;
  }

  default Param<String> loss() {
    return trainingParams().loss;
  }

  default Param<String> checkpointDir() {
    return trainingParams().checkpointDir;
  }

  default Param<String> stagingDir() {
    return trainingParams().stagingDir;
  }

  default LongParam seed() {
    return trainingParams().seed;
  }

  default IntParam shuffleBuffer() {
    return trainingParams().shuffleBuffer;
  }

  default BooleanParam useGpus() {
    return trainingParams().useGpus;
  }

  default BooleanParam deterministic() {
    return trainingParams().deterministic;
  }

  default Param<String> imageTransfer() {
    return trainingParams().imageTransfer;
  }

  default Param<String> ringTransport() {
    return trainingParams().ringTransport;
  }

  default DoubleParam bucketMb() {
    return trainingParams().bucketMb;
  }

  default BooleanParam overlap() {
    return trainingParams().overlap;
  }

  default IntParam accumulateSteps() {
    return trainingParams().accumulateSteps;
  }

  default Param<String> rescale() {
    return trainingParams().rescale;
  }

  default IntParam minWorkers() {
    return trainingParams().minWorkers;
  }

  default Param<String> optimizerPlacement() {
    return trainingParams().optimizerPlacement;
  }

  default Param<String> precision() {
    return trainingParams().precision;
  }

  default Param<ExampleTransform> transform() {
    return trainingParams().transform;
  }

  default Param<String> normalize() {
    return trainingParams().normalize;
  }

  default BooleanParam grow() {
    return trainingParams().grow;
  }

  default LongParam slotWait() {
    return trainingParams().slotWait;
  }

  default Param<String> gradientPrecision() {
    return trainingParams().gradientPrecision;
  }

  default LongParam checkpointEverySteps() {
    return trainingParams().checkpointEverySteps;
  }

  default IntParam keepCheckpoints() {
    return trainingParams().keepCheckpoints;
  }

  default LongParam collectiveTimeout() {
    return trainingParams().collectiveTimeout;
  }

  default DoubleParam momentum() {
    return trainingParams().momentum;
  }

  default DoubleParam weightDecay() {
    return trainingParams().weightDecay;
  }

  default LongParam warmupSteps() {
    return trainingParams().warmupSteps;
  }

  default LongParam cosineDecaySteps() {
    return trainingParams().cosineDecaySteps;
  }

  default Param<String> sharding() {
    return trainingParams().sharding;
  }

  default Param<String> cacheDir() {
    return trainingParams().cacheDir;
  }

  default IntParam maxLength() {
    return trainingParams().maxLength;
  }

  default LongParam vocabSize() {
    return trainingParams().vocabSize;
  }

  default DoubleParam padValue() {
    return trainingParams().padValue;
  }

  default IntArrayParam bucketBoundaries() {
    return trainingParams().bucketBoundaries;
  }

  /** The training Param objects of one Estimator, owned by it (their parent is its uid). */
  final class Holder implements Serializable {
    private static final long serialVersionUID = 1L;

    final Param<String> labelCol;
    final IntParam numWorkers;
    final IntParam batchSize;
    final IntParam accumulateSteps;
    final Param<String> rescale;
    final IntParam minWorkers;
    final BooleanParam grow;
    final LongParam slotWait;
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
    final Param<String> gradientPrecision;
    final LongParam checkpointEverySteps;
    final IntParam keepCheckpoints;
    final LongParam collectiveTimeout;
    final DoubleParam momentum;
    final DoubleParam weightDecay;
    final LongParam warmupSteps;
    final LongParam cosineDecaySteps;
    final Param<String> sharding;
    final Param<String> cacheDir;
    final IntParam maxLength;
    final LongParam vocabSize;
    final DoubleParam padValue;
    final IntArrayParam bucketBoundaries;

    /** Defines the Params for {@code owner} (whose uid is set) and sets their defaults there. */
    Holder(TrainingParams owner) {
      labelCol =
          new Param<>(owner, "labelCol", "label column: class index (or a number for the l2 loss)");
      numWorkers =
          new IntParam(
              owner,
              "numWorkers",
              "number of workers (barrier tasks, one replica each)",
              ParamValidators.gtEq(1));
      batchSize =
          new IntParam(
              owner,
              "batchSize",
              "per-worker batch size (global batch = batchSize x numWorkers)",
              ParamValidators.gtEq(1));
      accumulateSteps =
          new IntParam(
              owner,
              "accumulateSteps",
              "batches per optimizer step, gradients summed locally"
                  + " and all-reduced once (global batch = batchSize x accumulateSteps x numWorkers)",
              ParamValidators.gtEq(1));
      owner.setDefault(accumulateSteps, TrainerOption.ACCUMULATE_STEPS.intDefault());
      rescale =
          new Param<>(
              owner,
              "rescale",
              "resuming a checkpoint of another worker count: batch (keep the global"
                  + " batch) or lr (keep batchSize, scale the learning rate)",
              ParamValidators.inArray(TrainerOption.RESCALE.choiceArray()));
      owner.setDefault(rescale, TrainerOption.RESCALE.stringDefault());
      minWorkers =
          new IntParam(
              owner,
              "minWorkers",
              "elastic training: the fewest workers to go on with when executors"
                  + " are lost for good (0: numWorkers, never fewer)",
              ParamValidators.gtEq(0));
      owner.setDefault(minWorkers, TrainerOption.MIN_WORKERS.intDefault());
      grow =
          new BooleanParam(
              owner,
              "grow",
              "with minWorkers: after going on with fewer workers, grow back toward numWorkers at an"
                  + " epoch end when the cluster offers more slots again");
      owner.setDefault(grow, TrainerOption.GROW.booleanDefault());
      slotWait =
          new LongParam(
              owner,
              "slotWait",
              "seconds to wait for the cluster to offer the workers' slots, at the start and when"
                  + " executors are lost",
              ParamValidators.gtEq(0));
      owner.setDefault(slotWait, TrainerOption.SLOT_WAIT.longDefault());
      epochs = new IntParam(owner, "epochs", "number of epochs", ParamValidators.gtEq(1));
      learningRate =
          new DoubleParam(owner, "learningRate", "base learning rate", ParamValidators.gt(0));
      optimizer =
          new Param<>(
              owner,
              "optimizer",
              "adam, adamw or sgd",
              ParamValidators.inArray(TrainerOption.OPTIMIZER.choiceArray()));
      modelSpec = new Param<>(owner, "modelSpec", "the model: " + SpecStrings.MODEL_FORMS);
      activation =
          new Param<>(
              owner,
              "activation",
              "activation of the MLP's hidden layers: relu, tanh, sigmoid or gelu",
              ParamValidators.inArray(TrainerOption.ACTIVATION.choiceArray()));
      dropout =
          new DoubleParam(
              owner,
              "dropout",
              "dropout rate after hidden layers (0: none)",
              ParamValidators.inRange(0, 1, true, false));
      numClasses =
          new IntParam(
              owner,
              "numClasses",
              "number of classes (0: from the label column)",
              ParamValidators.gtEq(0));
      loss =
          new Param<>(
              owner,
              "loss",
              "softmax_cross_entropy, sigmoid_binary_cross_entropy or l2",
              ParamValidators.inArray(TrainerOption.LOSS.choiceArray()));
      checkpointDir =
          new Param<>(owner, "checkpointDir", "checkpoint directory (any Hadoop FS; empty: none)");
      stagingDir =
          new Param<>(
              owner,
              "stagingDir",
              "where a DataFrame that is not a file scan is staged, on a file system every executor reads (empty:"
                  + " under checkpointDir when that is on a shared file system, else the temp dir: local master only)");
      seed = new LongParam(owner, "seed", "random seed");
      shuffleBuffer =
          new IntParam(
              owner,
              "shuffleBuffer",
              "records in the shuffle buffer (0: no shuffling)",
              ParamValidators.gtEq(0));
      useGpus =
          new BooleanParam(
              owner,
              "useGpus",
              "train on the GPUs Spark assigns each task (needs spark.task.resource.gpu.amount and CUDA natives)");
      owner.setDefault(useGpus, TrainerOption.GPUS.booleanDefault());
      deterministic =
          new BooleanParam(
              owner,
              "deterministic",
              "reproducible batch order (tf.data deterministic); false with shuffleBuffer 0: readers make whole"
                  + " batches and hand them on as they are ready (faster)");
      owner.setDefault(deterministic, TrainerOption.DETERMINISTIC.booleanDefault());
      imageTransfer =
          new Param<>(
              owner,
              "imageTransfer",
              "uint8, float32 or auto: how image features cross to the device (uint8: one byte per"
                  + " pixel, scaled, augmented and normalized there; auto: uint8 on GPUs, float32 on"
                  + " CPUs)",
              ParamValidators.inArray(TrainerOption.IMAGE_TRANSFER.choiceArray()));
      owner.setDefault(imageTransfer, TrainerOption.IMAGE_TRANSFER.stringDefault());
      ringTransport =
          new Param<>(
              owner,
              "ringTransport",
              "auto (same-host ring neighbours exchange gradients through shared memory, others over TCP) or tcp",
              ParamValidators.inArray(TrainerOption.RING_TRANSPORT.choiceArray()));
      owner.setDefault(ringTransport, TrainerOption.RING_TRANSPORT.stringDefault());
      bucketMb =
          new DoubleParam(
              owner,
              "bucketMb",
              "gradient bucket size in MiB: one all-reduce each, started while backward goes on",
              ParamValidators.gt(0));
      owner.setDefault(bucketMb, TrainerOption.BUCKET_MB.doubleDefault());
      overlap =
          new BooleanParam(
              owner,
              "overlap",
              "all-reduce gradient buckets while backward goes on (false: after the whole backward)");
      owner.setDefault(overlap, TrainerOption.OVERLAP.booleanDefault());
      optimizerPlacement =
          new Param<>(
              owner,
              "optimizerPlacement",
              "where parameters and optimizer state live: auto (device on GPUs, the faster one on CPU), device or host",
              ParamValidators.inArray(TrainerOption.OPTIMIZER_PLACEMENT.choiceArray()));
      owner.setDefault(optimizerPlacement, TrainerOption.OPTIMIZER_PLACEMENT.stringDefault());
      precision =
          new Param<>(
              owner,
              "precision",
              "arithmetic of forward and backward: fp32, or bf16 (mixed precision on a bfloat16 copy of"
                  + " the float32 master weights)",
              ParamValidators.inArray(TrainerOption.PRECISION.choiceArray()));
      owner.setDefault(precision, TrainerOption.PRECISION.stringDefault());
      transform =
          new TransformParam(
              owner,
              "transform",
              "a per-example map of the training data (augmentation):"
                  + " a serializable dev.sparktrainer.data.ExampleTransform, e.g. ImageAugment.parse(\"flip,crop:4\","
                  + " Layout.CHW).withImageShape(3, 32, 32).training(); never applied to transform's input (no default)");
      normalize =
          new Param<>(
              owner,
              "normalize",
              "feature normalization fitted on the training data and saved with the model: standard ((x - mean) / std),"
                  + " minmax ((x - min) / (max - min)) or none",
              ParamValidators.inArray(TrainerOption.NORMALIZE.choiceArray()));
      owner.setDefault(normalize, TrainerOption.NORMALIZE.stringDefault());
      gradientPrecision =
          new Param<>(
              owner,
              "gradientPrecision",
              "gradients on the wire: fp32, or bf16 (half the all-reduce bytes)",
              ParamValidators.inArray(TrainerOption.GRADIENT_PRECISION.choiceArray()));
      owner.setDefault(gradientPrecision, TrainerOption.GRADIENT_PRECISION.stringDefault());
      checkpointEverySteps =
          new LongParam(
              owner,
              "checkpointEverySteps",
              "with checkpointDir: also checkpoint every this many steps (0: at epoch ends)",
              ParamValidators.gtEq(0));
      owner.setDefault(checkpointEverySteps, TrainerOption.CHECKPOINT_EVERY_STEPS.longDefault());
      keepCheckpoints =
          new IntParam(
              owner, "keepCheckpoints", "how many checkpoints to keep", ParamValidators.gtEq(1));
      owner.setDefault(keepCheckpoints, TrainerOption.KEEP_CHECKPOINTS.intDefault());
      collectiveTimeout =
          new LongParam(
              owner,
              "collectiveTimeout",
              "seconds: deadline of each ring operation (a worker that stops responding fails the"
                  + " stage after this long)",
              ParamValidators.gtEq(1));
      owner.setDefault(collectiveTimeout, TrainerOption.COLLECTIVE_TIMEOUT.longDefault());
      momentum = new DoubleParam(owner, "momentum", "SGD momentum", ParamValidators.gtEq(0));
      owner.setDefault(momentum, TrainerOption.MOMENTUM.doubleDefault());
      weightDecay =
          new DoubleParam(
              owner,
              "weightDecay",
              "weight decay; AdamW's is decoupled (0: the optimizer's own, none for adam and sgd,"
                  + " 0.01 for adamw)",
              ParamValidators.gtEq(0));
      owner.setDefault(weightDecay, TrainerOption.WEIGHT_DECAY.doubleDefault());
      warmupSteps =
          new LongParam(
              owner, "warmupSteps", "linear learning-rate warm-up steps", ParamValidators.gtEq(0));
      owner.setDefault(warmupSteps, TrainerOption.WARMUP_STEPS.longDefault());
      cosineDecaySteps =
          new LongParam(
              owner,
              "cosineDecaySteps",
              "cosine decay of the learning rate to 0 over these steps after warm-up (0: constant)",
              ParamValidators.gtEq(0));
      owner.setDefault(cosineDecaySteps, TrainerOption.COSINE_DECAY_STEPS.longDefault());
      sharding =
          new Param<>(
              owner,
              "sharding",
              "how records are dealt to workers: auto, file or data",
              ParamValidators.inArray(TrainerOption.SHARDING.choiceArray()));
      owner.setDefault(sharding, TrainerOption.SHARDING.stringDefault());
      cacheDir =
          new Param<>(
              owner,
              "cacheDir",
              "local directory caching decoded records after the first epoch (empty: none)");
      // Sequence models: unset maxLength and vocabSize come from the data (no default).
      maxLength =
          new IntParam(
              owner,
              "maxLength",
              "sequence models (embed, transformer): the longest sequence fed to the model; longer"
                  + " ones are truncated and counted (unset: the longest in the training data)",
              ParamValidators.gtEq(1));
      vocabSize =
          new LongParam(
              owner,
              "vocabSize",
              "sequence models: ids must be 0..vocabSize-1 (unset: the largest id in the training"
                  + " data + 1)",
              ParamValidators.gtEq(2));
      padValue =
          new DoubleParam(
              owner,
              "padValue",
              "sequence models: what pads a sequence to its batch's longest (a mask beside it says"
                  + " which positions are real)");
      owner.setDefault(padValue, TrainerOption.PAD_VALUE.doubleDefault());
      bucketBoundaries =
          new IntArrayParam(
              owner,
              "bucketBoundaries",
              "sequence models: batch sequences of similar length together (tf.data's"
                  + " bucket_by_sequence_length): lengths below L1, L1..L2-1, ..., and the rest; e.g."
                  + " [16, 32, 64, 128] (unset: one bucket)");
      // The table's "none" (null) is the empty string in the Estimator's text Params.
      owner.setDefault(cacheDir, "");
      owner.setDefault(labelCol, TrainerOption.LABEL.stringDefault());
      owner.setDefault(numWorkers, TrainerOption.WORKERS.intDefault());
      owner.setDefault(batchSize, TrainerOption.BATCH_SIZE.intDefault());
      owner.setDefault(epochs, TrainerOption.EPOCHS.intDefault());
      owner.setDefault(learningRate, TrainerOption.LEARNING_RATE.doubleDefault());
      owner.setDefault(optimizer, TrainerOption.OPTIMIZER.stringDefault());
      owner.setDefault(modelSpec, TrainerOption.MODEL.stringDefault());
      owner.setDefault(activation, TrainerOption.ACTIVATION.stringDefault());
      owner.setDefault(dropout, TrainerOption.DROPOUT.doubleDefault());
      owner.setDefault(numClasses, TrainerOption.NUM_CLASSES.intDefault());
      owner.setDefault(loss, TrainerOption.LOSS.stringDefault());
      owner.setDefault(checkpointDir, "");
      owner.setDefault(stagingDir, "");
      owner.setDefault(seed, TrainerOption.SEED.longDefault());
      owner.setDefault(shuffleBuffer, TrainerOption.SHUFFLE_BUFFER.intDefault());
    }
  }
}
