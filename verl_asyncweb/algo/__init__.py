"""Algorithms (DESIGN.md section 5): decoupled-PPO loss, multi-step advantages with the step normalizer.

Registering modules (imported by ``verl_asyncweb.plugin``): :mod:`verl_asyncweb.algo.losses` (policy loss
``decoupled_ppo``) and :mod:`verl_asyncweb.algo.estimators` (advantage estimators ``multistep_grpo``,
``multistep_reinforce``, ``raftpp``). Plain functions: :mod:`~verl_asyncweb.algo.advantages` (per trajectory),
:mod:`~verl_asyncweb.algo.trajectories` (per step-sample batch), :mod:`~verl_asyncweb.algo.verl_keys` (the verl
keys a recipe must set), :mod:`~verl_asyncweb.algo.sampler_mask` (the tokens the servers never sample, masked in the
trainer). Nothing is imported here, so importing the package registers nothing.
"""
