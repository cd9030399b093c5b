"""``bench screen_writes``: the agent loop's screenshot writes, in a thread, on the loop and not at all."""

from verl_asyncweb.bench import screen_writes


def test_each_mode_writes_what_it_says_and_reports_its_latency(tmp_path, capsys):
    small = ["--episodes", "3", "--steps", "2", "--step-ms", "1", "--repeats", "1", "--dir", str(tmp_path)]
    assert screen_writes.main(small) == 0
    rows = {line.split(" | ")[0].strip("| "): line for line in capsys.readouterr().out.splitlines()}
    written = {mode: float(rows[mode].rstrip(" |").split("|")[-1]) for mode in screen_writes.MODES}
    # 6 screenshots of ~115 kB each where the run folder exists, none without one.
    assert written["none"] == 0.0 and 0.4 < written["thread"] == written["inline"] < 1.0, rows
    latency = {mode: float(rows[mode].split("|")[2]) for mode in screen_writes.MODES}
    assert all(value >= 1.0 for value in latency.values()), "a step lasts at least its --step-ms"
