"""VisCE2's backends now live in the shared judge layer, :mod:`capeval.judges.backends`; this
module keeps the old import path."""

from capeval.judges.backends import NAMES, Answer, Backend, Request

__all__ = ["NAMES", "Answer", "Backend", "Request"]
