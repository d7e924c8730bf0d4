"""TEST SHIM of Airflow's ShortCircuitOperator: records its arguments."""
from airflow._shim import BaseOperator


class ShortCircuitOperator(BaseOperator):
    template_fields = ("templates_dict", "op_args", "op_kwargs")
