package dev.sparktrainer.cli;

/**
 * A bad input (unknown flag, missing column, wrong type, empty path, ...): the command line prints
 * its one-line message and exits with {@link SparkTrainerCli#EXIT_USAGE}, without a stack trace.
 */
public final class CliException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public CliException(String message) {
    super(message);
  }
}
