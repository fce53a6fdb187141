"""Metric implementations. Each module is imported lazily through :mod:`capeval.registry`."""
