package dev.sparktrainer.data;

import java.io.IOException;
import java.util.Arrays;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * tf.data's deterministic interleave: {@code cycleLength} splits are open at once, each read by its
 * own thread into a small bounded queue; the consumer takes {@code blockLength} records from each
 * open split in turn, and an exhausted split's place in the cycle goes to the next split of the
 * list. The output order depends only on the list, never on thread timing. A semaphore bounds how
 * many readers decode at once (AUTOTUNE adjusts it).
 */
final class Interleaver implements AutoCloseable {
  /** Opens the stream of one item. */
  interface Opener {
    RecordStream open(int item) throws IOException;

    String describe(int item);
  }

  private static final Object END = new Object();
  private static final int CHUNK = 16;

  private final int[] items;
  private final int blockLength;
  private final int slotCapacity;
  private final Semaphore permits;
  private final Opener opener;
  private final String threadName;
  private final Slot[] slots;
  private int nextItem;
  private int cur;
  private int takenInBlock;
  private volatile boolean closed;

  Interleaver(
      int[] items,
      int cycleLength,
      int blockLength,
      int slotCapacity,
      Semaphore permits,
      Opener opener,
      String threadName) {
    this.items = items;
    this.blockLength = blockLength;
    this.slotCapacity = slotCapacity;
    this.permits = permits;
    this.opener = opener;
    this.threadName = threadName;
    this.slots = new Slot[Math.min(cycleLength, Math.max(1, items.length))];
    start();
  }

  private void start() {
    nextItem = 0;
    cur = 0;
    takenInBlock = 0;
    for (int i = 0; i < slots.length && nextItem < items.length; i++) {
      slots[i] = new Slot(items[nextItem++]);
    }
  }

  /** Starts over from the first item (PAD: repeating the shard). */
  void restart() {
    closeSlots();
    start();
  }

  /** The next record, or null when every item is exhausted. */
  Record next() throws IOException, InterruptedException {
    while (true) {
      boolean any = false;
      for (Slot s : slots) {
        any |= s != null;
      }
      if (!any) {
        return null;
      }
      Slot s = slots[cur];
      if (s == null) {
        advance();
        continue;
      }
      Object o = s.nextRecord();
      if (o == END) {
        slots[cur] = nextItem < items.length ? new Slot(items[nextItem++]) : null;
        advance();
        continue;
      }
      if (o instanceof Failure) {
        Throwable t = ((Failure) o).error;
        // The reader's own message when it names what was read (a file, a row); else named here.
        String what = opener.describe(s.item);
        if (t instanceof IOException && t.getMessage() != null && t.getMessage().contains(what)) {
          throw new IOException(t.getMessage(), t);
        }
        throw new IOException(
            "Reading " + what + ": " + (t instanceof IOException ? t.getMessage() : t.toString()),
            t);
      }
      if (++takenInBlock >= blockLength) {
        advance();
      }
      return (Record) o;
    }
  }

  private void advance() {
    cur = (cur + 1) % slots.length;
    takenInBlock = 0;
  }

  private void closeSlots() {
    for (int i = 0; i < slots.length; i++) {
      if (slots[i] != null) {
        slots[i].stop();
        slots[i] = null;
      }
    }
  }

  @Override
  public void close() {
    closed = true;
    closeSlots();
  }

  private static final class Failure {
    final Throwable error;

    Failure(Throwable error) {
      this.error = error;
    }
  }

  /** One open item and its reader thread. */
  private final class Slot implements Runnable {
    final int item;
    final ArrayBlockingQueue<Object> queue =
        new ArrayBlockingQueue<>(Math.max(2, slotCapacity / CHUNK) + 1);
    private Record[] chunk; // the chunk being consumed
    private int chunkPos;
    final Thread thread;
    volatile boolean stopped;

    Slot(int item) {
      this.item = item;
      this.thread = new Thread(this, threadName);
      thread.setDaemon(true);
      thread.start();
    }

    @Override
    public void run() {
      // END goes out only once the stream is closed (a cache file written and renamed, its
      // failure reported): when the consumer sees it, nothing of this reader is still running.
      boolean ended = false;
      try (RecordStream in = opener.open(item)) {
        boolean more = true;
        while (more && !stopped) {
          Record[] out = new Record[CHUNK];
          int n = 0;
          permits.acquire();
          try {
            while (n < CHUNK) {
              Record r = in.next();
              if (r == null) {
                more = false;
                break;
              }
              out[n++] = r;
            }
          } finally {
            permits.release();
          }
          if (n == 0) {
            break;
          }
          Object handoff = n == CHUNK ? out : Arrays.copyOf(out, n);
          while (!queue.offer(handoff, 100, TimeUnit.MILLISECONDS)) {
            if (stopped) {
              return;
            }
          }
        }
        ended = !stopped;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      } catch (Throwable t) {
        queue.clear();
        queue.offer(new Failure(t));
        return;
      }
      if (ended) {
        try {
          queue.put(END);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    }

    /**
     * The next record, END or a Failure; records are handed over in chunks to cut synchronisation.
     */
    Object nextRecord() throws InterruptedException, IOException {
      if (chunk != null && chunkPos < chunk.length) {
        Record r = chunk[chunkPos];
        chunk[chunkPos++] = null;
        return r;
      }
      chunk = null;
      Object o = take();
      if (o instanceof Record[]) {
        chunk = (Record[]) o;
        chunkPos = 1;
        Record r = chunk[0];
        chunk[0] = null;
        return r;
      }
      return o;
    }

    Object take() throws InterruptedException, IOException {
      while (true) {
        Object o = queue.poll(100, TimeUnit.MILLISECONDS);
        if (o != null) {
          return o;
        }
        if (closed) {
          throw new InterruptedException("pipeline closed");
        }
        if (!thread.isAlive() && queue.isEmpty()) {
          throw new IOException("Reader of " + opener.describe(item) + " stopped without a result");
        }
      }
    }

    void stop() {
      stopped = true;
      thread.interrupt();
      try {
        thread.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
