package dev.sparktrainer.model;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.pooling.Pool;
import java.util.Arrays;
import java.util.Map;

/**
 * A small CNN for image-shaped features: the (single) feature tensor is viewed as {@code [B,
 * channels, height, width]} (so flat pixel vectors work too), or with {@code channelsLast} as
 * {@code [B, height, width, channels]} (decoded photos, {@code
 * DatasetSpec.Builder#addImageFeature}) and transposed to channels first, then for each entry of
 * {@code filters} a 3x3 convolution (padding 1) with ReLU and 2x2 max pooling, then a dense layer
 * of {@code dense} units with ReLU and dropout, then {@code outputs} logits.
 *
 * @param imageDims per-example image shape {@code (channels, height, width)}
 * @param filters output channels of each convolution stage
 * @param dense units of the hidden dense layer
 * @param outputs number of outputs
 * @param dropout dropout rate before the output layer, 0 for none
 * @param channelsLast the input is {@code [B, height, width, channels]} ({@link #inputShapes()}
 *     {@code (height, width, channels)}); false: channels first
 */
public record CnnSpec(
    long[] imageDims, int[] filters, int dense, int outputs, float dropout, boolean channelsLast)
    implements ModelSpec {
  private static final long serialVersionUID = 1L;
  static final String TYPE = "cnn";

  /** Validates the values. */
  public CnnSpec {
    if (imageDims == null || imageDims.length != 3) {
      throw new IllegalArgumentException(
          "Invalid imageShape "
              + Arrays.toString(imageDims)
              + ": expected (channels, height, width)");
    }
    imageDims = imageDims.clone();
    Shape imageShape = new Shape(imageDims);
    Specs.checkShapes(new Shape[] {imageShape});
    filters = filters.clone();
    long side = Math.min(imageShape.get(1), imageShape.get(2));
    for (int f : filters) {
      if (f <= 0) {
        throw new IllegalArgumentException("Invalid filters " + f + ": expected > 0");
      }
      side /= 2;
    }
    if (side < 1) {
      throw new IllegalArgumentException(
          "Invalid filters: "
              + filters.length
              + " pooling stages do not fit an image of "
              + imageShape);
    }
    if (dense <= 0 || outputs <= 0) {
      throw new IllegalArgumentException(
          "Invalid dense " + dense + " / outputs " + outputs + ": expected > 0");
    }
    if (!(dropout >= 0 && dropout < 1)) {
      throw new IllegalArgumentException(
          "Invalid dropout " + dropout + ": expected 0 <= dropout < 1");
    }
  }

  /** A CNN taking channels-first input. */
  public CnnSpec(long[] imageDims, int[] filters, int dense, int outputs, float dropout) {
    this(imageDims, filters, dense, outputs, dropout, false);
  }

  /** This CNN taking {@code [B, height, width, channels]} input (decoded photos). */
  public CnnSpec withChannelsLast() {
    return new CnnSpec(imageDims, filters, dense, outputs, dropout, true);
  }

  /** Two stages (32, 64 filters), dense 128, dropout 0.25. */
  public static CnnSpec of(int channels, int height, int width, int outputs) {
    return new CnnSpec(
        new long[] {channels, height, width}, new int[] {32, 64}, 128, outputs, 0.25f);
  }

  /** The per-example image shape. */
  public Shape imageShape() {
    return new Shape(imageDims);
  }

  @Override
  public Shape[] inputShapes() {
    return new Shape[] {Specs.inputShape(imageDims, channelsLast)};
  }

  @Override
  public Block newBlock() {
    Shape imageShape = imageShape();
    long c = imageShape.get(0);
    long h = imageShape.get(1);
    long w = imageShape.get(2);
    SequentialBlock net = new SequentialBlock();
    net.add(Specs.imageInput(c, h, w, channelsLast));
    for (int f : filters) {
      net.add(
          Conv2d.builder()
              .setKernelShape(new Shape(3, 3))
              .optPadding(new Shape(1, 1))
              .setFilters(f)
              .build());
      net.add(ai.djl.nn.Activation.reluBlock());
      net.add(Pool.maxPool2dBlock(new Shape(2, 2), new Shape(2, 2)));
    }
    net.add(Blocks.batchFlattenBlock());
    net.add(Linear.builder().setUnits(dense).build());
    net.add(ai.djl.nn.Activation.reluBlock());
    if (dropout > 0) {
      net.add(Dropout.builder().optRate(dropout).build());
    }
    net.add(Linear.builder().setUnits(outputs).build());
    return net;
  }

  @Override
  public Map<String, String> toProperties() {
    Map<String, String> m = ModelSpec.newProperties(TYPE);
    m.put("imageShape", Specs.formatShapes(new Shape[] {imageShape()})); // (C, H, W)
    m.put("filters", Specs.formatInts(filters));
    m.put("dense", Integer.toString(dense));
    m.put("outputs", Integer.toString(outputs));
    m.put("dropout", Float.toString(dropout));
    if (channelsLast) {
      m.put("inputLayout", "hwc");
    }
    return m;
  }

  static CnnSpec fromProperties(Map<String, String> p) {
    return new CnnSpec(
        Specs.parseShapes(Specs.required(p, "imageShape"))[0].getShape(),
        Specs.parseInts(Specs.required(p, "filters")),
        Integer.parseInt(Specs.required(p, "dense")),
        Integer.parseInt(Specs.required(p, "outputs")),
        Float.parseFloat(p.getOrDefault("dropout", "0")),
        Specs.channelsLast(p));
  }
}
