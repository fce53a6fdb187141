"""Execution engines beyond the in-process one (Ray: :mod:`capeval.engines.ray_engine`).

Nothing here imports Ray at module level: ``import capeval`` stays light and Ray is the
optional ``capeval[ray]`` extra.
"""
