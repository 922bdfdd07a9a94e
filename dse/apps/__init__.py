"""Inference applications (like JEDI's IInferenceApplication): options, network binding, pre/post-processing.

Adding an application is one class registered with ``@register``; ``create_application`` looks it up by the
benchmark's ``application`` name.
"""
from dse.apps.base import APPLICATIONS, InferenceApplication, available_applications, create_application, register
from dse.apps import classify as _classify  # noqa: F401  (registers "classify")
from dse.apps import yolo as _yolo  # noqa: F401  (registers "yolo")

__all__ = ["APPLICATIONS", "InferenceApplication", "available_applications", "create_application", "register"]
