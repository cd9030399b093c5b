"""``decoupled_ppo`` through verl's own update path, in-process on CPU.

What verl 0.9.1 does with a batch of step-samples, step by step, with verl's functions:
``padding_utils.construct_minimal_padding_template`` (the synthetic rows ``_balance_batch`` appends so the row
count divides the mini-batch size), ``tensordict_utils.make_iterator`` (mini-batches, as
``TrainingWorker.train_mini_batch``), the FSDP engine's ``batch_num_tokens = loss_mask.sum()`` per mini-batch,
``engine.utils.prepare_micro_batches`` and finally ``workers.utils.losses.ppo_loss``, the engine worker's loss
function, with a real ``FSDPActorConfig``. Only the model is replaced: per-row parameters ``theta`` whose
``-softplus`` are the token log-probs, so gradients are exact and per token.
"""

import pytest
import torch
from algo_helpers import make_actor_config
from tensordict import TensorDict
from torch.testing import assert_close
from verl.trainer.ppo.padding_utils import construct_minimal_padding_template
from verl.utils import tensordict_utils as tu
from verl.workers.engine.utils import prepare_micro_batches
from verl.workers.utils.losses import ppo_loss

from verl_asyncweb.algo.losses import compute_policy_loss_decoupled_ppo
from verl_asyncweb.algo.trajectories import compute_multistep_advantages_for_batch

EOS = 2


def _real_rows(n_rows: int = 7, seed: int = 0) -> list[dict]:
    """Step-samples of three trajectories (3, 2, 2 steps) of one task, with stale behaviour weights."""
    gen = torch.Generator().manual_seed(seed)
    traj = ["a", "a", "a", "b", "b", "c", "c"][:n_rows]
    reward = {"a": 1.0, "b": 0.0, "c": 0.0}
    rows = []
    for r in range(n_rows):
        p, q = 3 + r % 4, 2 + (r * 2) % 5
        prompts, responses = torch.randint(3, 50, (p,), generator=gen), torch.randint(3, 50, (q,), generator=gen)
        response_mask = torch.ones(q, dtype=torch.int64)
        if r == 1:
            response_mask[-1] = 0  # a masked token inside a real row
        w = torch.exp(0.5 * torch.randn(q, generator=gen)) * response_mask
        if r == 2:
            w[0] = 9.0  # above the cap: dropped
        rows.append(
            dict(
                prompts=prompts,
                responses=responses,
                input_ids=torch.cat([prompts, responses]),
                attention_mask=torch.ones(p + q, dtype=torch.int64),
                position_ids=torch.arange(p + q),
                response_mask=response_mask,
                loss_mask=response_mask.clone(),
                rm_scores=torch.zeros(q).index_fill_(0, torch.tensor([q - 1]), reward[traj[r]]),
                old_log_probs=-0.5 - torch.rand(q, generator=gen),
                rollout_is_weights=w,
                row_id=torch.tensor(r),
                traj_id=traj[r],
            )
        )
    return rows


def _pad_to_multiple(rows: list[dict], multiple: int) -> list[dict]:
    """Append verl's synthetic padding rows; then fill the fields verl computes after padding."""
    rows = list(rows)
    source = {k: v for k, v in rows[0].items() if k not in ("old_log_probs", "rollout_is_weights")}
    while len(rows) % multiple:
        template, _ = construct_minimal_padding_template(source, {"seq_len": 0}, EOS)
        template.update(
            old_log_probs=torch.full((1,), -0.7),  # recomputed by the trainer for every row
            rollout_is_weights=torch.zeros(1),  # verl: raw weights * response_mask
            row_id=torch.tensor(len(rows)),
        )
        rows.append(template)
    return rows


def _with_advantages(rows: list[dict]) -> list[dict]:
    """Our advantages for every row, padding included (zero-mask rows get 0)."""
    width = max(r["responses"].numel() for r in rows)
    rewards = torch.stack([torch.nn.functional.pad(r["rm_scores"], (0, width - r["rm_scores"].numel())) for r in rows])
    mask = torch.stack(
        [torch.nn.functional.pad(r["response_mask"], (0, width - r["response_mask"].numel())) for r in rows]
    )
    adv = compute_multistep_advantages_for_batch(
        rewards, mask.float(), ["task"] * len(rows), [r["traj_id"] for r in rows], None, {"step_norm": "traj"}
    ).advantages
    out = []
    for r, a in zip(rows, adv, strict=True):
        fields = {k: v for k, v in r.items() if k not in ("traj_id", "rm_scores")}
        fields["advantages"] = a[: r["responses"].numel()].clone()
        out.append(fields)
    return out


def _thetas(rows: list[dict]) -> dict[int, torch.Tensor]:
    gen = torch.Generator().manual_seed(11)
    return {int(r["row_id"]): torch.randn(r["input_ids"].numel(), generator=gen).requires_grad_() for r in rows}


def _verl_update(rows, thetas, mini_batch_size: int, micro_batch_size: int, config):
    """verl's mini-batch / micro-batch loop around ppo_loss; returns the summed loss of each mini-batch."""
    data = tu.list_of_dict_to_tensordict(rows)
    tu.assign_non_tensor(data, global_batch_size=mini_batch_size)
    losses, metrics = [], []
    for mini in tu.make_iterator(data, mini_batch_size, epochs=1, seed=0, dataloader_kwargs={"shuffle": False}):
        tu.assign_non_tensor(mini, batch_num_tokens=mini["loss_mask"].values().sum().item(), dp_size=1)
        tu.assign_non_tensor(mini, use_dynamic_bsz=False, micro_batch_size_per_gpu=micro_batch_size)
        micro_batches, _ = prepare_micro_batches(mini, dp_group=None)
        total = torch.zeros(())
        for micro in micro_batches:
            ids = micro["row_id"].tolist()
            log_probs = torch.cat([-torch.nn.functional.softplus(thetas[i]) for i in ids])
            loss, m = ppo_loss(config, {"log_probs": log_probs}, micro)
            loss.backward()
            total = total + loss.detach()
            metrics.append(m)
        losses.append(total)
    return losses, metrics


def _direct_loss(rows, thetas, config_without_global_info):
    """The same objective written without verl's batching: our loss on dense tensors of the given rows."""
    width = max(r["responses"].numel() for r in rows)

    def dense(key):
        return torch.stack([torch.nn.functional.pad(r[key], (0, width - r[key].numel())) for r in rows])

    log_probs = []
    for r in rows:
        full = -torch.nn.functional.softplus(thetas[int(r["row_id"])])
        q = r["responses"].numel()
        resp = full[full.numel() - q - 1 : full.numel() - 1]  # token t's log-prob sits at position t-1
        log_probs.append(torch.nn.functional.pad(resp, (0, width - q)))
    loss, _ = compute_policy_loss_decoupled_ppo(
        dense("old_log_probs"),
        torch.stack(log_probs),
        dense("advantages"),
        dense("response_mask").bool(),
        "token-mean",
        config_without_global_info,
        dense("rollout_is_weights"),
    )
    return loss


@pytest.fixture
def padded_rows():
    return _with_advantages(_pad_to_multiple(_real_rows(7), 4))


def test_seven_step_samples_are_padded_to_eight_and_each_minibatch_matches_the_direct_loss(padded_rows):
    assert len(padded_rows) == 8 and padded_rows[-1]["response_mask"].sum() == 0
    thetas = _thetas(padded_rows)
    losses, metrics = _verl_update(padded_rows, thetas, 4, 2, make_actor_config())
    verl_grads = {i: t.grad.clone() for i, t in thetas.items()}

    reference = _thetas(padded_rows)
    for mini_rows in (padded_rows[:4], padded_rows[4:7]):  # the second mini-batch without its padding row
        loss = _direct_loss(mini_rows, reference, make_actor_config())
        loss.backward()
        assert_close(losses.pop(0), loss.detach(), rtol=1e-6, atol=1e-7)
    for i in range(7):
        assert_close(verl_grads[i], reference[i].grad, rtol=1e-6, atol=1e-8)
    assert (verl_grads[7] == 0).all()
    assert any(m["actor/behav_over_cap_frac"].aggregate() > 0 for m in metrics)  # row 2's token was dropped


def test_zero_mask_padding_rows_change_neither_loss_nor_gradient(padded_rows):
    last = padded_rows[4:]  # rows 4, 5, 6 and one padding row
    with_pad = _thetas(last)
    loss_pad, _ = _verl_update(last, with_pad, 4, 2, make_actor_config())
    without_pad = _thetas(last[:3])
    loss_plain, _ = _verl_update(last[:3], without_pad, 3, 1, make_actor_config())
    assert_close(loss_pad[0], loss_plain[0], rtol=1e-6, atol=1e-7)
    for i in without_pad:
        assert_close(with_pad[i].grad, without_pad[i].grad, rtol=1e-6, atol=1e-8)
    assert (with_pad[7].grad == 0).all()


def test_ppo_loss_selects_decoupled_ppo_from_the_actor_config(padded_rows, monkeypatch):
    import verl.workers.utils.losses as verl_losses

    seen = []
    real = verl_losses.get_policy_loss_fn

    def spy(name):
        seen.append(name)
        return real(name)

    monkeypatch.setattr(verl_losses, "get_policy_loss_fn", spy)
    _verl_update(padded_rows[:4], _thetas(padded_rows[:4]), 4, 2, make_actor_config())
    assert seen and set(seen) == {"decoupled_ppo"}
    assert real("decoupled_ppo") is compute_policy_loss_decoupled_ppo


def test_batch_keys_are_tensordict_fields_verl_passes():
    # Guards the assumption the loss relies on: ppo_loss hands the policy loss only these fields, so
    # pi_behave must be recovered from old_log_probs and rollout_is_weights.
    import inspect

    source = inspect.getsource(ppo_loss)
    assert 'fields = ["response_mask", "old_log_probs", "advantages"]' in source
    assert 'fields.append("rollout_is_weights")' in source
    assert "rollout_log_probs" not in source
    assert isinstance(tu.list_of_dict_to_tensordict([{"x": torch.ones(1)}]), TensorDict)
