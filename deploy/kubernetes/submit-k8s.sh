#!/usr/bin/env bash
# The job of spark-application.yaml as a plain spark-submit to Kubernetes (no operator): the same image,
# main class, jar, arguments and Spark settings, the pod templates from this directory. Run it where
# Spark 4.1.0 is installed (SPARK_HOME) and kubectl's credentials reach the cluster:
#
#   K8S_MASTER=k8s://https://<api-server>:6443 IMAGE=<registry>/spark-trainer:0.1.0-SNAPSHOT-cuda \
#     deploy/kubernetes/submit-k8s.sh
#
# Extra arguments are appended to the trainer's (e.g. --epochs 30). Settings: K8S_MASTER, NAMESPACE
# (spark-jobs), SERVICE_ACCOUNT (spark-trainer), IMAGE, HDFS (hdfs://namenode.hdfs.svc:8020).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_MASTER="${K8S_MASTER:-k8s://https://kubernetes.default.svc:443}"
NAMESPACE="${NAMESPACE:-spark-jobs}"
SERVICE_ACCOUNT="${SERVICE_ACCOUNT:-spark-trainer}"
IMAGE="${IMAGE:-registry.example.com/spark-trainer:0.1.0-SNAPSHOT-cuda}"
HDFS="${HDFS:-hdfs://namenode.hdfs.svc:8020}"
submit="${SPARK_HOME:+$SPARK_HOME/bin/}spark-submit"

exec "$submit" \
  --master "$K8S_MASTER" \
  --deploy-mode cluster \
  --name spark-trainer-digits \
  --class dev.sparktrainer.cli.SparkTrainerCli \
  --conf spark.kubernetes.namespace="$NAMESPACE" \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName="$SERVICE_ACCOUNT" \
  --conf spark.kubernetes.container.image="$IMAGE" \
  --conf spark.kubernetes.container.image.pullPolicy=IfNotPresent \
  --conf spark.kubernetes.driver.podTemplateFile="$here/driver-pod-template.yaml" \
  --conf spark.kubernetes.executor.podTemplateFile="$here/executor-pod-template.yaml" \
  --conf spark.driver.cores=1 \
  --conf spark.driver.memory=4g \
  --conf spark.executor.instances=2 \
  --conf spark.executor.cores=4 \
  --conf spark.executor.memory=16g \
  --conf spark.executor.resource.gpu.amount=1 \
  --conf spark.executor.resource.gpu.vendor=nvidia.com \
  --conf spark.executor.resource.gpu.discoveryScript=/opt/spark-trainer/gpu/discover-gpus.sh \
  --conf spark.task.resource.gpu.amount=1 \
  --conf spark.task.cpus=4 \
  --conf spark.dynamicAllocation.enabled=false \
  --conf spark.driver.extraJavaOptions=-Dai.djl.offline=true \
  --conf spark.executor.extraJavaOptions=-Dai.djl.offline=true \
  --conf spark.executorEnv.OMP_WAIT_POLICY=PASSIVE \
  local:///opt/spark-trainer/spark-trainer-0.1.0-SNAPSHOT-all.jar \
  train \
  --data "$HDFS/data/digits/train" \
  --validation-data "$HDFS/data/digits/test" \
  --features pixels --label label --num-classes 10 \
  --model mlp:128,64 --workers 2 --epochs 15 --batch-size 32 --learning-rate 0.003 \
  --gpus \
  --checkpoint-dir "$HDFS/jobs/spark-trainer/digits/ckpt" --checkpoint-every-steps 100 \
  --output "$HDFS/jobs/spark-trainer/digits/run" --overwrite \
  --progress log \
  "$@"
