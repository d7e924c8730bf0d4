package dev.sparktrainer.cli;

import dev.sparktrainer.cli.Flags.Kind;
import dev.sparktrainer.ml.BatchInference;
import dev.sparktrainer.model.LossSpec;
import dev.sparktrainer.monitor.Json;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/** {@code evaluate}: loss and accuracy of a saved model on labelled data, as JSON on stdout. */
final class EvaluateCommand extends ModelCommand {
  EvaluateCommand() {
    super(
        "evaluate",
        "--model DIR/model --data PATH [options]",
        "Evaluates a trained model on labelled data with distributed batch inference and prints the metrics\n"
            + "as JSON: {\"loss\": ..., \"accuracy\": ..., \"count\": ...} (the model's training loss; for l2 also\n"
            + "\"mse\", \"mae\" and \"r2\", accuracy null). A model trained with --normalize normalizes the data first.");
  }

  @Override
  void define(Flags f) {
    defineCommon(f);
    f.add(
        "label",
        Kind.STRING,
        "COL",
        null,
        "label column (default: the one the model was trained on)");
    f.add("output", Kind.STRING, "FILE", null, "also write the JSON to FILE (any Hadoop FS)");
  }

  @Override
  int run(Flags f, CliContext ctx) throws Exception {
    Input in = load(f, ctx);
    String label =
        f.given("label") ? f.string("label") : in.inputs() == null ? null : in.inputs().label();
    if (label == null) {
      throw new CliException(
          "Missing --label for evaluate: the model does not record its label column");
    }
    LossSpec loss = in.model().loss();
    int classes = loss == LossSpec.SOFTMAX_CROSS_ENTROPY ? Math.toIntExact(outputs(in)) : 0;
    DataChecks.label(
        in.data(),
        label,
        classes,
        loss == LossSpec.SIGMOID_BINARY_CROSS_ENTROPY,
        in.where(),
        true,
        ctx.err);
    in.data()
        .sparkSession()
        .sparkContext()
        .setJobDescription("spark-trainer: evaluate " + f.string("model"));
    Map<String, Double> m =
        BatchInference.evaluate(
            in.data(),
            in.model(),
            in.features(),
            label,
            f.integer("batch-size"),
            in.inputMap(),
            in.inputs() == null ? null : in.inputs().shapes());
    Map<String, Object> json = new LinkedHashMap<>();
    json.put("loss", m.get("loss"));
    json.put("accuracy", m.get("accuracy"));
    json.put("count", m.get("count").longValue());
    if (loss == LossSpec.L2) {
      json.put("mse", m.get("mse"));
      json.put("mae", m.get("mae"));
      json.put("r2", m.get("r2"));
    }
    json.put("model", f.string("model"));
    json.put("data", in.where());
    String text = Json.value(json);
    ctx.out.println(text);
    if (f.given("output")) {
      TrainCommand.write(
          f.string("output"),
          (text + "\n").getBytes(StandardCharsets.UTF_8),
          ctx.spark().sparkContext().hadoopConfiguration());
    }
    return 0;
  }

  private static long outputs(Input in) {
    // The number of classes is the model's output size: build nothing, read it from the spec.
    Map<String, String> p = in.model().spec().toProperties();
    String o = p.get("outputs");
    if (o == null) {
      throw new CliException(
          "Cannot evaluate a model of type "
              + p.get("type")
              + ": its number of outputs is unknown");
    }
    return Long.parseLong(o);
  }
}
