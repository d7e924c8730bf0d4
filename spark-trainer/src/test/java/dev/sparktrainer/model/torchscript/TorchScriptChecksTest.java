package dev.sparktrainer.model.torchscript;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.SpecStrings;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every bad TorchScript input is refused before training, on the driver, with a message that names
 * the file and what is wrong (the column and the argument where they differ); never a native crash.
 */
class TorchScriptChecksTest {
  @TempDir Path tmp;

  static String path(String name) {
    return "src/test/resources/torchscript/" + name;
  }

  static byte[] bytes(String name) throws IOException {
    return Files.readAllBytes(Path.of(path(name)));
  }

  @Test
  void readsTheExportHelpersDescription() {
    TorchScriptSpec spec = TorchScriptSpec.of(path("two_input.pt"));
    assertThat(spec.inputShapes()).containsExactly(new Shape(12), new Shape(3));
    TorchScriptFile.Metadata meta = spec.file().metadata();
    assertThat(meta.method()).isEqualTo("script");
    assertThat(meta.inputs()).extracting(TorchScriptFile.Input::name).containsExactly("a", "b");
    assertThat(TorchScriptSpec.of(path("cnn_bn.pt")).file().metadata().buffers())
        .containsExactly("bn.running_mean", "bn.running_var", "bn.num_batches_tracked");
  }

  @Test
  void aTorchSaveFileIsNotTorchScript() {
    assertThatThrownBy(() -> TorchScriptSpec.of(path("state_dict.pt")))
        .hasMessage(
            "Invalid model torchscript:"
                + path("state_dict.pt")
                + ": not a TorchScript file: the archive has pickled data but no compiled code: it"
                + " was written by torch.save (a state_dict or a pickled nn.Module), not by"
                + " torch.jit.save. Write it with torch.jit.save of a scripted or traced module,"
                + " e.g. with python/export_torchscript.py");
  }

  @Test
  void bytesThatAreNoZipArchiveAreNotTorchScript() throws IOException {
    Path f = tmp.resolve("model.pt");
    Files.writeString(f, "def forward(self, x): return x\n");
    assertThatThrownBy(() -> TorchScriptSpec.of(f.toString()))
        .hasMessage(
            "Invalid model torchscript:"
                + f
                + ": not a TorchScript file: it is not a zip archive (no end of central directory"
                + " record). Write it with torch.jit.save of a scripted or traced module, e.g. with"
                + " python/export_torchscript.py");
  }

  @Test
  void aMissingFileIsNamed() {
    assertThatThrownBy(() -> TorchScriptSpec.of(tmp.resolve("none.pt").toString()))
        .hasMessage("Invalid model torchscript:" + tmp.resolve("none.pt") + ": no such file");
  }

  @Test
  void aFileFromANewerTorchIsRefusedBeforeLibtorchReadsIt() throws IOException {
    Path f = tmp.resolve("newer.pt");
    Files.write(f, rewrite(bytes("mlp.pt"), name -> name.endsWith("/version") ? "11\n" : null));
    assertThatThrownBy(() -> TorchScriptSpec.of(f.toString()))
        .hasMessage(
            "Invalid model torchscript:"
                + f
                + ": TorchScript file format version 11 was written by a newer PyTorch than the"
                + " executors' libtorch, which reads versions up to 10: export the model with the"
                + " PyTorch version of the executors' libtorch (or older)");
  }

  @Test
  void theInputsAreCheckedAgainstTheFeatureColumns() {
    TorchScriptSpec twoColumns = TorchScriptSpec.of(path("mlp.pt"), new Shape(20), new Shape(3));
    assertThatThrownBy(() -> twoColumns.check(List.of("pixels", "extra"), 5))
        .hasMessage(
            "Invalid model torchscript:"
                + path("mlp.pt")
                + ": its forward takes 1 input(s) (x) but there are 2 feature column(s) (pixels,"
                + " extra)");
    TorchScriptSpec wrongShape = TorchScriptSpec.of(path("mlp.pt"), new Shape(64));
    assertThatThrownBy(() -> wrongShape.check(List.of("pixels"), 5))
        .hasMessage(
            "Invalid model torchscript:"
                + path("mlp.pt")
                + ": argument 1 (x) of its forward was exported for examples shaped 20 but feature"
                + " column 'pixels' is shaped 64");
  }

  @Test
  void anInputOfAnotherDataTypeIsNamed() throws IOException {
    Path f = tmp.resolve("ids.pt");
    String ids = metadataOf("mlp.pt").replace("\"float32\"", "\"int64\"");
    Files.write(
        f, rewrite(bytes("mlp.pt"), name -> name.endsWith("extra/sparktrainer.json") ? ids : null));
    assertThatThrownBy(() -> TorchScriptSpec.of(f.toString()).check(List.of("pixels"), 5))
        .hasMessage(
            "Invalid model torchscript:"
                + f
                + ": argument 1 (x) of its forward is int64 but feature column 'pixels' is float32");
  }

  @Test
  void aForwardThatFailsOnTheColumnsNamesThem() {
    TorchScriptSpec plain = TorchScriptSpec.of(path("plain_mlp.pt"), new Shape(64));
    assertThatThrownBy(() -> plain.check(List.of("pixels"), 5))
        .hasMessageStartingWith(
            "Invalid model torchscript:"
                + path("plain_mlp.pt")
                + ": its forward fails on a batch of 2 examples shaped like the feature columns"
                + " (pixels: 64): ");
    TorchScriptSpec.of(path("plain_mlp.pt"), new Shape(20)).check(List.of("x"), 5);
  }

  @Test
  void aModuleWithoutShapesNeedsThem() {
    assertThatThrownBy(() -> TorchScriptSpec.of(path("plain_mlp.pt")))
        .hasMessage(
            "Invalid model torchscript:"
                + path("plain_mlp.pt")
                + ": the file does not record its inputs' shapes (it was not written by"
                + " python/export_torchscript.py): give them, TorchScriptSpec.of(path, new"
                + " Shape(...), ...)");
  }

  @Test
  void aModuleWithNothingToTrainIsRefused() {
    assertThatThrownBy(() -> TorchScriptSpec.of(path("frozen.pt")).check(List.of("x"), 5))
        .hasMessage(
            "Invalid model torchscript:"
                + path("frozen.pt")
                + ": no parameter requires a gradient (4 parameter(s), all frozen): there is"
                + " nothing to train");
  }

  @Test
  void anOutputThatIsNotBatchByClassesIsRefused() {
    TorchScriptSpec spec = TorchScriptSpec.of(path("wrong_output.pt"));
    assertThatThrownBy(() -> spec.check(List.of("x"), 3))
        .hasMessage(
            "Invalid model torchscript:"
                + path("wrong_output.pt")
                + ": its output is shaped (2, 2, 3) for a batch of 2; expected [batch, 3] (3"
                + " classes)");
    assertThatThrownBy(() -> TorchScriptSpec.of(path("mlp.pt")).check(List.of("x"), 10))
        .hasMessage(
            "Invalid model torchscript:"
                + path("mlp.pt")
                + ": its output is shaped (2, 5) for a batch of 2; expected [batch, 10] (10"
                + " classes)");
    TorchScriptSpec.of(path("regressor.pt")).check(List.of("x"), 1);
  }

  @Test
  void buffersTheTrainerCannotReachAreRefused() {
    TorchScriptSpec spec = TorchScriptSpec.of(path("plain_bn.pt"), new Shape(16));
    try (NDManager m = NDManager.newBaseManager(Device.cpu())) {
      assertThatThrownBy(() -> spec.build(m))
          .hasMessage(
              "Invalid model torchscript:"
                  + path("plain_bn.pt")
                  + ": it holds 3 tensor(s) that are not parameters (buffers, such as batch norm's"
                  + " running statistics), which the trainer can only keep the same on every"
                  + " worker, checkpoint and restore through a sparktrainer_buffers() method:"
                  + " export the module with python/export_torchscript.py");
    }
  }

  @Test
  void theTextFormGoesThroughTheChecks() {
    ModelSpec spec =
        SpecStrings.model(
            "torchscript:" + path("mlp.pt"), List.of("x"), new long[][] {{20}}, 5, null, 0f);
    assertThat(spec).isInstanceOf(TorchScriptSpec.class);
    assertThat(ModelSpec.fromProperties(spec.toProperties()).inputShapes())
        .containsExactly(new Shape(20));
    assertThat(spec.toProperties())
        .containsAllEntriesOf(Map.of("type", "torchscript", "inputShapes", "20"));
    assertThatThrownBy(
            () ->
                SpecStrings.model(
                    "torchscript:" + path("mlp.pt"),
                    List.of("pixels"),
                    new long[][] {{64}},
                    5,
                    null,
                    0f))
        .hasMessageContaining("feature column 'pixels' is shaped 64");
  }

  /**
   * A sequence column is two forward arguments, ids (int64) then mask (float32), of a length that
   * varies per batch: the export helper's [-1]. The spec keeps the columns through its properties
   * (a trained model's predictions feed them as training did).
   */
  @Test
  void aSequenceColumnIsTheIdsThenTheMask() {
    TorchScriptSpec spec =
        SpecStrings.torchScript(
            "torchscript:" + path("text_classifier.pt"),
            List.of(TorchScriptSpec.Column.ids("tokens", 12, 20)),
            3);
    assertThat(spec.inputShapes()).containsExactly(new Shape(12), new Shape(12));
    assertThat(spec.inputTypes()).containsExactly("int64", "float32");
    assertThat(spec.outputs()).isEqualTo(3);
    assertThat(spec.file().metadata().inputs().get(0).shape()).containsExactly(-1L);
    TorchScriptSpec trained = TorchScriptSpec.fromProperties(spec.toProperties());
    assertThat(trained.inputTypes()).containsExactly("int64", "float32");
    assertThat(trained.columns()).hasSize(1);
    TorchScriptSpec.Column c = trained.columns().get(0);
    assertThat(c.name()).isEqualTo("tokens");
    assertThat(c.kind()).isEqualTo(TorchScriptSpec.Column.Kind.IDS);
    assertThat(c.maxLength()).isEqualTo(12);
    assertThat(c.vocabSize()).isEqualTo(20);
  }

  @Test
  void theArgumentsDataTypesAreCheckedAgainstWhatTheColumnsSend() {
    TorchScriptSpec intMask =
        TorchScriptSpec.of(path("text_mask_int64.pt"))
            .forColumns(List.of(TorchScriptSpec.Column.ids("tokens", 12, 20)));
    assertThatThrownBy(() -> intMask.check(null, 3))
        .hasMessage(
            "Invalid model torchscript:"
                + path("text_mask_int64.pt")
                + ": argument 2 (mask) of its forward is int64 but feature column 'tokens' sends"
                + " its mask as float32");
    TorchScriptSpec floatValues =
        TorchScriptSpec.of(path("text_classifier.pt"))
            .forColumns(List.of(TorchScriptSpec.Column.sequence("tokens", 12)));
    assertThatThrownBy(() -> floatValues.check(null, 3))
        .hasMessage(
            "Invalid model torchscript:"
                + path("text_classifier.pt")
                + ": argument 1 (ids) of its forward is int64 but feature column 'tokens' sends"
                + " its values as float32");
    TorchScriptSpec int64Column =
        TorchScriptSpec.of(path("mlp.pt"))
            .forColumns(List.of(TorchScriptSpec.Column.int64("x", 20)));
    assertThatThrownBy(() -> int64Column.check(null, 5))
        .hasMessage(
            "Invalid model torchscript:"
                + path("mlp.pt")
                + ": argument 1 (x) of its forward is float32 but feature column 'x' is int64");
  }

  @Test
  void aSequenceColumnNeedsTwoArgumentsOfAVariableLength() {
    TorchScriptSpec oneArgument =
        TorchScriptSpec.of(path("mlp.pt"))
            .forColumns(List.of(TorchScriptSpec.Column.ids("tokens", 12, 20)));
    assertThatThrownBy(() -> oneArgument.check(null, 5))
        .hasMessage(
            "Invalid model torchscript:"
                + path("mlp.pt")
                + ": its forward takes 1 input(s) (x) but the feature columns send 2 tensor(s)"
                + " (tokens ids, tokens mask): a sequence column is two arguments, its ids (or"
                + " values) then its mask");
    assertThatThrownBy(() -> TorchScriptSpec.of(path("text_classifier.pt")).check(null, 3))
        .hasMessage(
            "Invalid model torchscript:"
                + path("text_classifier.pt")
                + ": argument 1 of its forward was exported with a variable length (shape -1), for a"
                + " sequence column, but the feature columns are not known: give them"
                + " (TorchScriptSpec.forColumns, a DatasetSpec with the sequence column, or"
                + " --features COL:ids)");
    TorchScriptSpec fixed =
        TorchScriptSpec.of(path("text_fixed_length.pt"))
            .forColumns(List.of(TorchScriptSpec.Column.ids("tokens", 12, 20)));
    assertThatThrownBy(() -> fixed.check(null, 3))
        .hasMessage(
            "Invalid model torchscript:"
                + path("text_fixed_length.pt")
                + ": argument 1 (ids) of its forward was exported for examples shaped 12 but feature"
                + " column 'tokens' is a sequence whose length T varies from batch to batch (at"
                + " most 12): its ids are [batch, T]; export the module with the sequence's"
                + " arguments of a variable length (python/export_torchscript.py: export(...,"
                + " variable_length=(...)), --variable-length)");
  }

  /** The Java API fits a module to the training data's int64 and sequence columns in build(). */
  @Test
  void theBuilderFitsTheModuleToTheDatasetsColumns() {
    dev.sparktrainer.data.DatasetSpec data =
        dev.sparktrainer.data.DatasetSpec.builder()
            .addPath(tmp.resolve("data").toString())
            .addSequenceFeature("tokens", dev.sparktrainer.data.DatasetSpec.ValueType.INT64, 12, 20)
            .setLabel("label", dev.sparktrainer.data.DatasetSpec.LabelType.INT)
            .build();
    ModelSpec built =
        dev.sparktrainer.train.DistributedTrainer.builder()
            .setModel(TorchScriptSpec.of(path("text_classifier.pt")))
            .setLoss(dev.sparktrainer.model.LossSpec.SOFTMAX_CROSS_ENTROPY)
            .setOptimizer(dev.sparktrainer.optim.OptimizerSpec.adam().build())
            .setTrainingData(
                data, dev.sparktrainer.data.PipelineOptions.builder().optBatchSize(8).build())
            .setNumWorkers(1)
            .build()
            .config()
            .model()
            .spec();
    TorchScriptSpec spec = (TorchScriptSpec) built;
    assertThat(spec.columns())
        .extracting(TorchScriptSpec.Column::kind)
        .containsExactly(TorchScriptSpec.Column.Kind.IDS);
    assertThat(spec.inputTypes()).containsExactly("int64", "float32");
    spec.check(null, 3);
  }

  private static String metadataOf(String name) throws IOException {
    TorchScriptFile f = TorchScriptFile.parse(name, bytes(name));
    ZipDirectory zip = new ZipDirectory(f.bytes());
    for (ZipDirectory.Entry e : zip.entries.values()) {
      if (e.name().endsWith("extra/sparktrainer.json")) {
        return new String(zip.read(e), StandardCharsets.UTF_8);
      }
    }
    throw new AssertionError("no metadata in " + name);
  }

  /** The archive with the entries that {@code replace} maps to a text replaced (stored). */
  static byte[] rewrite(byte[] archive, Function<String, String> replace) throws IOException {
    ZipDirectory zip = new ZipDirectory(archive);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (ZipOutputStream z = new ZipOutputStream(out)) {
      for (ZipDirectory.Entry e : zip.entries.values()) {
        String text = replace.apply(e.name());
        byte[] content = text == null ? zip.read(e) : text.getBytes(StandardCharsets.UTF_8);
        ZipEntry entry = new ZipEntry(e.name());
        entry.setMethod(ZipEntry.STORED);
        entry.setSize(content.length);
        CRC32 crc = new CRC32();
        crc.update(content);
        entry.setCrc(crc.getValue());
        z.putNextEntry(entry);
        z.write(content);
        z.closeEntry();
      }
    }
    return out.toByteArray();
  }
}
