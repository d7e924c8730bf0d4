package dev.sparktrainer.train;

/** The failure a test asked for ({@code optInjectFailure}), thrown in the first attempt only. */
final class InjectedFailure extends RuntimeException {
  private static final long serialVersionUID = 1L;

  InjectedFailure(String message) {
    super(message);
  }
}
