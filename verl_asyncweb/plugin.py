"""Entry point of verl's ``verl.plugins`` group: importing this module performs every registration.

verl imports it in the driver and in every Ray worker when ``verl`` is imported. Each module below registers
on its definitions with verl's own registries; nothing here starts a browser, Ray or any I/O.

| module | registers |
| --- | --- |
| backends.cpu_platform | platform ``cpu`` |
| backends.cpu_backend | FSDP engines for device ``cpu`` and the CPU workarounds (only when ``VERL_PLATFORM=cpu``) |
| backends.verl_compat | the workarounds of verl bugs that hit every platform (applied at the end) |
| backends.hf_replica | rollout replica ``hf`` |
| backends.weight_sync | checkpoint engine ``ray_object_store`` |
| algo.losses | policy loss ``decoupled_ppo`` |
| algo.estimators | advantage estimators ``multistep_grpo``, ``multistep_reinforce``, ``raftpp`` |
| agent.loop | agent loop ``web_agent`` |
| trainer.asyncweb_trainer | V1 trainer ``asyncweb`` |
"""

# isort: off
# The cpu platform must be registered before any module below makes verl resolve its platform.
from verl_asyncweb.backends import cpu_platform, cpu_backend, hf_replica, verl_compat, weight_sync  # noqa: F401
from verl_asyncweb.algo import estimators, losses  # noqa: F401
from verl_asyncweb.agent import loop  # noqa: F401
from verl_asyncweb.trainer import asyncweb_trainer  # noqa: F401

# isort: on

verl_compat.apply_workarounds()
