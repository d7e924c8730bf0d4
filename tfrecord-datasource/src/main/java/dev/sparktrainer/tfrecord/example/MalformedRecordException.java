package dev.sparktrainer.tfrecord.example;

/** A record whose bytes are not a valid Example / SequenceExample (or don't fit the schema). */
public class MalformedRecordException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public MalformedRecordException(String message) {
    super(message);
  }
}
