package dev.sparktrainer.data;

import java.util.concurrent.Semaphore;

/** A semaphore whose number of permits can be set while threads hold some. */
final class AdjustableSemaphore extends Semaphore {
  private static final long serialVersionUID = 1L;
  private int limit;

  AdjustableSemaphore(int permits) {
    super(permits);
    this.limit = permits;
  }

  synchronized void setLimit(int newLimit) {
    if (newLimit > limit) {
      release(newLimit - limit);
    } else if (newLimit < limit) {
      reducePermits(limit - newLimit);
    }
    limit = newLimit;
  }

  synchronized int limit() {
    return limit;
  }
}
