"""Why no training step comes, on the console, and a bounded stop when none can.

A run whose episodes all fail (a judge that went away, a site that blocks every browser) trains nothing: verl's
replay buffer evicts every group with a failed episode and waits for others, and the failures are otherwise only in
the Ray workers' logs. The driver polls the rollout-stats actor: once no step has come for a minute while episodes
failed, a console line says how many of the episodes since the last step failed and why; when not one group has
finished without a failure for ``asyncweb.stall_timeout_s``, the run is stopped (exit code 1) naming the cause.
"""

from __future__ import annotations

import _thread
import logging
import threading
import time

logger = logging.getLogger(__name__)

POLL_S = 10.0
REPORT_EVERY_S = 60.0
"""No step for this long with failed episodes gets a console line (and again every this long)."""


class StallWatch:
    """See the module docstring; ``stall_timeout_s`` 0 reports only and never stops the run."""

    def __init__(self, stall_timeout_s: float, report_every_s: float = REPORT_EVERY_S, poll_s: float = POLL_S):
        self.stall_timeout_s = stall_timeout_s
        self.report_every_s = report_every_s
        self.poll_s = poll_s
        self.cause: str | None = None
        """Why the watch stopped the run (None while it has not)."""
        self._started_at = time.time()
        self._reported_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-watch", daemon=True)

    def start(self) -> StallWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _watch(self) -> None:
        import ray

        from verl_asyncweb.agent.rollout_stats import stats_actor

        while not self._stop.wait(self.poll_s):
            try:
                window = ray.get(stats_actor().since_drain.remote(), timeout=30)
            except (ray.exceptions.RayError, TimeoutError) as exc:
                logger.debug("stall watch: no rollout stats (%s)", exc)
                continue
            if self.check(window, time.time()):
                _thread.interrupt_main()  # the driver's wait on verl raises KeyboardInterrupt; main exits 1
                return

    def check(self, window: dict, now: float) -> bool:
        """Report on ``window`` (``RolloutStats.since_drain``) at ``now``; True when the run must stop."""
        quiet_s = now - max(window["since"], self._started_at)
        if not window["env_failures"] or quiet_s < min(self.report_every_s, self.stall_timeout_s or float("inf")):
            return False
        what = (
            f"no training step for {quiet_s:.0f} s: {window['env_failures']} of the {window['episodes']} episodes "
            f"since failed by the environment ({'; '.join(f'{n}x {reason}' for reason, n in window['reasons'])})"
        )
        if self.stall_timeout_s and not window["clean_groups"] and quiet_s >= self.stall_timeout_s:
            self.cause = (
                f"{what}; no group finished without a failure in asyncweb.stall_timeout_s={self.stall_timeout_s:g}"
            )
            logger.error("stopping the run: %s", self.cause)
            return True
        if now - self._reported_at >= self.report_every_s:
            self._reported_at = now
            logger.warning(
                "%s; the run stops after asyncweb.stall_timeout_s=%g without a clean group", what, self.stall_timeout_s
            )
        return False
