package dev.sparktrainer.collective;

/** The reduction applied element-wise by {@link Communicator#allReduce(float[], ReduceOp)}. */
public enum ReduceOp {
  /** Sum of the ranks' values (INT64 sums wrap on overflow, as Java's {@code long} does). */
  SUM,
  /**
   * Sum divided by the number of ranks: floating point divides the sum once; INT64 uses Java's
   * truncating integer division.
   */
  MEAN,
  /** Element-wise minimum ({@link Math#min}: NaN wins, -0.0 is below 0.0). */
  MIN,
  /** Element-wise maximum ({@link Math#max}: NaN wins, 0.0 is above -0.0). */
  MAX
}
