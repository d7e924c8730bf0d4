"""TEST SHIM of Apache Airflow (see ../README.md): only what deploy/airflow's DAG imports."""
from airflow._shim import DAG

__all__ = ["DAG"]
