#!/usr/bin/env bash
# spark-trainer on YARN with GPU scheduling: 2 executors with one GPU each train with 2 synchronous
# workers; checkpoints on HDFS, so a failed attempt (spark.yarn.maxAppAttempts) or a rerun resumes.
#
#   deploy/yarn/submit-yarn.sh                       # extra arguments go to the trainer: --epochs 30
#
# Settings (environment): SPARK_HOME (a Spark 4.1.0 installation with HADOOP_CONF_DIR set), QUEUE (ml),
# SPARK_TRAINER_JAR (the shaded jar; default: this checkout's build output), DATA
# (hdfs:///data/digits), JOBS (hdfs:///jobs/spark-trainer/digits).
#
# GPUs on YARN: Spark turns spark.executor.resource.gpu.amount into a request for YARN's resource type
# yarn.io/gpu (the name is spark.yarn.resourceGpuDeviceName), so the cluster needs YARN resource types
# with GPUs: yarn.resource-types=yarn.io/gpu in resource-types.xml, and on the NodeManagers
# yarn.nodemanager.resource-plugins=yarn.io/gpu (with GPU isolation through cgroups or Docker, a
# container sees only its own GPUs). Each executor runs the discovery script, shipped with --files into
# its working directory; it prints the GPUs nvidia-smi lists there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
QUEUE="${QUEUE:-ml}"
SPARK_TRAINER_JAR="${SPARK_TRAINER_JAR:-$root/spark-trainer/target/spark-trainer-0.1.0-SNAPSHOT-all.jar}"
DATA="${DATA:-hdfs:///data/digits}"
JOBS="${JOBS:-hdfs:///jobs/spark-trainer/digits}"
submit="${SPARK_HOME:+$SPARK_HOME/bin/}spark-submit"

if [ ! -f "$SPARK_TRAINER_JAR" ]; then
  echo "submit-yarn.sh: no shaded jar at $SPARK_TRAINER_JAR: build it (mvn -pl spark-trainer -am package -DskipTests) or set SPARK_TRAINER_JAR" >&2
  exit 2
fi

exec "$submit" \
  --master yarn \
  --deploy-mode cluster \
  --queue "$QUEUE" \
  --name spark-trainer-digits \
  --class dev.sparktrainer.cli.SparkTrainerCli \
  --files "$root/deploy/gpu/discover-gpus.sh" \
  --conf spark.driver.memory=4g \
  --conf spark.executor.instances=2 \
  --conf spark.executor.cores=4 \
  --conf spark.executor.memory=16g \
  --conf spark.task.cpus=4 \
  --conf spark.executor.resource.gpu.amount=1 \
  --conf spark.executor.resource.gpu.discoveryScript=./discover-gpus.sh \
  --conf spark.task.resource.gpu.amount=1 \
  --conf spark.yarn.resourceGpuDeviceName=yarn.io/gpu \
  --conf spark.yarn.maxAppAttempts=2 \
  --conf spark.dynamicAllocation.enabled=false \
  --conf spark.driver.extraJavaOptions=-Dai.djl.offline=true \
  --conf spark.executor.extraJavaOptions=-Dai.djl.offline=true \
  --conf spark.executorEnv.OMP_WAIT_POLICY=PASSIVE \
  "$SPARK_TRAINER_JAR" \
  train \
  --data "$DATA/train" \
  --validation-data "$DATA/test" \
  --features pixels --label label --num-classes 10 \
  --model mlp:128,64 --workers 2 --epochs 15 --batch-size 32 --learning-rate 0.003 \
  --gpus \
  --checkpoint-dir "$JOBS/ckpt" --checkpoint-every-steps 100 \
  --output "$JOBS/run" --overwrite \
  --progress log \
  "$@"
