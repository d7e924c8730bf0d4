package dev.sparktrainer.train;

import ai.djl.Device;
import ai.djl.engine.Engine;
import dev.sparktrainer.checkpoint.SerializableConfiguration;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.RingListener;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.resource.ResourceInformation;
import scala.Option;
import scala.collection.Iterator;
import scala.runtime.AbstractFunction1;

/**
 * The body of one barrier task: bind a ring listener on this executor's host, publish its address
 * with {@code BarrierTaskContext.allGather} (the rendezvous), form the ring, pick the devices, and
 * run the {@link Worker}. Its rank is the partition id; the stage attempt number tells a retry.
 */
final class BarrierTrainingTask extends AbstractFunction1<Iterator<Integer>, Iterator<WorkerResult>>
    implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final System.Logger LOG = System.getLogger(BarrierTrainingTask.class.getName());

  private final TrainingConfig cfg;
  private final Broadcast<SerializableConfiguration> hadoopConf;
  private final String ringHost;

  BarrierTrainingTask(TrainingConfig cfg, Broadcast<SerializableConfiguration> hadoopConf, String ringHost) {
    this.cfg = cfg;
    this.hadoopConf = hadoopConf;
    this.ringHost = ringHost;
  }

  @Override
  public Iterator<WorkerResult> apply(Iterator<Integer> partition) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    int rank = ctx.partitionId();
    String host = ringHost != null ? ringHost : hostOf(ctx.getTaskInfos()[rank].address());
    List<Device> devices = devices(ctx);
    try (RingListener listener = RingListener.bind(host)) {
      List<String> peers = Arrays.asList(ctx.allGather(listener.address()));
      try (Communicator comm =
          Communicator.builder()
              .setRank(rank)
              .setPeers(peers)
              .setSecret(cfg.secret)
              .setListener(listener)
              .optOperationTimeout(cfg.operationTimeout)
              .optWirePrecision(cfg.gradientPrecision)
              .optConnectTimeout(cfg.connectTimeout)
              .build()) {
        LOG.log(System.Logger.Level.INFO,
            "rank " + rank + " of " + peers.size() + " (stage attempt " + ctx.stageAttemptNumber() + ") on "
                + devices + ", ring " + peers);
        WorkerResult r = new Worker(cfg, comm, devices, ctx.stageAttemptNumber(), hadoopConf.value().get()).run();
        return scala.collection.Iterator$.MODULE$.single(r);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("rank " + rank + ": " + e.getMessage(), e);
    }
  }

  /** The GPUs Spark assigned this task, else CPU (replicated for testing) with the task's CPUs as threads. */
  private List<Device> devices(BarrierTaskContext ctx) {
    Option<ResourceInformation> gpus = ctx.resources().get("gpu");
    if (cfg.useGpus) {
      if (gpus.isEmpty() || gpus.get().addresses().length == 0) {
        throw new IllegalStateException(
            "GPUs were requested but Spark assigned none to task " + ctx.partitionId()
                + ": set spark.executor.resource.gpu.amount, spark.task.resource.gpu.amount and a discovery script");
      }
      List<Device> out = new ArrayList<>();
      for (String a : gpus.get().addresses()) {
        out.add(Device.gpu(Integer.parseInt(a.trim())));
      }
      return out;
    }
    setIntraOpThreads(ctx.cpus());
    return Collections.nCopies(cfg.cpuDevicesPerWorker, Device.cpu());
  }

  /**
   * PyTorch's intra-op pool is per process: one task per executor sets it to the task's CPUs. (In
   * local mode the tasks share it; the last setting wins, which only affects speed.)
   */
  static void setIntraOpThreads(int threads) {
    if (threads > 0 && "PyTorch".equals(Engine.getInstance().getEngineName())) {
      ai.djl.pytorch.jni.JniUtils.setNumThreads(threads);
    }
  }

  static String hostOf(String address) {
    if (address.startsWith("[")) {
      return address.substring(1, address.indexOf(']'));
    }
    int colon = address.lastIndexOf(':');
    return colon < 0 ? address : address.substring(0, colon);
  }
}
