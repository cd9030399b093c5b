"""``bench env --capacity``: measured page memory turned into browser hosts, and its table."""

from verl_asyncweb.bench.env import format_capacity, hosts_needed

MEASURED = {
    "rounds": 3,
    "episodes_per_worker": 2,
    "medians": {
        f"{name} N={n}": {"steps_per_s": rate, "cpu_ms_per_step": cpu}
        for name, rate, cpu in (("local launch", 16.0, 116.0), ("remote endpoints", 14.0, 132.0))
        for n in (4, 8)
    },
    "browser_pss_mb": 160.0,
    "page_pss_mb": 70.0,
}


def test_hosts_are_memory_bound_with_a_fifth_of_each_host_kept_free():
    need = hosts_needed(MEASURED, pages=384, host_mem_gib=64, pages_per_browser=6)
    assert need["browsers"] == 64
    assert need["total_gib"] == (384 * 70 + 64 * 160) / 1024  # 36.25 GiB
    assert need["hosts"] == 1
    need = hosts_needed(MEASURED, pages=1280, host_mem_gib=64, pages_per_browser=5)
    assert need["browsers"] == 256 and need["hosts"] == 3  # 127.5 GiB over 51.2 usable per host
    assert hosts_needed(MEASURED, pages=1281, host_mem_gib=64, pages_per_browser=5)["browsers"] == 257


def test_capacity_table_has_both_arms_at_each_size_and_the_sizing_line():
    text = format_capacity(MEASURED, [4, 8], host_mem_gib=64, pages=384, pages_per_browser=6)
    assert "| local launch | 16.0 | 116 | 16.0 | 116 |" in text
    assert "| remote endpoints | 14.0 | 132 | 14.0 | 132 |" in text
    assert "70 MB per page, 160 MB per idle browser" in text
    assert "384 pages in 64 browsers: 36 GiB, 1 host of 64 GiB" in text
