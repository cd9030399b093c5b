"""``bench e2e``'s job sampler: the memory peak of a real process tree, which processes hold it, and their CPU time."""

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from verl_asyncweb.bench.e2e import _cpu_table, _JobSampler, _process_table

# A parent that imports torch and starts a child holding ~200 MiB of its own pages; both wait to be killed. The
# parent is ready once the child has written its pages.
TREE = textwrap.dedent(
    """
    import subprocess, sys, time
    import torch
    child = subprocess.Popen(
        [sys.executable, "-c", "b = bytearray(200 * 2**20); print('ready', flush=True); import time; time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )
    assert child.stdout.readline().strip() == "ready"
    print("ready", flush=True)
    time.sleep(60)
    """
)
# A parent that idles and a child that computes until killed.
SPINNING_CHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    print("ready", flush=True)
    time.sleep(60)
    """
)


def test_sampler_finds_the_peak_and_the_processes_that_hold_it():
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        sampler = _JobSampler(parent.pid, interval_s=0.2, breakdown_every=1)
        sampler.start()
        sampler.join(timeout=3)  # a few samples while the tree lives
        sampler.stop()
        sampler.join()
    finally:
        for process in [parent]:
            subprocess.run(["pkill", "-P", str(process.pid)], check=False)
            process.kill()
            process.wait()
    processes = sampler.processes_at_peak
    assert len(processes) == 2
    parent_entry, child_entry = sorted(processes, key=lambda entry: not entry["torch"])
    assert parent_entry["torch"] and not child_entry["torch"]
    assert child_entry["pss_mib"] >= 200
    assert sampler.peak_rss_mib >= parent_entry["pss_mib"] + child_entry["pss_mib"] * 0.99
    assert all(entry["name"].startswith("python") for entry in processes)


def test_process_table_groups_by_name_largest_first():
    processes = [
        {"name": "ray::Small", "pss_mib": 10.0, "torch": False},
        {"name": "ray::Worker", "pss_mib": 400.0, "torch": True},
        {"name": "ray::Worker", "pss_mib": 300.0, "torch": True},
    ]
    assert _process_table(processes).splitlines()[2:] == [
        "| ray::Worker | 2 | 700 | 2 |",
        "| ray::Small | 1 | 10 | 0 |",
        "| total | 3 | 710 | 2 |",
    ]


def _moment_the_busiest_process_passed(sampler: _JobSampler, cpu_s: float, timeout_s: float = 120.0) -> float:
    """The first moment (``time.time()``) at which the sampler saw a process of the job with more than ``cpu_s``
    CPU seconds: waits for CPU time, not wall time, which a busy machine stretches."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        moment = time.time()
        used = sampler.cpu_until(moment)
        if used and used[0]["cpu_s"] > cpu_s:
            return moment
        time.sleep(0.2)
    pytest.fail(f"no process of the job used {cpu_s} CPU seconds within {timeout_s} s")


def test_sampler_reads_cpu_time_per_process_as_of_a_moment():
    parent = subprocess.Popen([sys.executable, "-c", SPINNING_CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        sampler = _JobSampler(parent.pid, interval_s=0.2, breakdown_every=100)
        sampler.start()
        midway = _moment_the_busiest_process_passed(sampler, 0.5)
        _moment_the_busiest_process_passed(sampler, 2.0)
        sampler.stop()
        sampler.join()
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)], check=False)
        parent.kill()
        parent.wait()
    before, after = sampler.cpu_until(midway), sampler.cpu_until(time.time())
    interpreter = Path(sys.executable).name  # "python" or "python3", as the machine names it
    assert [entry["name"] for entry in after] == [interpreter, interpreter]  # the spinning child first
    assert 0.5 < before[0]["cpu_s"] < after[0]["cpu_s"]
    assert after[0]["cpu_s"] > 2.0 > 5 * after[1]["cpu_s"]  # the idle parent used little
    assert sampler.cpu_until(0.0) == []


def test_cpu_table_groups_by_name_largest_first():
    processes = [
        {"name": "ray::Small", "cpu_s": 1.0},
        {"name": "ray::Worker", "cpu_s": 20.0},
        {"name": "ray::Worker", "cpu_s": 10.5},
    ]
    assert _cpu_table(processes).splitlines()[2:] == [
        "| ray::Worker | 2 | 30.5 |",
        "| ray::Small | 1 | 1.0 |",
        "| total | 3 | 31.5 |",
    ]
