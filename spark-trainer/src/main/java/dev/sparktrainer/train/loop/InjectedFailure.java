package dev.sparktrainer.train.loop;

/**
 * The failure a test asked for ({@link FaultInjection}), thrown in the first attempt only. Testing
 * only.
 */
public final class InjectedFailure extends RuntimeException {
  private static final long serialVersionUID = 1L;

  InjectedFailure(String message) {
    super(message);
  }
}
