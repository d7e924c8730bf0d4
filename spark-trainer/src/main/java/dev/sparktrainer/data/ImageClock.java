package dev.sparktrainer.data;

import java.util.concurrent.atomic.LongAdder;

/**
 * Images one pipeline decoded and the time its decoders spent on them (decode, orientation, crop
 * and resize, the copy into the record or batch), added to by every decoding thread: for images/s
 * and decode time per image in {@link PipelineStats}.
 */
final class ImageClock {
  private final LongAdder images = new LongAdder();
  private final LongAdder nanos = new LongAdder();

  void add(long decodeNanos) {
    images.increment();
    nanos.add(decodeNanos);
  }

  long images() {
    return images.sum();
  }

  long nanos() {
    return nanos.sum();
  }
}
