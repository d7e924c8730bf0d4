package dev.sparktrainer.train.job;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.pytorch.jni.JniUtils;
import dev.sparktrainer.collective.Communicator;
import dev.sparktrainer.collective.RingListener;
import dev.sparktrainer.train.config.TrainingConfig;
import dev.sparktrainer.train.loop.TrainingLoop;
import dev.sparktrainer.train.loop.TrainingRuntime;
import dev.sparktrainer.train.loop.WorkerResult;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.util.SerializableConfiguration;
import scala.Option;
import scala.collection.Iterator;
import scala.runtime.AbstractFunction1;

/**
 * The body of one barrier task: bind a ring listener on this executor's host, publish its address
 * with {@code BarrierTaskContext.allGather} (the rendezvous), form the ring, pick the devices, and
 * run the {@link TrainingLoop}. Its rank is the partition id; the stage attempt number tells a
 * retry.
 */
public final class BarrierTrainingTask
    extends AbstractFunction1<Iterator<Integer>, Iterator<WorkerResult>> implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final System.Logger LOG = System.getLogger(BarrierTrainingTask.class.getName());

  private final TrainingConfig cfg;
  private final TrainingRuntime runtime;
  private final Broadcast<SerializableConfiguration> hadoopConf;
  private final String ringHost;

  public BarrierTrainingTask(
      TrainingConfig cfg,
      TrainingRuntime runtime,
      Broadcast<SerializableConfiguration> hadoopConf,
      String ringHost) {
    this.cfg = cfg;
    this.runtime = runtime;
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
      // Where this rank's ring port is and which process holds it: what an operator (or a fault
      // test) needs to find a rank's executor. The job id is public (every frame carries it).
      LOG.log(
          System.Logger.Level.INFO,
          "rank "
              + rank
              + ": ring listener on "
              + listener.address()
              + " (job "
              + Long.toHexString(runtime.secret().jobId())
              + ", stage attempt "
              + ctx.stageAttemptNumber()
              + ", executor pid "
              + ProcessHandle.current().pid()
              + ")");
      List<String> peers = Arrays.asList(ctx.allGather(listener.address()));
      runtime.faults().pauseBeforeRing(rank, ctx.stageAttemptNumber(), peers.size());
      try (Communicator comm =
          Communicator.builder()
              .setRank(rank)
              .setPeers(peers)
              .setSecret(runtime.secret())
              .setListener(listener)
              .optOptions(cfg.comm())
              .build()) {
        LOG.log(
            System.Logger.Level.INFO,
            "rank "
                + rank
                + " of "
                + peers.size()
                + " (stage attempt "
                + ctx.stageAttemptNumber()
                + ") on "
                + devices
                + ", ring "
                + peers
                + " formed"
                + (comm.rejectedConnections() == 0
                    ? ""
                    : ", "
                        + comm.rejectedConnections()
                        + " unauthenticated connection(s) rejected"));
        WorkerResult r =
            new TrainingLoop(
                    cfg,
                    runtime,
                    comm,
                    devices,
                    ctx.stageAttemptNumber(),
                    hadoopConf.value().value(),
                    ctx.cpus())
                .on(hostOf(ctx.getTaskInfos()[rank].address()), SparkEnv.get().executorId())
                .run();
        return scala.collection.Iterator$.MODULE$.single(r);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("rank " + rank + ": " + e.getMessage(), e);
    }
  }

  /**
   * The GPUs Spark assigned this task; the CPU (replicated for testing) with the task's CPUs as
   * threads when GPU training is off, or when this executor's PyTorch has no CUDA (said clearly in
   * the log: a GPU build is missing, see docs/trainer.md, GPU builds).
   */
  private List<Device> devices(BarrierTaskContext ctx) {
    int rank = ctx.partitionId();
    Option<ResourceInformation> gpus = ctx.resources().get("gpu");
    String[] addresses = gpus.isDefined() ? gpus.get().addresses() : new String[0];
    if (addresses.length > 0) {
      LOG.log(
          System.Logger.Level.INFO,
          "rank " + rank + ": GPU address " + String.join(",", addresses) + " assigned by Spark");
    }
    if (cfg.devices().gpus()) {
      if (addresses.length == 0) {
        throw new IllegalStateException(
            "GPUs were requested but Spark assigned none to task "
                + rank
                + ": set spark.executor.resource.gpu.amount, spark.task.resource.gpu.amount and a discovery script");
      }
      // spark-trainer doctor's check, before PyTorch is first used here (once per JVM).
      ExecutorEngineCheck.require(
          "rank " + rank + " (executor " + SparkEnv.get().executorId() + ")", addresses);
      int visible = Engine.getInstance().getGpuCount();
      if (visible > 0) {
        List<Device> out = new ArrayList<>();
        for (String a : addresses) {
          int id = Integer.parseInt(a.trim());
          if (id >= visible) {
            throw new IllegalStateException(
                "rank "
                    + rank
                    + ": Spark assigned GPU "
                    + id
                    + ", but PyTorch in this"
                    + " executor sees only "
                    + visible
                    + " GPU(s) (0.."
                    + (visible - 1)
                    + "): check the discovery script"
                    + " and CUDA_VISIBLE_DEVICES");
          }
          out.add(Device.gpu(id));
        }
        return out;
      }
      LOG.log(
          System.Logger.Level.WARNING,
          "rank "
              + rank
              + ": Spark assigned GPU "
              + String.join(",", addresses)
              + ", but CUDA is not available to"
              + " PyTorch in this executor (it sees 0 GPUs: CPU-only natives, or no CUDA driver): falling back to"
              + " the CPU with "
              + Math.max(1, ctx.cpus())
              + " thread(s)");
    } else if (addresses.length > 0) {
      LOG.log(
          System.Logger.Level.INFO,
          "rank " + rank + ": GPU training is off (optGpus(false)): training on the CPU");
    }
    setIntraOpThreads(ctx.cpus());
    return Collections.nCopies(cfg.devices().cpuDevicesPerWorker(), Device.cpu());
  }

  /**
   * PyTorch's intra-op pool is per process: one task per executor sets it to the task's CPUs. (In
   * local mode the tasks share it; the last setting wins, which only affects speed.)
   */
  public static void setIntraOpThreads(int threads) {
    if (threads > 0 && "PyTorch".equals(Engine.getInstance().getEngineName())) {
      JniUtils.setNumThreads(threads);
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
