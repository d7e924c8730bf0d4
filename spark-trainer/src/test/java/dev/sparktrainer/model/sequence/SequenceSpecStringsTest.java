package dev.sparktrainer.model.sequence;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sparktrainer.model.Activation;
import dev.sparktrainer.model.ModelSpec;
import dev.sparktrainer.model.SpecStrings;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The sequence models' text forms, what they build, and their refusals with exact messages. */
class SequenceSpecStringsTest {
  private static final SequenceInput IN = new SequenceInput(30000, 256);
  private static final long[][] SHAPES = {{256}};

  static ModelSpec parse(String text) {
    return parse(text, null, 0f);
  }

  static ModelSpec parse(String text, Activation activation, float dropout) {
    return SpecStrings.model(text, List.of("tokens"), SHAPES, 5, activation, dropout, IN);
  }

  @Test
  void parsesTheForms() {
    assertThat(parse("embed:64")).isEqualTo(new EmbedSpec(30000, 256, 64, 5, 0f));
    assertThat(parse(" EMBED : 32 ", null, 0.1f)).isEqualTo(new EmbedSpec(30000, 256, 32, 5, 0.1f));
    assertThat(parse("transformer:layers=2,dim=128,heads=4"))
        .isEqualTo(new TransformerSpec(30000, 256, 2, 128, 4, 512, 5, Activation.RELU, 0f));
    assertThat(parse("transformer: heads=8, dim=64, layers=1, ff=100", Activation.GELU, 0.1f))
        .isEqualTo(new TransformerSpec(30000, 256, 1, 64, 8, 100, 5, Activation.GELU, 0.1f));
  }

  @Test
  void roundTripsThroughProperties() {
    for (String text : List.of("embed:64", "transformer:layers=2,dim=128,heads=4,ff=300")) {
      ModelSpec spec = parse(text, Activation.GELU, 0.25f);
      assertThat(ModelSpec.fromProperties(spec.toProperties())).isEqualTo(spec);
      assertThat(spec.inputShapes()).hasSize(2); // ids and mask
      assertThat(spec.inputShapes()[0].get(0)).isEqualTo(256);
    }
    assertThat(SpecStrings.describe(parse("transformer:layers=2,dim=128,heads=4")))
        .isEqualTo(
            "transformer(vocabSize=30000, maxLength=256, layers=2, dim=128, heads=4, ff=512,"
                + " outputs=5, activation=relu)");
  }

  @Test
  void refusesWithExactMessages() {
    assertThatThrownBy(() -> parse("embed"))
        .hasMessage(
            "Invalid model 'embed': missing the embedding size: expected embed:DIM (e.g. embed:64)");
    assertThatThrownBy(() -> parse("embed:0"))
        .hasMessage(
            "Invalid model 'embed:0': the embedding size '0' is not a positive integer: expected"
                + " embed:DIM (e.g. embed:64)");
    assertThatThrownBy(() -> parse("transformer:layers=2,heads=4"))
        .hasMessage(
            "Invalid model 'transformer:layers=2,heads=4': missing dim: expected"
                + " transformer:layers=L,dim=D,heads=H[,ff=F]");
    assertThatThrownBy(() -> parse("transformer:layers=2,dim=64,heads=3"))
        .hasMessage(
            "Invalid model 'transformer:layers=2,dim=64,heads=3': heads=3 does not divide dim=64"
                + " (each head gets dim / heads values)");
    assertThatThrownBy(() -> parse("transformer:layers=2,dim=64,heads=4,width=9"))
        .hasMessage(
            "Invalid model 'transformer:layers=2,dim=64,heads=4,width=9': unknown key 'width':"
                + " expected layers, dim, heads and optionally ff"
                + " (transformer:layers=L,dim=D,heads=H[,ff=F])");
    assertThatThrownBy(() -> parse("transformer:layers=2,dim=x,heads=4"))
        .hasMessage(
            "Invalid model 'transformer:layers=2,dim=x,heads=4': dim 'x' is not a positive"
                + " integer: expected transformer:layers=L,dim=D,heads=H[,ff=F]");
    assertThatThrownBy(() -> parse("transformer:layers=2,dim=64,heads=4,layers=3"))
        .hasMessage(
            "Invalid model 'transformer:layers=2,dim=64,heads=4,layers=3': layers is given twice");
    assertThatThrownBy(() -> parse("transformer:layers,dim=64,heads=4"))
        .hasMessage(
            "Invalid model 'transformer:layers,dim=64,heads=4': layers needs a value: expected"
                + " transformer:layers=L,dim=D,heads=H[,ff=F]");
    assertThatThrownBy(() -> parse("transformer:layers=1,dim=64,heads=4", Activation.TANH, 0f))
        .hasMessage(
            "Invalid activation 'tanh' for model 'transformer:layers=1,dim=64,heads=4': a"
                + " Transformer's feed-forward takes relu or gelu");
    assertThatThrownBy(
            () -> SpecStrings.model("embed:64", null, SHAPES, 5, null, 0f, (SequenceInput) null))
        .hasMessage(
            "Invalid model 'embed:64': embed needs a sequence feature column, with the vocabulary"
                + " size and the maximum sequence length");
    assertThatThrownBy(() -> SpecStrings.model("embed:64", SHAPES, 5, null, 0f))
        .hasMessageStartingWith("Invalid model 'embed:64': embed needs a sequence feature column");
    assertThatThrownBy(() -> new SequenceInput(0, 10))
        .hasMessage("Invalid vocabulary size 0: expected 1 to 2147483647");
    assertThatThrownBy(() -> new SequenceInput(10, 0))
        .hasMessage("Invalid maximum sequence length 0: expected >= 1");
  }

  @Test
  void theOtherFormsIgnoreTheSequenceInput() {
    assertThat(SpecStrings.describe(parse("mlp:8"))).startsWith("mlp(");
  }
}
