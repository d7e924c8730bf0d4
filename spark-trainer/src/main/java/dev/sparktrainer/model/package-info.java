/**
 * Serializable model specifications that build DJL {@link ai.djl.nn.Block}s on the executors: a
 * multi-layer perceptron ({@link dev.sparktrainer.model.MlpSpec}), a small CNN for image-shaped
 * features ({@link dev.sparktrainer.model.CnnSpec}), ResNet from DJL's model-zoo code ({@link
 * dev.sparktrainer.model.ResNetSpec}, no downloads) and any custom block through a serializable
 * factory ({@link dev.sparktrainer.model.CustomSpec}); the losses ({@link
 * dev.sparktrainer.model.LossSpec}); and the short text forms of models and optimizers ({@code
 * mlp:256,128}, {@code adam}) that the command line and the Estimator's Params share ({@link
 * dev.sparktrainer.model.SpecStrings}).
 *
 * <p>A spec is a small value shipped inside the Spark closure; blocks (native memory) are only ever
 * created inside a task. Every built-in spec also round-trips through {@link
 * dev.sparktrainer.model.ModelSpec#toProperties()} so a saved model can be rebuilt without user
 * code.
 */
package dev.sparktrainer.model;
