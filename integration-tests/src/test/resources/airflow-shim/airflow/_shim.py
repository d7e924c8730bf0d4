"""TEST SHIM of Apache Airflow's DAG and BaseOperator: they record their arguments, nothing more."""
from __future__ import annotations

_current_dags: list["DAG"] = []

# Arguments of Airflow's BaseOperator that default_args may supply.
_BASE_ARGS = {"owner", "retries", "retry_delay", "retry_exponential_backoff", "execution_timeout", "email",
              "depends_on_past", "pool", "queue", "trigger_rule"}


class DAG:
    def __init__(self, dag_id: str, **kwargs):
        self.dag_id = dag_id
        self.kwargs = kwargs
        self.default_args = dict(kwargs.get("default_args") or {})
        self.tasks: dict[str, "BaseOperator"] = {}

    def __enter__(self) -> "DAG":
        _current_dags.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _current_dags.pop()


class BaseOperator:
    template_fields: tuple[str, ...] = ()

    def __init__(self, task_id: str, dag: DAG | None = None, **kwargs):
        self.task_id = task_id
        self.dag = dag or (_current_dags[-1] if _current_dags else None)
        if self.dag is None:
            raise RuntimeError(f"task {task_id} is not in a DAG")
        if task_id in self.dag.tasks:
            raise RuntimeError(f"duplicate task_id {task_id} in DAG {self.dag.dag_id}")
        # As Airflow does: default_args fill in the operator's arguments that were not given.
        for key, value in self.dag.default_args.items():
            if key in _BASE_ARGS:
                kwargs.setdefault(key, value)
        self.kwargs = kwargs
        self.downstream: list[str] = []
        self.dag.tasks[task_id] = self

    def __rshift__(self, other: "BaseOperator") -> "BaseOperator":
        self.downstream.append(other.task_id)
        return other

    def __lshift__(self, other: "BaseOperator") -> "BaseOperator":
        other.downstream.append(self.task_id)
        return other
