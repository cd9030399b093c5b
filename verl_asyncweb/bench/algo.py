"""Benchmark: ``decoupled_ppo`` loss + multi-step advantages vs verl's ``vanilla`` loss on the same tensors.

``python -m verl_asyncweb.bench algo [--batch 256] [--resp-len 512] [--repeats 30] [--threads 1]``

All cases run in one process on the same CPU tensors, interleaved round by round so that machine load hits
them alike; the table reports medians. Target (issue 3): decoupled loss + advantages <= 1.2x vanilla.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch


def _inputs(batch: int, resp_len: int, seed: int = 0) -> dict:
    """Step-sample batch: 8 groups, trajectories of 2-12 steps, stale behaviour log-probs."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(resp_len // 4, resp_len + 1, (batch,), generator=gen)
    mask = torch.arange(resp_len).unsqueeze(0) < lengths.unsqueeze(1)
    uid, traj_id, num_steps, rewards = [], [], [], []
    traj, row = 0, 0
    while row < batch:
        steps = int(torch.randint(2, 13, (1,), generator=gen))
        steps = min(steps, batch - row)
        reward = float(torch.rand(1, generator=gen) < 0.4)
        for _ in range(steps):
            uid.append(f"task{traj % 8}")
            traj_id.append(f"traj{traj}")
            num_steps.append(steps)
            rewards.append(reward)
        traj, row = traj + 1, row + steps
    token_level_rewards = torch.zeros(batch, resp_len)
    token_level_rewards[torch.arange(batch), lengths - 1] = torch.tensor(rewards)
    old = -torch.rand(batch, resp_len, generator=gen) * 2.0
    log_prob = old + 0.2 * torch.randn(batch, resp_len, generator=gen)
    behave = old + 0.5 * torch.randn(batch, resp_len, generator=gen)
    weights = torch.exp(old - behave) * mask
    return dict(
        mask=mask,
        uid=uid,
        traj_id=traj_id,
        num_steps=num_steps,
        token_level_rewards=token_level_rewards,
        old=old,
        log_prob=log_prob,
        weights=weights,
    )


def _actor_config():
    from verl.workers.config import FSDPActorConfig

    from verl_asyncweb.algo.config import DecoupledPolicyLossConfig

    return FSDPActorConfig(
        strategy="fsdp",
        ppo_mini_batch_size=256,
        ppo_micro_batch_size_per_gpu=8,
        rollout_n=1,
        policy_loss=DecoupledPolicyLossConfig(loss_mode="decoupled_ppo"),
    )


def _cases(x: dict, config) -> dict[str, Callable[[], None]]:
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla

    from verl_asyncweb.algo.losses import compute_policy_loss_decoupled_ppo
    from verl_asyncweb.algo.trajectories import compute_multistep_advantages_for_batch

    def advantages():
        return compute_multistep_advantages_for_batch(
            x["token_level_rewards"], x["mask"], x["uid"], x["traj_id"], x["num_steps"]
        ).advantages

    adv = advantages()

    def vanilla(backward: bool, adv_fn=None):
        def run():
            lp = x["log_prob"].clone().requires_grad_(backward)
            a = adv_fn() if adv_fn else adv
            loss, _ = compute_policy_loss_vanilla(x["old"], lp, a, x["mask"], "token-mean", config, x["weights"])
            if backward:
                loss.backward()

        return run

    def decoupled(backward: bool, adv_fn=None):
        def run():
            lp = x["log_prob"].clone().requires_grad_(backward)
            a = adv_fn() if adv_fn else adv
            loss, _ = compute_policy_loss_decoupled_ppo(x["old"], lp, a, x["mask"], "token-mean", config, x["weights"])
            if backward:
                loss.backward()

        return run

    return {
        "vanilla loss (forward)": vanilla(False),
        "decoupled_ppo loss (forward)": decoupled(False),
        "decoupled_ppo loss + multistep_grpo advantages (forward)": decoupled(False, advantages),
        "vanilla loss (forward+backward)": vanilla(True),
        "decoupled_ppo loss (forward+backward)": decoupled(True),
        "decoupled_ppo loss + multistep_grpo advantages (forward+backward)": decoupled(True, advantages),
        "multistep_grpo advantages alone": advantages,
    }


def _time(cases: dict[str, Callable[[], None]], repeats: int, warmup: int = 3) -> dict[str, float]:
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) * 1e3 for name, ts in samples.items()}


def _table(medians: dict[str, float], header: str) -> str:
    baseline = {"forward": medians["vanilla loss (forward)"], "backward": medians["vanilla loss (forward+backward)"]}
    lines = [header, "", "| case | median ms | vs vanilla |", "| --- | ---: | ---: |"]
    for name, ms in medians.items():
        base = baseline["backward"] if "backward" in name else baseline["forward"]
        ratio = "" if "alone" in name else f"{ms / base:.2f}x"
        lines.append(f"| {name} | {ms:.2f} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench algo", description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--resp-len", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (the CI box has 2 cores)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    x = _inputs(args.batch, args.resp_len)
    medians = _time(_cases(x, _actor_config()), args.repeats)
    header = (
        f"decoupled_ppo vs vanilla: batch {args.batch} x {args.resp_len} tokens, CPU, {args.threads} thread(s), "
        f"median of {args.repeats} interleaved repeats, torch {torch.__version__}"
    )
    sys.stdout.write(_table(medians, header) + "\n")
    return 0
