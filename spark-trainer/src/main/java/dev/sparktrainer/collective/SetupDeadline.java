package dev.sparktrainer.collective;

import java.net.SocketTimeoutException;
import java.nio.channels.SocketChannel;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * Closes a connection's socket when its setup (TLS handshake, HELLO, the rest of the handshake)
 * passes its deadline, however the peer drips its bytes. A read timeout bounds one socket read
 * only, and one {@code SSLSocket} read waits for a whole TLS record (up to 16 KB), each socket read
 * under it getting the full timeout: a stranger sending a byte a second would hold the thread for
 * hours. Closing the socket ends any blocking call on it at once.
 *
 * <p>The deadline can be moved ({@link #moveTo}) as the setup goes from a short step to a longer
 * one; {@link #close} disarms it. One daemon timer thread, there only while a deadline is armed.
 */
final class SetupDeadline implements AutoCloseable {
  private static final ScheduledThreadPoolExecutor TIMER = timer();

  private final SocketChannel ch;
  private ScheduledFuture<?> pending; // guarded by this
  private long generation; // guarded by this: the current deadline's; an earlier one's task is void
  private boolean fired; // guarded by this

  private SetupDeadline(SocketChannel ch) {
    this.ch = ch;
  }

  /** A deadline at {@code deadlineNanos} (System.nanoTime) for the setup of {@code ch}. */
  static SetupDeadline arm(SocketChannel ch, long deadlineNanos) {
    SetupDeadline d = new SetupDeadline(ch);
    d.moveTo(deadlineNanos);
    return d;
  }

  /** Moves the deadline (earlier or later); nothing once it has fired. */
  synchronized void moveTo(long deadlineNanos) {
    if (fired) {
      return;
    }
    if (pending != null) {
      pending.cancel(false);
    }
    long delay = Math.max(0, deadlineNanos - System.nanoTime());
    long g = ++generation;
    pending = TIMER.schedule(() -> fire(g), delay, TimeUnit.NANOSECONDS);
  }

  private void fire(long g) {
    synchronized (this) {
      // Closed, or moved since this task was scheduled (cancel does not stop a task already
      // running): the deadline it stands for no longer holds.
      if (fired || pending == null || g != generation) {
        return;
      }
      fired = true;
    }
    Communicator.closeQuietly(ch);
  }

  /** Whether the deadline closed the socket. */
  synchronized boolean fired() {
    return fired;
  }

  /**
   * Throws if the deadline closed the socket: a failure of a blocking call is then the deadline's,
   * whatever the call reported ({@code what}: the step, for the message).
   */
  void check(String what) throws SocketTimeoutException {
    if (fired()) {
      throw new SocketTimeoutException(
          what + " did not complete by its deadline: connection closed");
    }
  }

  /** Disarms the deadline (the setup completed, or failed on its own). */
  @Override
  public synchronized void close() {
    if (pending != null) {
      pending.cancel(false);
      pending = null;
    }
    generation++;
  }

  private static ScheduledThreadPoolExecutor timer() {
    ScheduledThreadPoolExecutor e =
        new ScheduledThreadPoolExecutor(
            1,
            task -> {
              Thread t = new Thread(task, "ring-setup-deadline");
              t.setDaemon(true);
              return t;
            });
    e.setRemoveOnCancelPolicy(true);
    e.setKeepAliveTime(1, TimeUnit.SECONDS);
    e.allowCoreThreadTimeOut(true);
    return e;
  }
}
