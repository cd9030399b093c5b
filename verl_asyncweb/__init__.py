"""verl_asyncweb: fully asynchronous multi-step RL for vision-language web agents, as a verl plugin.

Importing this package does nothing heavy; verl loads :mod:`verl_asyncweb.plugin` through the
``verl.plugins`` entry point and that module performs every registration.
"""

__version__ = "0.1.0"
