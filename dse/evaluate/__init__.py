"""The measurement service: configuration -> cache lookup -> build engines -> measure -> Parquet row."""
from dse.evaluate.evaluator import Evaluator

__all__ = ["Evaluator"]
