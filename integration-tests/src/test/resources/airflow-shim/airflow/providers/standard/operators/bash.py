"""TEST SHIM of Airflow's BashOperator: records its arguments."""
from airflow._shim import BaseOperator


class BashOperator(BaseOperator):
    template_fields = ("bash_command", "env", "cwd")
