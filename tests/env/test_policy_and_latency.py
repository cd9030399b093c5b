"""Network policy matching, the latency model and config validation (no browser)."""

import statistics

import pytest

from verl_asyncweb.env import BrowserPoolConfig, LatencyConfig
from verl_asyncweb.env.latency import LatencyModel
from verl_asyncweb.env.network import NetworkPolicy


def test_policy_allows_listed_origins_and_wildcards_only():
    policy = NetworkPolicy(("http://127.0.0.1:8000", "https://*.example.com"))
    assert policy.allows_url("http://127.0.0.1:8000/a?b=1")
    assert policy.allows_url("https://cdn.example.com/x.js")
    assert not policy.allows_url("http://127.0.0.1:8001/")
    assert not policy.allows_url("https://example.org/")
    assert not policy.allows_url("file:///etc/passwd")
    assert NetworkPolicy(("*",)).allows_url("https://anything.test/")
    assert not NetworkPolicy(("*",)).allows_url("data:text/html,x")


@pytest.mark.parametrize(
    "url, reason",
    [
        ("file:///etc/passwd", "scheme 'file:'"),
        ("javascript:alert(1)", "scheme 'javascript:'"),
        ("data:,x", "scheme 'data:'"),
        ("chrome://settings", "scheme 'chrome:'"),
        ("example.com", "must start with http"),
        ("http://evil.test/", "allowlist"),
    ],
)
def test_navigation_refusals_say_why(url, reason):
    assert reason in NetworkPolicy(("http://127.0.0.1:1",)).navigation_refusal(url)


def test_latency_is_off_by_default_and_seeded_heavy_tailed_when_on():
    assert LatencyModel(LatencyConfig()).sample_s() == 0.0
    a = [LatencyModel(LatencyConfig(enable=True, seed=3)).sample_s() for _ in range(3)]
    model = LatencyModel(LatencyConfig(enable=True, seed=3))
    draws = [model.sample_s() for _ in range(20_000)]
    assert draws[0] == a[0]
    assert 1.35 < statistics.median(draws) < 1.65
    tail = sum(d >= 10 for d in draws) / len(draws)
    assert 0.03 < tail < 0.07


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"step_timeout_s": -1}, "asyncweb.env.step_timeout_s must be > 0, got -1"),
        ({"screenshot_format": "gif"}, "asyncweb.env.screenshot_format must be 'jpeg' or 'png'"),
        ({"coordinate_mode": "percent"}, "asyncweb.env.coordinate_mode must be 'normalized' or 'pixel'"),
        ({"num_browsers": 0}, "asyncweb.env.num_browsers must be > 0, got 0"),
    ],
)
def test_pool_config_errors_name_the_key(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        BrowserPoolConfig(**kwargs)


def test_env_package_import_does_not_import_playwright():
    import subprocess
    import sys

    code = "import sys, verl_asyncweb.env as e; e.parse_action('x'); e.load_tasks; print('playwright' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr[-500:]
