"""Capacity planner for the async pipeline: ``python -m verl_asyncweb.plan --profile gpu_paper``.

A discrete-event simulation of episodes on browser pages, rollout replicas and the trainer under the staleness
bound, driven only by a profile file of costs and shape (:mod:`verl_asyncweb.plan.profile`). Imports neither verl
nor torch.
"""

from verl_asyncweb.plan.prediction import Prediction
from verl_asyncweb.plan.profile import Profile
from verl_asyncweb.plan.profile_file import load_profile
from verl_asyncweb.plan.simulate import simulate

__all__ = ["Prediction", "Profile", "load_profile", "simulate"]
