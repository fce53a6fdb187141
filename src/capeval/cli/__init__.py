"""The ``capeval`` command line (``capeval score | bench | list | info | download``)."""

from capeval.cli.main import main

__all__ = ["main"]
