#!/usr/bin/env bash
# `spark-trainer doctor` inside the images (deploy/docker/): whether PyTorch trains in this container
# with its libtorch and DJL JNI (PYTORCH_LIBRARY_PATH, PYTORCH_VERSION, PYTORCH_FLAVOR), and a tiny
# training step on each visible GPU. Exits 0 when it works, 1 with one line saying what to do.
#   docker run --rm --gpus all IMAGE /opt/spark-trainer/gpu/doctor.sh
# Spark's jars come from SPARK_HOME (the command line's classes refer to them; no session starts).
set -euo pipefail
: "${SPARK_HOME:=/opt/spark}"
: "${SPARK_TRAINER_JAR:=/opt/spark-trainer/spark-trainer-0.1.0-SNAPSHOT-all.jar}"
[ -f "$SPARK_TRAINER_JAR" ] || { echo "doctor.sh: no trainer jar at $SPARK_TRAINER_JAR (set SPARK_TRAINER_JAR)" >&2; exit 2; }
[ -d "$SPARK_HOME/jars" ] || { echo "doctor.sh: no Spark at SPARK_HOME=$SPARK_HOME" >&2; exit 2; }
# shellcheck disable=SC2086 # JAVA_OPTS holds several flags
exec java -Dai.djl.offline=true ${JAVA_OPTS:-} -cp "$SPARK_TRAINER_JAR:$SPARK_HOME/jars/*" \
  dev.sparktrainer.cli.SparkTrainerCli doctor "$@"
