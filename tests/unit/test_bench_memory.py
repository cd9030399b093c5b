"""``bench e2e``'s memory sampler: the peak of a real process tree, and which processes hold it."""

import subprocess
import sys
import textwrap

from verl_asyncweb.bench.e2e import _MemorySampler, _process_table

# A parent that imports torch and starts a child holding ~200 MiB of its own pages; both wait to be killed.
TREE = textwrap.dedent(
    """
    import subprocess, sys, time
    import torch
    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(200 * 2**20); import time; time.sleep(60)"])
    print("ready", flush=True)
    time.sleep(60)
    """
)


def test_sampler_finds_the_peak_and_the_processes_that_hold_it():
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        sampler = _MemorySampler(parent.pid, interval_s=0.2, breakdown_every=1)
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
