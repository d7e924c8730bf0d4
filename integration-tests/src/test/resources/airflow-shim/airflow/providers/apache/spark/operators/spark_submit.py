"""TEST SHIM of apache-airflow-providers-apache-spark's SparkSubmitOperator: records its arguments."""
from airflow._shim import BaseOperator


class SparkSubmitOperator(BaseOperator):
    template_fields = ("application", "conf", "files", "py_files", "jars", "driver_class_path", "packages",
                       "exclude_packages", "keytab", "principal", "proxy_user", "name", "application_args",
                       "env_vars", "properties_file")
