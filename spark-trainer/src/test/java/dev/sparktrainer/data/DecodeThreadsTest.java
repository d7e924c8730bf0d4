package dev.sparktrainer.data;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The parallel decode stage's ceiling: the task's CPUs, else the machine's cores. */
class DecodeThreadsTest {
  @Test
  void aSparkTaskDecodesWithItsCpus() {
    // spark.task.cpus=4 on a 16-core executor, cycle length 8: 4 decoders at most
    assertThat(PipelineContext.decodeThreads(8, 4, 16)).isEqualTo(4);
    assertThat(PipelineContext.decodeThreads(8, 1, 16)).isEqualTo(1);
    // more CPUs than open splits: one reader per split
    assertThat(PipelineContext.decodeThreads(8, 16, 16)).isEqualTo(8);
  }

  @Test
  void outsideATaskOrInLocalModeTheMachinesCores() {
    assertThat(PipelineContext.decodeThreads(32, 0, 16)).isEqualTo(16);
    assertThat(PipelineContext.decodeThreads(4, 0, 16)).isEqualTo(4);
    assertThat(PipelineContext.decodeThreads(1, 0, 1)).isEqualTo(1);
    assertThat(PipelineContext.taskCpus()).as("no Spark task here").isZero();
  }
}
