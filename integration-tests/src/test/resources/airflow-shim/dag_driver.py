"""Imports an Airflow DAG file against the test shim and prints what it would run (AirflowDagIT).

    python3 dag_driver.py DAG_FILE describe --ds 2025-01-02 --master yarn
    python3 dag_driver.py DAG_FILE gate TASK_ID --ds 2025-01-02

describe: every DAG of the file as JSON, each task's arguments with the templated fields rendered by
Jinja2 for that logical date (StrictUndefined: an unknown template variable is an error), and for each
SparkSubmitOperator the spark-submit command it would run with the connection's master — in the order
the Airflow provider's SparkSubmitHook builds it: --master, --conf, --files, --name, --class,
application, application arguments. An argument this builder does not know fails instead of being
dropped. gate: calls a ShortCircuitOperator's python_callable with its rendered op_kwargs and prints
{"result": ...}.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shim's `airflow` package first

import jinja2  # noqa: E402

from airflow._shim import DAG  # noqa: E402

SUBMIT_ARGS = {"conn_id", "application", "java_class", "name", "conf", "files", "application_args", "retries",
               "retry_delay", "execution_timeout", "owner"}


def render(value, context):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    if isinstance(value, str):
        return env.from_string(value).render(**context)
    if isinstance(value, (list, tuple)):
        return [render(v, context) for v in value]
    if isinstance(value, dict):
        return {k: render(v, context) for k, v in value.items()}
    return value


def rendered_kwargs(task, context):
    return {k: render(v, context) if k in task.template_fields else v for k, v in task.kwargs.items()}


def spark_submit_command(kwargs, master):
    unknown = set(kwargs) - SUBMIT_ARGS
    if unknown:
        raise SystemExit(f"dag_driver: SparkSubmitOperator arguments this builder does not handle: {sorted(unknown)}")
    cmd = ["spark-submit", "--master", master]
    for key, value in (kwargs.get("conf") or {}).items():
        cmd += ["--conf", f"{key}={value}"]
    if kwargs.get("files"):
        cmd += ["--files", kwargs["files"]]
    if kwargs.get("name"):
        cmd += ["--name", kwargs["name"]]
    if kwargs.get("java_class"):
        cmd += ["--class", kwargs["java_class"]]
    cmd.append(kwargs["application"])
    cmd += [str(a) for a in kwargs.get("application_args") or []]
    return cmd


def jsonable(value):
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if callable(value):
        return getattr(value, "__name__", repr(value))
    return value


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dag_file")
    p.add_argument("mode", choices=["describe", "gate"])
    p.add_argument("task_id", nargs="?")
    p.add_argument("--ds", required=True)
    p.add_argument("--master", default="yarn")
    a = p.parse_args()
    spec = importlib.util.spec_from_file_location("dag_under_test", a.dag_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dags = [v for v in vars(module).values() if isinstance(v, DAG)]
    if not dags:
        raise SystemExit(f"dag_driver: no DAG in {a.dag_file}")
    day = dt.date.fromisoformat(a.ds)
    context = {"ds": day.isoformat(), "ds_nodash": day.strftime("%Y%m%d")}
    if a.mode == "gate":
        task = next((t for d in dags for t in d.tasks.values() if t.task_id == a.task_id), None)
        if task is None:
            raise SystemExit(f"dag_driver: no task {a.task_id}")
        kw = rendered_kwargs(task, context)
        print(json.dumps({"result": kw["python_callable"](*kw.get("op_args", []), **kw.get("op_kwargs", {}))}))
        return
    out = {"dags": []}
    for d in dags:
        tasks = []
        for t in d.tasks.values():
            kw = rendered_kwargs(t, context)
            entry = {"task_id": t.task_id, "operator": type(t).__name__, "kwargs": jsonable(kw),
                     "downstream": t.downstream}
            if type(t).__name__ == "SparkSubmitOperator":
                entry["spark_submit"] = spark_submit_command(kw, a.master)
            tasks.append(entry)
        out["dags"].append({"dag_id": d.dag_id, "args": jsonable(d.kwargs), "tasks": tasks})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
