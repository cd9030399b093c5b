"""The ``hf`` rollout server: token-in/token-out generation with transformers on CPU.

It plays the role of verl's vLLM server for machines without a GPU: a Ray actor with the same ``generate``
contract (prompt ids + images in, sampled ids + per-token log-probs + weight version out) and the same control
calls (abort / resume for partial rollout, no-op sleep and KV-cache calls). Requests run one at a time on a
dedicated thread, so the actor's event loop stays free for control calls and weight updates.
"""

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray
import torch
from verl.workers.rollout.replica import TokenOutput

from verl_asyncweb.algo.sampler_mask import banned_token_ids, mask_logits

logger = logging.getLogger(__name__)


class _AbortCriteria:
    """StoppingCriteria that ends generation between two tokens when an abort is requested."""

    def __init__(self, abort_event: threading.Event) -> None:
        self.abort_event = abort_event

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.Tensor:
        return torch.full((input_ids.shape[0],), self.abort_event.is_set(), dtype=torch.bool)


def _untied_missing(own: dict[str, torch.Tensor], sent: set[str]) -> list[str]:
    """Parameters of ``own`` that a sync of ``sent`` leaves stale: not sent and not sharing storage with a sent one
    (a tied ``lm_head.weight`` is updated through the embedding it shares)."""
    sent_storage = {own[name].untyped_storage().data_ptr() for name in sent}
    return sorted(
        name
        for name, tensor in own.items()
        if name not in sent and tensor.untyped_storage().data_ptr() not in sent_storage
    )


class HFRolloutServer:
    """Rollout server actor holding one HF model; weights are replaced in place by :meth:`load_weights`.

    Args:
        model_path: local folder of the HF checkpoint (config, weights, processor).
        response_length: default cap on generated tokens when a request does not set ``max_tokens``.
        max_model_len: prompt + response tokens beyond which a request is refused (stop reason ``length``).
        seed: seed of the sampling generator.
    """

    def __init__(self, model_path: str, response_length: int, max_model_len: int, seed: int = 0) -> None:
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.processor = AutoProcessor.from_pretrained(model_path)
        self.model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=torch.float32).eval()
        self.response_length = response_length
        # The ids verl's vLLM server never samples (vision placeholders, the tail beyond the tokenizer), banned the
        # same way: this server samples from and reports log-probs of the masked distribution, as vLLM does, and
        # the trainer masks the same ids (``algo.sampler_mask``).
        self.banned_token_ids = banned_token_ids(
            self.processor, len(self.processor.tokenizer), self.model.get_output_embeddings().out_features
        )
        eos_ids = self.model.generation_config.eos_token_id
        self.eos_token_ids = frozenset(eos_ids if isinstance(eos_ids, list) else [eos_ids])
        self.max_model_len = max_model_len
        self.weight_version = 0
        self.generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-generate")
        self._abort_event = threading.Event()
        self._generation_open = asyncio.Event()
        self._generation_open.set()
        self._reject_requests = False
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.stats = {"requests": 0, "aborted": 0, "generated_tokens": 0, "weight_updates": 0}

    # ------------------------------------------------------------------ generation

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        **kwargs: Any,
    ) -> TokenOutput:
        """Sample a response; ``log_probs[i]`` is log pi(token_i) at the request's temperature (pi_behave)."""
        if video_data:
            raise ValueError(f"the hf rollout server does not support video input, got {len(video_data)} videos")
        await self._generation_open.wait()
        if self._reject_requests:
            return TokenOutput(token_ids=[], log_probs=[], stop_reason="aborted", extra_fields=self._version())
        self._in_flight += 1
        self._idle.clear()
        try:
            loop = asyncio.get_running_loop()
            token_ids, log_probs, aborted, (start, end) = await loop.run_in_executor(
                self._executor,
                self._generate_blocking,
                list(prompt_ids),
                dict(sampling_params),
                image_data,
                dict(kwargs.get("mm_processor_kwargs") or {}),
            )
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()
        self._report_activity(start, end)
        self.stats["requests"] += 1
        self.stats["generated_tokens"] += len(token_ids)
        if aborted:
            self.stats["aborted"] += 1
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs,
            stop_reason="aborted" if aborted else "completed",
            extra_fields=self._version(),
        )

    def _report_activity(self, start: float, end: float) -> None:
        """Tell the run's rollout-stats actor when this server was generating (trainer overlap metrics)."""
        if end <= start or not ray.is_initialized():
            return
        try:
            from verl_asyncweb.agent.rollout_stats import stats_actor

            stats_actor().report_generation.remote(start, end)
        except Exception as exc:  # metrics only: never fail a generation for them
            logger.debug("could not report generation activity: %s", exc)

    def _version(self) -> dict[str, Any]:
        return {"global_steps": self.weight_version}

    @torch.no_grad()
    def _generate_blocking(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: list[Any] | None,
        mm_processor_kwargs: dict[str, Any] | None = None,
    ) -> tuple[list[int], list[float], bool, tuple[float, float]]:
        start = time.time()
        if self._abort_event.is_set():
            return [], [], True, (start, start)
        max_new_tokens = sampling_params.get("max_tokens") or sampling_params.get("max_new_tokens")
        max_new_tokens = min(int(max_new_tokens or self.response_length), self.max_model_len - len(prompt_ids))
        if max_new_tokens <= 0:
            return [], [], False, (start, start)
        inputs = self._model_inputs(prompt_ids, image_data, mm_processor_kwargs)
        temperature = float(sampling_params.get("temperature", 1.0))
        greedy = temperature <= 0.0
        top_k = int(sampling_params.get("top_k", -1) or -1)
        output = self.model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=not greedy,
            temperature=None if greedy else temperature,
            top_p=None if greedy else float(sampling_params.get("top_p", 1.0)),
            top_k=None if greedy or top_k <= 0 else top_k,
            stopping_criteria=[_AbortCriteria(self._abort_event)],
            suppress_tokens=self.banned_token_ids or None,
            return_dict_in_generate=True,
            output_logits=True,
            eos_token_id=self.model.generation_config.eos_token_id,
            pad_token_id=self.model.generation_config.pad_token_id,
        )
        new_tokens = output.sequences[0, len(prompt_ids) :]
        logits = torch.stack(output.logits, dim=1)[0].float()  # (response_len, vocab)
        scale = 1.0 if greedy else temperature
        log_probs = self._log_probs(logits, new_tokens, scale)
        # Aborted only if the abort cut it short: a response that ended (EOS or length) as the abort arrived is
        # complete, and verl must not continue it.
        ended_on_eos = len(new_tokens) > 0 and int(new_tokens[-1]) in self.eos_token_ids
        finished = len(new_tokens) == max_new_tokens or ended_on_eos
        aborted = self._abort_event.is_set() and not finished
        return new_tokens.tolist(), log_probs.tolist(), aborted, (start, time.time())

    def _log_probs(self, logits: torch.Tensor, tokens: torch.Tensor, scale: float) -> torch.Tensor:
        """Log-probs of ``tokens`` under the distribution sampled from: banned ids masked, at the temperature
        (vLLM's ``processed_logprobs``, verl's default)."""
        masked = mask_logits(logits, self.banned_token_ids) / scale
        return torch.log_softmax(masked, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

    def _model_inputs(
        self, prompt_ids: list[int], image_data: list[Any] | None, mm_processor_kwargs: dict[str, Any] | None = None
    ) -> dict[str, torch.Tensor]:
        """Model inputs of one request; images are processed with the request's ``mm_processor_kwargs`` (the agent
        loop sends ``data.mm_processor_kwargs``, as the prompt's image tokens were built with them)."""
        input_ids = torch.tensor([prompt_ids], dtype=torch.long)
        inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
        if image_data:
            image_inputs = self.processor.image_processor(
                images=image_data, return_tensors="pt", **(mm_processor_kwargs or {})
            )
            merge = self.processor.image_processor.merge_size**2
            features = int(image_inputs["image_grid_thw"].prod(dim=-1).sum()) // merge
            tokens = prompt_ids.count(self.model.config.image_token_id)
            if features != tokens:
                raise ValueError(
                    f"the prompt has {tokens} image tokens but its images make {features} features: the prompt and "
                    f"the server must process images with the same data.mm_processor_kwargs "
                    f"(server got {mm_processor_kwargs or {}})"
                )
            inputs["pixel_values"] = image_inputs["pixel_values"]
            inputs["image_grid_thw"] = image_inputs["image_grid_thw"]
            inputs["mm_token_type_ids"] = torch.tensor(self.processor.create_mm_token_type_ids(input_ids.tolist()))
        return inputs

    async def next_token_logits(self, prompt_ids: list[int], image_data: list[Any] | None = None) -> torch.Tensor:
        """Logits of the next token after ``prompt_ids`` under the current weights, shape (vocab,)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._next_token_logits_blocking, prompt_ids, image_data)

    @torch.no_grad()
    def _next_token_logits_blocking(self, prompt_ids: list[int], image_data: list[Any] | None) -> torch.Tensor:
        return self.model(**self._model_inputs(list(prompt_ids), image_data)).logits[0, -1].float().clone()

    # ------------------------------------------------------------------ weights

    async def load_weights(self, state_dict: dict[str, torch.Tensor], global_steps: int | None) -> dict[str, Any]:
        """Replace the weights (between two requests) and set the version reported with every token.

        A sync must cover every parameter (tied ones excepted): a partial one raises and changes nothing.
        """
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._executor, self._load_blocking, state_dict)
        if global_steps is not None:
            self.weight_version = int(global_steps)
        self.stats["weight_updates"] += 1
        return result

    def _load_blocking(self, state_dict: dict[str, torch.Tensor]) -> dict[str, Any]:
        own = self.model.state_dict()
        unexpected = sorted(set(state_dict) - set(own))
        if unexpected:
            raise ValueError(f"weight sync sent parameters the rollout model does not have: {unexpected[:5]}")
        missing = _untied_missing(own, set(state_dict))
        if missing:
            # A partial sync would leave the server sampling from a mix of old and new weights, silently.
            raise ValueError(
                f"weight sync left {len(missing)} of the rollout model's parameters stale (not sent, not tied to a "
                f"sent one): {missing[:5]}"
            )
        with torch.no_grad():
            for name, tensor in state_dict.items():
                own[name].copy_(tensor.to(own[name].dtype))
        return {"loaded": len(state_dict)}

    # ------------------------------------------------------------------ control

    async def abort_all_requests(self, reject_request: bool = False) -> None:
        """Stop in-flight generation at the next token (partial rollout); hold new requests until resume."""
        self._generation_open.clear()
        self._reject_requests = reject_request
        self._abort_event.set()
        await self._idle.wait()

    async def resume_generation(self) -> None:
        self._abort_event.clear()
        self._reject_requests = False
        self._generation_open.set()

    async def get_stats(self) -> dict[str, Any]:
        return {**self.stats, "weight_version": self.weight_version, "in_flight": self._in_flight}

    async def get_weight_version(self) -> int:
        return self.weight_version

    # Memory control calls exist for vLLM/SGLang; weights and cache of a CPU model stay in place.
    async def sleep(self) -> None:
        return None

    async def wake_up(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def start_profile(self, **kwargs) -> None:
        return None

    async def stop_profile(self) -> None:
        return None
