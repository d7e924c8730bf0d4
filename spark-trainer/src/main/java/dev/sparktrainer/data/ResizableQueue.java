package dev.sparktrainer.data;

import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/** A bounded blocking queue whose capacity can change while in use (AUTOTUNE's prefetch depth). */
final class ResizableQueue<T> {
  private final ArrayDeque<T> items = new ArrayDeque<>();
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition notEmpty = lock.newCondition();
  private final Condition notFull = lock.newCondition();
  private int capacity;

  ResizableQueue(int capacity) {
    this.capacity = capacity;
  }

  void setCapacity(int c) {
    lock.lock();
    try {
      capacity = c;
      notFull.signalAll();
    } finally {
      lock.unlock();
    }
  }

  int capacity() {
    return capacity;
  }

  int size() {
    lock.lock();
    try {
      return items.size();
    } finally {
      lock.unlock();
    }
  }

  /** Puts, waiting while full; {@code force} ignores the capacity (end and failure markers). */
  void put(T item, boolean force) throws InterruptedException {
    lock.lockInterruptibly();
    try {
      while (!force && items.size() >= capacity) {
        notFull.await();
      }
      items.addLast(item);
      notEmpty.signal();
    } finally {
      lock.unlock();
    }
  }

  /** Takes, waiting up to the timeout; null if none came. */
  T poll(long timeout, TimeUnit unit) throws InterruptedException {
    long nanos = unit.toNanos(timeout);
    lock.lockInterruptibly();
    try {
      while (items.isEmpty()) {
        if (nanos <= 0) {
          return null;
        }
        nanos = notEmpty.awaitNanos(nanos);
      }
      T t = items.removeFirst();
      notFull.signal();
      return t;
    } finally {
      lock.unlock();
    }
  }

  /** Takes without waiting; null if empty. */
  T pollNow() {
    lock.lock();
    try {
      T t = items.pollFirst();
      if (t != null) {
        notFull.signal();
      }
      return t;
    } finally {
      lock.unlock();
    }
  }
}
