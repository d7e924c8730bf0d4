"""Airflow DAG: train spark-trainer on YARN every day, gate on metrics.json, publish the model.

    train (SparkSubmitOperator) >> gate_on_metrics (ShortCircuitOperator) >> publish_model (BashOperator)

* ``train`` submits the shaded jar's command line (``spark-trainer train``) to YARN with GPU scheduling,
  like deploy/yarn/submit-yarn.sh. Each DAG run has its own directory ``BASE_DIR/<ds_nodash>``; the
  checkpoints go to ``.../ckpt`` there, so Airflow's retries of the task (``retries``) run the same
  command again and resume from the latest checkpoint instead of starting over (``--overwrite`` lets a
  retry replace a model an interrupted attempt had already written).
* ``gate_on_metrics`` reads ``.../run/metrics.json`` (hdfs dfs -cat for hdfs:// paths) and lets the run
  go on only when the final held-out accuracy reaches MIN_ACCURACY; below it, ``publish_model`` is
  skipped. A missing or malformed metrics.json fails the task.
* ``publish_model`` copies the model to ``MODELS_DIR/<ds_nodash>``.

Airflow 2.4+ or 3.x with apache-airflow-providers-apache-spark. The Spark connection (``spark_yarn``)
gives the master (``yarn``) and the spark-submit binary; deploy mode and queue are set here. Settings
come from the workers' environment (SPARK_TRAINER_*, below) so one file serves every environment.
"""
from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta

from airflow import DAG
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # Airflow 3: the standard provider
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.providers.standard.operators.python import ShortCircuitOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator
    from airflow.operators.python import ShortCircuitOperator


def setting(name: str, default: str) -> str:
    return os.environ.get("SPARK_TRAINER_" + name, default)


CONN_ID = setting("CONN_ID", "spark_yarn")
JAR = setting("JAR", "/opt/spark-trainer/spark-trainer-0.1.0-SNAPSHOT-all.jar")
DATA = setting("DATA", "hdfs:///data/digits")
BASE_DIR = setting("BASE_DIR", "hdfs:///jobs/spark-trainer/digits")
MODELS_DIR = setting("MODELS_DIR", "hdfs:///models/spark-trainer/digits")
QUEUE = setting("QUEUE", "ml")
DEPLOY_MODE = setting("DEPLOY_MODE", "cluster")
EXECUTORS = int(setting("EXECUTORS", "2"))
EXECUTOR_CORES = int(setting("EXECUTOR_CORES", "4"))
GPUS_PER_EXECUTOR = int(setting("GPUS_PER_EXECUTOR", "1"))
DISCOVERY_SCRIPT = setting("DISCOVERY_SCRIPT", "/opt/spark-trainer/gpu/discover-gpus.sh")
EPOCHS = int(setting("EPOCHS", "15"))
MIN_ACCURACY = float(setting("MIN_ACCURACY", "0.95"))

RUN_DIR = BASE_DIR + "/{{ ds_nodash }}"

conf = {
    "spark.submit.deployMode": DEPLOY_MODE,
    "spark.yarn.queue": QUEUE,
    # Airflow's task retries do the retrying (each resumes from the checkpoint).
    "spark.yarn.maxAppAttempts": "1",
    # Barrier stages need a fixed set of executors; one training task per executor JVM.
    "spark.dynamicAllocation.enabled": "false",
    "spark.executor.instances": str(EXECUTORS),
    "spark.executor.cores": str(EXECUTOR_CORES),
    "spark.task.cpus": str(EXECUTOR_CORES),
    "spark.executor.memory": "16g",
    "spark.driver.memory": "4g",
    "spark.driver.extraJavaOptions": "-Dai.djl.offline=true",
    "spark.executor.extraJavaOptions": "-Dai.djl.offline=true",
    "spark.executorEnv.OMP_WAIT_POLICY": "PASSIVE",
}
files = None
gpu_args: list[str] = []
if GPUS_PER_EXECUTOR > 0:
    conf.update({
        "spark.executor.resource.gpu.amount": str(GPUS_PER_EXECUTOR),
        "spark.task.resource.gpu.amount": str(GPUS_PER_EXECUTOR),
        # shipped into each executor's working directory with --files
        "spark.executor.resource.gpu.discoveryScript": "./" + os.path.basename(DISCOVERY_SCRIPT),
        "spark.yarn.resourceGpuDeviceName": "yarn.io/gpu",
    })
    files = DISCOVERY_SCRIPT
    gpu_args = ["--gpus"]


def read_text(path: str) -> str:
    """A file's text from the local disk, or from any Hadoop FS through the hdfs command."""
    if "://" in path and not path.startswith("file://"):
        done = subprocess.run(["hdfs", "dfs", "-cat", path], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise FileNotFoundError(f"Cannot read {path}: hdfs dfs -cat exited with {done.returncode}: "
                                    f"{done.stderr.strip()}")
        return done.stdout
    with open(path.removeprefix("file://"), encoding="utf-8") as f:
        return f.read()


def metrics_meet_target(metrics_path: str, min_accuracy: float) -> bool:
    """True when metrics.json's final held-out accuracy is at least min_accuracy."""
    metrics = json.loads(read_text(metrics_path))
    final = metrics.get("final") or {}
    accuracy = final.get("val_accuracy")
    if accuracy is None:
        raise ValueError(f"{metrics_path} has no final val_accuracy (was the run given --validation-data?)")
    print(f"Held-out accuracy {accuracy:.4f} after {final.get('epochs')} epochs (target {min_accuracy})")
    return float(accuracy) >= float(min_accuracy)


with DAG(
    dag_id="spark_trainer_digits",
    description="Train the digits MLP with spark-trainer on YARN GPUs, gate on metrics.json, publish",
    schedule="@daily",
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "ml-platform", "retries": 3, "retry_delay": timedelta(minutes=5)},
    tags=["spark-trainer"],
) as dag:
    train = SparkSubmitOperator(
        task_id="train",
        conn_id=CONN_ID,
        application=JAR,
        java_class="dev.sparktrainer.cli.SparkTrainerCli",
        name="spark-trainer-digits-{{ ds_nodash }}",
        conf=conf,
        files=files,
        application_args=[
            "train",
            "--data", DATA + "/train",
            "--validation-data", DATA + "/test",
            "--features", "pixels",
            "--label", "label",
            "--num-classes", "10",
            "--model", "mlp:128,64",
            "--workers", str(EXECUTORS),
            "--epochs", str(EPOCHS),
            "--batch-size", "32",
            "--learning-rate", "0.003",
            *gpu_args,
            "--checkpoint-dir", RUN_DIR + "/ckpt",
            "--output", RUN_DIR + "/run",
            "--overwrite",
            "--progress", "log",
        ],
        retries=3,
        retry_delay=timedelta(minutes=5),
        execution_timeout=timedelta(hours=6),
    )

    gate = ShortCircuitOperator(
        task_id="gate_on_metrics",
        python_callable=metrics_meet_target,
        op_kwargs={"metrics_path": RUN_DIR + "/run/metrics.json", "min_accuracy": MIN_ACCURACY},
    )

    publish = BashOperator(
        task_id="publish_model",
        bash_command=("hdfs dfs -mkdir -p " + MODELS_DIR + " && hdfs dfs -cp -f " + RUN_DIR + "/run/model "
                      + MODELS_DIR + "/{{ ds_nodash }}"),
    )

    train >> gate >> publish
