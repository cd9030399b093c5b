"""Write the static viewer page: ``<out>/index.html`` with the run's episodes embedded as JSON.

The page opens from disk (no server). Its Content-Security-Policy allows only the page's own script and style
(by hash) and local images, so even a rendering bug could not run injected script or reach the network.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_asyncweb.compare import metric_names as M
from verl_asyncweb.compare.runs import load_run
from verl_asyncweb.viewer.episodes import load_episodes
from verl_asyncweb.viewer.script import SCRIPT

logger = logging.getLogger(__name__)

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 1.5em 3em; color: #1d2430; background: #fafbfc; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; } h3 { font-size: 1em; margin: 0 0 .4em; } h4 { margin: 0 0 .2em; }
.muted { color: #66707d; }
.branches { margin: 1em 0; } .restore { background: #eef6ee; padding: .3em .6em; margin: .3em 0; }
.branch-grid { display: grid; grid-auto-flow: column; grid-auto-columns: minmax(16em, 1fr); gap: 1em; }
.branch-grid { overflow-x: auto; }
.branch-column { border: 1px solid #d0d6de; background: #fff; padding: .4em; }
.branch-head { display: block; width: 100%; text-align: left; margin-bottom: .4em; cursor: pointer; }
.branch-step { border-top: 1px solid #eef0f3; padding: .3em 0; }
.branch-action { display: block; white-space: pre-wrap; }
.warnings { background: #fff4d6; border: 2px solid #d9a400; padding: .4em 1em; margin: 1em 0; }
.warnings h2 { margin: .2em 0; color: #8a5a00; }
.warning { color: #8a3b00; }
.filters { display: flex; flex-wrap: wrap; gap: 1em; align-items: end; margin: .5em 0; }
.filters label { display: flex; flex-direction: column; font-size: .85em; }
.filters input { width: 6em; }
.list { max-height: 32vh; overflow: auto; border: 1px solid #d0d6de; background: #fff; }
table.episodes { border-collapse: collapse; width: 100%; }
table.episodes th, table.episodes td { padding: .2em .5em; border-bottom: 1px solid #eef0f3; text-align: left; }
table.episodes th { position: sticky; top: 0; background: #eef1f5; }
.episode-row { cursor: pointer; } .episode-row:hover, .episode-row.selected { background: #e6efff; }
.episode-row td.instruction { max-width: 40em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.outcome-success { color: #17692f; } .outcome-failure { color: #a02020; } .outcome-env_failed { color: #7a5b00; }
.final { border: 1px solid #d0d6de; background: #fff; padding: .5em 1em; margin: .5em 0 1em; }
.step { border: 1px solid #d0d6de; background: #fff; padding: .6em; margin: .8em 0; }
.step-body { display: flex; gap: 1em; align-items: flex-start; }
.shot { position: relative; display: inline-block; flex: 0 0 auto; max-width: 55%; line-height: 0; }
.shot img.screenshot { display: block; max-width: 100%; width: 640px; height: auto; border: 1px solid #99a; }
.shot-missing { width: 480px; max-width: 100%; min-height: 120px; background: #f3e9d2; border: 2px dashed #d9a400;
  line-height: 1.4; padding: .5em; box-sizing: border-box; }
.click-marker { position: absolute; width: 18px; height: 18px; margin: -9px 0 0 -9px; border: 3px solid #e0002a;
  border-radius: 50%; box-sizing: border-box; background: rgba(224, 0, 42, .25); pointer-events: none; }
.typed-overlay { position: absolute; transform: translate(12px, -50%); background: rgba(20, 20, 20, .85);
  color: #fff; padding: 2px 6px; border-radius: 3px; line-height: 1.3; white-space: pre-wrap; max-width: 60%; }
.typed-overlay.typed-bottom { left: 4px; bottom: 4px; transform: none; }
.step-text { flex: 1 1 auto; min-width: 0; }
.panel { margin-bottom: .6em; }
pre.text { white-space: pre-wrap; word-break: break-word; margin: 0; background: #f5f7fa; padding: .3em .5em; }
table.memory-table { border-collapse: collapse; width: 100%; }
table.memory-table th, table.memory-table td { text-align: left; vertical-align: top; padding: .1em .4em;
  white-space: pre-wrap; word-break: break-word; }
tr.mem-added, .legend .mem-added { background: #d9f7dd; }
tr.mem-changed, .legend .mem-changed { background: #fff1b8; }
table.memory-table th { width: 1%; white-space: nowrap; }
.mem-removed { color: #a02020; text-decoration: line-through; }
.legend span { padding: 0 .4em; margin-right: .5em; }
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<h1>{title}</h1>
<p class="muted">{subtitle}</p>
{warnings}
<section class="filters" aria-label="filters">
  <label>outcome <select id="filter-outcome">
    <option value="all">all</option><option value="success">success</option>
    <option value="failure">failure</option><option value="env_failed">env failed</option></select></label>
  <label>task <select id="filter-task"><option value="all">all</option></select></label>
  <label>difficulty <select id="filter-difficulty"><option value="all">all</option></select></label>
  <label>policy version &ge; <input id="filter-pv-min" type="number" step="1"></label>
  <label>policy version &le; <input id="filter-pv-max" type="number" step="1"></label>
  <span id="episode-count" class="muted"></span>
</section>
<div class="list"><table class="episodes">
<thead><tr><th>trajectory</th><th>task</th><th>difficulty</th><th>outcome</th><th>reward</th><th>steps</th>
<th>policy</th><th>global step</th><th>instruction</th></tr></thead>
<tbody id="episode-rows"></tbody></table></div>
<p class="legend muted">Memory: <span class="mem-added">added</span><span class="mem-changed">changed</span>
<span class="mem-removed">removed</span> since the previous step. The red circle marks the click.</p>
<main id="episode-detail"></main>
<script type="application/json" id="viewer-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""


@dataclass
class ViewerReport:
    """What :func:`write_viewer` wrote.

    Attributes:
        index: The written ``index.html``.
        episodes: Episodes embedded.
        warnings: Everything shown in the page's warning box.
    """

    index: Path
    episodes: int
    warnings: list[str] = field(default_factory=list)


def embed_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` escaped so no text can close the tag."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(script: str, style: str) -> str:
    """Own script and style by hash, images from disk only, nothing else."""
    return (
        f"default-src 'none'; script-src {_sha256_source(script)}; style-src {_sha256_source(style)}; "
        "img-src file: 'self'"
    )


def _warnings_html(warnings: list[str]) -> str:
    if not warnings:
        return ""
    items = "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
    return f'<section id="warnings" class="warnings" role="alert"><h2>Warnings</h2><ul>{items}</ul></section>'


def render_page(title: str, subtitle: str, payload: dict[str, Any], warnings: list[str]) -> str:
    """The complete HTML document."""
    return PAGE.format(
        csp=html.escape(content_security_policy(SCRIPT, STYLE)),
        title=html.escape(title),
        subtitle=html.escape(subtitle),
        style=STYLE,
        warnings=_warnings_html(warnings),
        data=embed_json(payload),
        script=SCRIPT,
    )


def write_viewer(
    run_dir: str | Path, out_dir: str | Path | None = None, max_episodes: int | None = 2000
) -> ViewerReport:
    """Write the viewer for one run.

    Args:
        run_dir: The run folder (``episodes/`` holds the episode logs and screenshots).
        out_dir: Destination folder; default ``RUN_DIR/viewer``.
        max_episodes: Embed at most this many of the newest episodes (``None``: all).

    Returns:
        The written page and its warnings.

    Raises:
        ValueError: If ``run_dir`` is not a directory or ``max_episodes`` is not positive.
    """
    run_path = Path(run_dir)
    if max_episodes is not None and max_episodes <= 0:
        raise ValueError(f"max_episodes must be > 0 or None, got {max_episodes}")
    run = load_run(run_path)  # also validates run_dir; its warnings cover metrics and config problems
    page_dir = Path(out_dir) if out_dir is not None else run_path / "viewer"
    page_dir.mkdir(parents=True, exist_ok=True)
    episodes = load_episodes(run_path, page_dir, max_episodes)
    warnings = episodes.warnings + [w for w in run.warnings if "summary.json is missing" not in w]
    success = run.series(M.SUCCESS_RATE)
    subtitle = (
        f"recipe {run.recipe or 'unknown'} · {run.variant} · {len(episodes.episodes)} episodes"
        + (f" · final success rate {success[-1][1]:.3f} at step {success[-1][0]}" if success else "")
        + ("" if run.finished else " · run not finished")
    )
    payload = {"run": {"name": run.name, "recipe": run.recipe, "variant": run.variant}, "episodes": episodes.episodes}
    index = page_dir / "index.html"
    index.write_text(render_page(f"Trajectories of {run.name}", subtitle, payload, warnings), encoding="utf-8")
    logger.info("viewer with %d episodes written to %s", len(episodes.episodes), index)
    return ViewerReport(index, len(episodes.episodes), warnings)
