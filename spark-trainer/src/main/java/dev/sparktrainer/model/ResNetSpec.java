package dev.sparktrainer.model;

import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import java.util.Arrays;
import java.util.Map;

/**
 * ResNet (v1) built from DJL's model-zoo code ({@link ResNetV1}; no weights are downloaded): {@code
 * numLayers} one of 18, 34, 50, 101, 152 (50+ use bottleneck blocks), or 20/32/44/56/110 for the
 * CIFAR-style small variants DJL accepts. The feature tensor is viewed as {@code [B, C, H, W]}, or
 * with {@code channelsLast} as {@code [B, H, W, C]} (decoded photos) and transposed to channels
 * first.
 *
 * <p>Its batch-norm running statistics are parameters without gradients: the trainer averages them
 * across replicas every step, so replicas stay identical.
 *
 * @param imageDims per-example image shape {@code (channels, height, width)}
 * @param numLayers depth
 * @param outputs number of classes
 * @param channelsLast the input is {@code [B, H, W, C]} ({@link #inputShapes()} {@code (H, W, C)})
 */
public record ResNetSpec(long[] imageDims, int numLayers, int outputs, boolean channelsLast)
    implements ModelSpec {
  private static final long serialVersionUID = 1L;
  static final String TYPE = "resnet";

  /** Validates the values. */
  public ResNetSpec {
    if (imageDims == null || imageDims.length != 3) {
      throw new IllegalArgumentException(
          "Invalid imageShape "
              + Arrays.toString(imageDims)
              + ": expected (channels, height, width)");
    }
    imageDims = imageDims.clone();
    Shape imageShape = new Shape(imageDims);
    Specs.checkShapes(new Shape[] {imageShape});
    if (outputs <= 0) {
      throw new IllegalArgumentException("Invalid outputs " + outputs + ": expected > 0");
    }
  }

  /** A ResNet taking channels-first input. */
  public ResNetSpec(long[] imageDims, int numLayers, int outputs) {
    this(imageDims, numLayers, outputs, false);
  }

  /** This ResNet taking {@code [B, H, W, C]} input (decoded photos). */
  public ResNetSpec withChannelsLast() {
    return new ResNetSpec(imageDims, numLayers, outputs, true);
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
    SequentialBlock net = new SequentialBlock();
    long c = imageShape.get(0);
    long h = imageShape.get(1);
    long w = imageShape.get(2);
    net.add(Specs.imageInput(c, h, w, channelsLast));
    net.add(
        ResNetV1.builder()
            .setImageShape(imageShape)
            .setNumLayers(numLayers)
            .setOutSize(outputs)
            .build());
    return net;
  }

  @Override
  public Map<String, String> toProperties() {
    Map<String, String> m = ModelSpec.newProperties(TYPE);
    m.put("imageShape", Specs.formatShapes(new Shape[] {imageShape()})); // (C, H, W)
    m.put("numLayers", Integer.toString(numLayers));
    m.put("outputs", Integer.toString(outputs));
    if (channelsLast) {
      m.put("inputLayout", "hwc");
    }
    return m;
  }

  static ResNetSpec fromProperties(Map<String, String> p) {
    return new ResNetSpec(
        Specs.parseShapes(Specs.required(p, "imageShape"))[0].getShape(),
        Integer.parseInt(Specs.required(p, "numLayers")),
        Integer.parseInt(Specs.required(p, "outputs")),
        Specs.channelsLast(p));
  }
}
