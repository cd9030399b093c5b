"""Compare training runs: read run folders, tabulate final/best metrics, plot curves, launch sweeps.

Entry point: ``python -m verl_asyncweb.compare RUN_DIR [RUN_DIR ...]`` (see :mod:`verl_asyncweb.compare.cli`).
Metric names shared with the trainer live in :mod:`verl_asyncweb.compare.metric_names`.
"""
