"""Typed config of the trainer-side pixel rebuild (``asyncweb.pixels``)."""

from __future__ import annotations

from dataclasses import dataclass

from verl.base_config import BaseConfig

from verl_asyncweb.config.build import check_int


@dataclass
class PixelRebuildConfig(BaseConfig):
    """How the trainer turns a batch's screenshot keys into ``pixel_values`` before pi_prox is recomputed.

    The batch is rebuilt in chunks that go straight into TransferQueue, so no process ever holds the whole batch's
    pixels (640 step-samples of 1280x720 screenshots are ~13 GB of float32 pixels with Qwen3-VL's processor).

    Args:
        workers: Ray actors that rebuild chunks in parallel, each fetching its rows from TransferQueue and the
            screenshot store and putting the pixels back itself; 0 rebuilds the chunks one by one in the trainer
            process (enough on a laptop).
        chunk_samples: Step-samples per chunk: the most pixels one process holds at a time.
        worker_cpus: CPUs Ray reserves for each worker (0 on CPU recipes, whose cores the trainer ranks hold).
        build_ahead: With a pool, hand the rows the next local update will likely sample to the workers as soon as
            the current one's are sampled, so they are built while it trains (``trainer.pixels_ahead``).
    """

    workers: int = 0
    chunk_samples: int = 32
    worker_cpus: float = 1.0
    build_ahead: bool = True

    def __post_init__(self):
        check_int("asyncweb.pixels.workers", self.workers, 0)
        check_int("asyncweb.pixels.chunk_samples", self.chunk_samples, 1)
        if self.worker_cpus < 0:
            raise ValueError(f"asyncweb.pixels.worker_cpus must be >= 0, got {self.worker_cpus}")
