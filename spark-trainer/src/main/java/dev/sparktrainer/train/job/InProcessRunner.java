package dev.sparktrainer.train.job;

import ai.djl.Device;
import dev.sparktrainer.collective.CollectiveException;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.RingListener;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.loop.TrainingLoop;
import dev.sparktrainer.train.loop.TrainingRuntime;
import dev.sparktrainer.train.loop.WorkerResult;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;

/**
 * Runs the N workers of a job as threads of this JVM over loopback sockets, without Spark: the same
 * worker loop and ring as the barrier tasks. Used by tests (and as Spark's local mode would run
 * them: several replicas sharing one JVM).
 */
public final class InProcessRunner {
  private InProcessRunner() {}

  /** The host optimizer's threads of each of {@code n} workers sharing this JVM's CPUs. */
  static int threadsPerWorker(int n) {
    return Math.max(1, Runtime.getRuntime().availableProcessors() / n);
  }

  /** Runs every worker; returns the results by rank, or throws the first worker failure. */
  public static List<WorkerResult> run(
      TrainingConfig cfg, TrainingRuntime runtime, int attempt, Configuration conf)
      throws Exception {
    int n = cfg.numWorkers();
    List<RingListener> listeners = new ArrayList<>();
    List<String> peers = new ArrayList<>();
    ExecutorService pool = Executors.newFixedThreadPool(n);
    try {
      for (int r = 0; r < n; r++) {
        RingListener l = RingListener.bind("127.0.0.1");
        listeners.add(l);
        peers.add(l.address());
      }
      List<Future<WorkerResult>> futures = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        int rank = r;
        futures.add(
            pool.submit(
                () -> {
                  try (Communicator comm =
                      Communicator.builder()
                          .setRank(rank)
                          .setPeers(peers)
                          .setSecret(runtime.secret())
                          .setListener(listeners.get(rank))
                          .optOptions(cfg.comm())
                          .build()) {
                    List<Device> devices =
                        Collections.nCopies(cfg.devices().cpuDevicesPerWorker(), Device.cpu());
                    return new TrainingLoop(
                            cfg, runtime, comm, devices, attempt, conf, threadsPerWorker(n))
                        .run();
                  }
                }));
      }
      List<WorkerResult> results = new ArrayList<>();
      Exception first = null;
      for (Future<WorkerResult> f : futures) {
        try {
          results.add(f.get());
        } catch (ExecutionException e) {
          // Prefer the root cause (e.g. the injected failure) over the peers' broken-ring errors.
          Exception cause = e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
          if (first == null || first instanceof CollectiveException) {
            first = cause;
          }
        }
      }
      if (first != null) {
        throw first;
      }
      return results;
    } finally {
      pool.shutdownNow();
      pool.awaitTermination(30, TimeUnit.SECONDS);
      for (RingListener l : listeners) {
        l.close();
      }
    }
  }
}
