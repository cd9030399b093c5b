"""Benchmark: screenshots by reference (ScreenshotStore keys) vs images carried in the training samples.

``python -m verl_asyncweb.bench screenshots [--trajs 64] [--steps 10] [--batch-trajs 32] [--modes keys,bytes]``
``python -m verl_asyncweb.bench screenshots --full``  (256 ten-step trajectories)

The path mimics verl's: rollout worker actors (like ``AgentLoopWorker``) run trajectories and return one sample
dict per step; the driver gathers a batch of them (``ray.get``, like ``AgentLoopManager.generate_sequences``) and
sends it to a consumer actor (the trainer), which resolves the images and releases them. Screenshots are
realistic 1280x720 JPEGs (text, boxes, a noisy photo area; quality 80, ~115 kB); the first screenshot of each
task is shared by its group of trajectories, as after a reset. Modes:

* ``keys``: samples carry ScreenshotStore keys; bytes go worker -> store once (``put``) and store -> consumer
  (``get``) once.
* ``bytes``: samples carry the JPEG bytes.
* ``pil`` (opt-in, ``--modes keys,bytes,pil``): samples carry decoded PIL images, as verl's ``multi_modal_data``
  does by default; its driver holds ~2.6 MiB per screenshot of a batch (~4.5 GiB at the defaults) and takes minutes.

Each mode runs in its own subprocess with its own Ray cluster, so each driver's peak RSS is its own.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import resource
import subprocess
import sys
import time
import uuid

MODES = ("keys", "bytes", "pil")
IMAGE_FIELDS = ("screenshot_keys", "screenshot_incarnation", "screenshots", "multi_modal_data")
RAY_TIMEOUT_S = 600


def make_screenshot(seed: int, width: int = 1280, height: int = 720, quality: int = 80) -> bytes:
    """A deterministic page-like JPEG: header bar, text lines, boxes and a noisy photo area."""
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    img = Image.new("RGB", (width, height), (250, 250, 250))
    draw = ImageDraw.Draw(img)
    draw.rectangle([0, 0, width, 60], fill=(rng.randrange(256), 60, 120))
    font = ImageFont.load_default(size=16)
    alphabet = "abcdefghijklmnop qrstuvwxyz$0123456789"
    for _ in range(30):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(10, 40)))
        draw.text((rng.randrange(0, width - 180), rng.randrange(70, height - 20)), text, fill=(20, 20, 20), font=font)
    for _ in range(8):
        x, y = rng.randrange(0, width - 180), rng.randrange(70, height - 70)
        box = [x, y, x + rng.randrange(60, 200), y + rng.randrange(20, 60)]
        draw.rectangle(box, outline=(0, 0, 200), width=2)
    noise = Image.frombytes("L", (320, 220), rng.randbytes(320 * 220)).convert("RGB")  # a photo-like busy area
    img.paste(noise, (rng.randrange(0, width - 320), rng.randrange(80, height - 220)))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=quality)
    return out.getvalue()


class RolloutWorker:
    """Plays the agent-loop worker: runs trajectories and returns one sample dict per step."""

    def __init__(self, mode: str, store_name: str | None, steps: int, group_size: int):
        from verl_asyncweb.agent.screenshots import ScreenshotClient

        self.mode = mode
        self.steps = steps
        self.group_size = group_size
        self.client = ScreenshotClient(name=store_name, call_timeout_s=RAY_TIMEOUT_S) if store_name else None
        self.put_bytes = 0

    def run(self, traj_index: int) -> list[dict]:
        import numpy as np
        from PIL import Image

        traj_id = f"traj-{traj_index}"
        task = traj_index // self.group_size
        samples = []
        for step in range(self.steps):
            seed = task * 1_000_003 if step == 0 else traj_index * 1_000 + step + 10**9
            jpeg = make_screenshot(seed)
            sample = {
                "traj_id": traj_id,
                "task_id": f"task-{task}",
                "step_index": step,
                "traj_num_steps": self.steps,
                "policy_version": 0,
                "prompt_ids": np.arange(1024, dtype=np.int32),
                "response_ids": np.arange(256, dtype=np.int32),
                "response_logprobs": np.zeros(256, dtype=np.float32),
            }
            if self.mode == "keys":
                sample["screenshot_keys"] = [self.client.put(jpeg, traj_id)]
                sample["screenshot_incarnation"] = self.client.incarnation
                self.put_bytes += len(jpeg)
            elif self.mode == "bytes":
                sample["screenshots"] = [jpeg]
            else:
                with Image.open(io.BytesIO(jpeg)) as img:
                    sample["multi_modal_data"] = {"image": [img.convert("RGB")]}
            samples.append(sample)
        return samples

    def stats(self) -> dict:
        return {"put_bytes": self.put_bytes}


class Consumer:
    """Plays the trainer: resolves each sample's images and releases consumed trajectories."""

    def __init__(self, store_name: str | None):
        from verl_asyncweb.agent.screenshots import ScreenshotClient

        self.client = ScreenshotClient(name=store_name, call_timeout_s=RAY_TIMEOUT_S) if store_name else None
        self.samples = 0
        self.image_bytes = 0
        self.get_bytes = 0
        self.dropped = 0

    def consume(self, samples: list[dict]) -> int:
        for sample in samples:
            if "screenshot_keys" in sample:
                if not self.client.check(sample["screenshot_keys"], sample["screenshot_incarnation"]):
                    self.dropped += 1
                    continue
                blobs = self.client.get(sample["screenshot_keys"])
                self.get_bytes += sum(len(b) for b in blobs)
                self.image_bytes += sum(len(b) for b in blobs)
            elif "screenshots" in sample:
                self.image_bytes += sum(len(b) for b in sample["screenshots"])
            else:
                self.image_bytes += sum(len(img.tobytes()) for img in sample["multi_modal_data"]["image"])
            self.samples += 1
        if self.client is not None:
            for traj_id in {s["traj_id"] for s in samples}:
                self.client.release(traj_id)
        return len(samples)

    def stats(self) -> dict:
        return {"samples": self.samples, "get_bytes": self.get_bytes, "dropped": self.dropped}


def _rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def run_mode(args: argparse.Namespace) -> dict:
    """Run one mode in this process (with its own Ray cluster) and return its measurements."""
    import ray
    from ray import cloudpickle

    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False, namespace=f"bench-{args.mode}")
    try:
        store_name = None
        client = None
        if args.mode == "keys":
            from verl_asyncweb.agent.screenshots import ScreenshotClient

            store_name = f"bench_store_{uuid.uuid4().hex[:8]}"
            client = ScreenshotClient(name=store_name, budget_bytes=2**30, call_timeout_s=RAY_TIMEOUT_S)
            client.connect()  # the driver owns the store, as in a real job
        worker_cls = ray.remote(num_cpus=1)(RolloutWorker)
        workers = [worker_cls.remote(args.mode, store_name, args.steps, args.group_size) for _ in range(args.workers)]
        consumer = ray.remote(num_cpus=1)(Consumer).remote(store_name)
        rss_before = _rss_mib()
        sample_bytes = 0
        image_field_bytes = 0
        start = time.perf_counter()
        for first in range(0, args.trajs, args.batch_trajs):
            indices = range(first, min(first + args.batch_trajs, args.trajs))
            refs = [workers[i % len(workers)].run.remote(i) for i in indices]
            batch = [s for traj in ray.get(refs, timeout=RAY_TIMEOUT_S) for s in traj]  # the driver holds the batch
            sample_bytes += sum(len(cloudpickle.dumps(s)) for s in batch)
            image_field_bytes += sum(len(cloudpickle.dumps({k: s[k] for k in IMAGE_FIELDS if k in s})) for s in batch)
            ray.get(consumer.consume.remote(batch), timeout=RAY_TIMEOUT_S)
            del batch, refs
        wall_s = time.perf_counter() - start
        put_bytes = sum(ray.get([w.stats.remote() for w in workers], timeout=RAY_TIMEOUT_S)[i]["put_bytes"]
                        for i in range(len(workers)))  # fmt: skip
        consumed = ray.get(consumer.stats.remote(), timeout=RAY_TIMEOUT_S)
        store = client.stats() if client is not None else {}
        peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
        for actor in [*workers, consumer, *([client.handle] if client else [])]:
            ray.kill(actor)
        return {
            "mode": args.mode,
            "trajs": args.trajs,
            "steps": args.steps,
            "samples": consumed["samples"],
            "dropped": consumed["dropped"],
            "sample_bytes_per_traj": sample_bytes / args.trajs,
            "image_field_bytes_per_traj": image_field_bytes / args.trajs,
            "store_bytes_per_traj": (put_bytes + consumed["get_bytes"]) / args.trajs,
            "dedup_hits": store.get("dedup_hits", 0),
            "store_bytes_left": store.get("bytes_held", 0),
            "driver_rss_before_mib": rss_before,
            "driver_peak_rss_mib": peak_rss_mib,
            "wall_s": wall_s,
        }
    finally:
        ray.shutdown()


def _table(results: list[dict]) -> str:
    kib = 1024
    rows = [
        ("samples (rollout -> driver -> trainer), KiB / traj", lambda r: f"{r['sample_bytes_per_traj'] / kib:,.1f}"),
        ("of which image fields, KiB / traj", lambda r: f"{r['image_field_bytes_per_traj'] / kib:,.2f}"),
        ("store traffic (put + get), KiB / traj", lambda r: f"{r['store_bytes_per_traj'] / kib:,.1f}"),
        ("driver peak RSS, MiB", lambda r: f"{r['driver_peak_rss_mib']:,.0f}"),
        ("driver RSS after ray.init, MiB", lambda r: f"{r['driver_rss_before_mib']:,.0f}"),
        ("store dedup hits", lambda r: f"{r['dedup_hits']}"),
        ("samples consumed / dropped", lambda r: f"{r['samples']} / {r['dropped']}"),
        ("wall time, s", lambda r: f"{r['wall_s']:.1f}"),
    ]
    head = "| | " + " | ".join(_LABELS[r["mode"]] for r in results) + " |"
    lines = [head, "| --- |" + " ---: |" * len(results)]
    lines += ["| " + name + " | " + " | ".join(fn(r) for r in results) + " |" for name, fn in rows]
    return "\n".join(lines)


_LABELS = {"keys": "keys by reference", "bytes": "JPEG bytes in samples", "pil": "PIL images in samples (verl)"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.bench screenshots", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--trajs", type=int, default=64, help="trajectories per mode (default 64)")
    parser.add_argument("--steps", type=int, default=10, help="steps per trajectory (default 10)")
    parser.add_argument("--full", action="store_true", help="256 ten-step trajectories")
    parser.add_argument("--batch-trajs", type=int, default=32, help="trajectories the driver gathers per batch")
    parser.add_argument("--group-size", type=int, default=8, help="trajectories per task sharing the reset image")
    parser.add_argument("--workers", type=int, default=2, help="rollout worker actors")
    parser.add_argument("--num-cpus", type=int, default=4, help="logical CPUs of each mode's Ray cluster")
    parser.add_argument(
        "--modes", default="keys,bytes", help=f"comma-separated subset of {','.join(MODES)} (pil: ~4.5 GB driver RSS)"
    )
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # internal: run one mode, print JSON
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.full:
        args.trajs, args.steps = 256, 10
    for name in ("trajs", "steps", "batch_trajs", "group_size", "workers", "num_cpus"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.mode:
        sys.stdout.write(json.dumps(run_mode(args)) + "\n")
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise SystemExit(f"--modes must be a comma-separated subset of {list(MODES)}, got {args.modes!r}")
    results = []
    for mode in modes:
        cmd = [sys.executable, "-m", "verl_asyncweb.bench", "screenshots", "--mode", mode, *argv]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-4000:])
            raise SystemExit(f"mode {mode} failed with exit code {proc.returncode}")
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    sys.stdout.write(
        f"{args.trajs} trajectories x {args.steps} steps, 1280x720 JPEG q80, driver batches of {args.batch_trajs} "
        f"trajectories, {args.workers} rollout workers\n\n{_table(results)}\n"
    )
    return 0
