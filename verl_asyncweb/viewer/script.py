"""The viewer page's JavaScript (vanilla, no dependencies), kept as a string so it ships inside the package.

Rules (model text is hostile input): build nodes with ``createElement`` and ``textContent``; never assign
``innerHTML``; only set ``src`` to the relative screenshot URLs the Python side produced.
"""

SCRIPT = r"""
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("viewer-data").textContent);
  const episodes = data.episodes;
  const byId = new Map(episodes.map((ep) => [ep.traj_id, ep]));

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function fmt(value) {
    if (value === null || value === undefined) return "n/a";
    return typeof value === "number" && !Number.isInteger(value) ? value.toFixed(3) : String(value);
  }
  function safeUrl(url) {
    // Only relative paths written by the Python side; anything with a scheme is refused.
    return typeof url === "string" && !/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(url) && !url.startsWith("//") ? url : null;
  }
  function versions(ep) {
    if (ep.pv_min === null) return "n/a";
    return ep.pv_min === ep.pv_max ? String(ep.pv_min) : ep.pv_min + "\u2013" + ep.pv_max;
  }

  const filters = {
    outcome: document.getElementById("filter-outcome"),
    task: document.getElementById("filter-task"),
    difficulty: document.getElementById("filter-difficulty"),
    pvMin: document.getElementById("filter-pv-min"),
    pvMax: document.getElementById("filter-pv-max"),
  };
  function addOptions(select, values) {
    for (const value of values) {
      const option = el("option", null, value);
      option.value = value;
      select.appendChild(option);
    }
  }
  addOptions(filters.task, [...new Set(episodes.map((ep) => ep.task_id))].sort());
  addOptions(filters.difficulty, [...new Set(episodes.map((ep) => ep.difficulty_slice))].sort());

  function matches(ep) {
    const outcome = filters.outcome.value;
    if (outcome !== "all" && ep.outcome !== outcome) return false;
    if (filters.task.value !== "all" && ep.task_id !== filters.task.value) return false;
    if (filters.difficulty.value !== "all" && ep.difficulty_slice !== filters.difficulty.value) return false;
    const lo = filters.pvMin.value === "" ? null : Number(filters.pvMin.value);
    const hi = filters.pvMax.value === "" ? null : Number(filters.pvMax.value);
    if ((lo !== null || hi !== null) && ep.pv_min === null) return false;
    if (lo !== null && ep.pv_max < lo) return false;
    if (hi !== null && ep.pv_min > hi) return false;
    return true;
  }

  const tbody = document.getElementById("episode-rows");
  const rows = new Map();
  for (const ep of episodes) {
    const tr = el("tr", "episode-row outcome-" + ep.outcome);
    tr.dataset.trajId = ep.traj_id;
    tr.dataset.outcome = ep.outcome;
    tr.tabIndex = 0;
    const cells = [ep.traj_id, ep.task_id, ep.difficulty_slice, ep.outcome.replace("_", " "), fmt(ep.reward),
      ep.steps.length, versions(ep), fmt(ep.global_step), ep.instruction];
    cells.forEach((text, i) => tr.appendChild(el("td", i === 8 ? "instruction" : null, text)));
    tr.addEventListener("click", () => select(ep.traj_id));
    tr.addEventListener("keydown", (event) => { if (event.key === "Enter") select(ep.traj_id); });
    tbody.appendChild(tr);
    rows.set(ep.traj_id, tr);
  }

  function applyFilters() {
    let shown = 0;
    for (const ep of episodes) {
      const visible = matches(ep);
      rows.get(ep.traj_id).hidden = !visible;
      if (visible) shown += 1;
    }
    document.getElementById("episode-count").textContent = "showing " + shown + " of " + episodes.length;
  }
  Object.values(filters).forEach((input) => input.addEventListener("input", applyFilters));
  Object.values(filters).forEach((input) => input.addEventListener("change", applyFilters));

  function panel(title, className) {
    const box = el("section", "panel " + className);
    box.appendChild(el("h4", null, title));
    return box;
  }
  function textPanel(title, className, text) {
    const box = panel(title, className);
    box.appendChild(el("pre", "text", text === "" ? "(empty)" : text));
    return box;
  }

  function renderShot(step) {
    const shot = el("div", "shot");
    const url = safeUrl(step.screenshot);
    if (url && !step.screenshot_missing) {
      const img = el("img", "screenshot");
      img.alt = "screenshot of step " + fmt(step.index);
      img.src = url;
      shot.appendChild(img);
    } else {
      const missing = el("div", "shot-missing warning", "screenshot missing: " + (step.screenshot_path || "(none)"));
      if (step.viewport) missing.style.aspectRatio = step.viewport[0] + " / " + step.viewport[1];
      shot.appendChild(missing);
    }
    if (step.click_frac) {
      // Percentages of the displayed box: the marker follows any scaling of the screenshot.
      const marker = el("div", "click-marker");
      marker.style.left = step.click_frac[0] * 100 + "%";
      marker.style.top = step.click_frac[1] * 100 + "%";
      marker.title = "click at " + step.click_px.join(", ");
      shot.appendChild(marker);
    }
    if (step.typed_text) {
      const typed = el("div", "typed-overlay", "\u2328 " + step.typed_text);
      if (step.click_frac) {
        typed.style.left = step.click_frac[0] * 100 + "%";
        typed.style.top = step.click_frac[1] * 100 + "%";
      } else {
        typed.classList.add("typed-bottom");
      }
      shot.appendChild(typed);
    }
    return shot;
  }

  function renderMemory(memory) {
    const box = panel("Memory", "memory");
    if (memory.kind === "none") {
      box.appendChild(el("p", "muted", "(no memory)"));
      return box;
    }
    if (memory.kind === "text") box.appendChild(el("p", "muted", "raw text (not a JSON object)"));
    const table = el("table", "memory-table");
    for (const row of memory.rows) {
      const tr = el("tr", "mem-" + row.status);
      if (row.status === "added" || row.status === "changed") tr.title = row.status + " since the previous step";
      if (memory.kind === "object") tr.appendChild(el("th", null, row.key));
      tr.appendChild(el("td", null, row.value));
      table.appendChild(tr);
    }
    box.appendChild(table);
    if (memory.removed.length) {
      const removed = el("div", "mem-removed", "removed since the previous step: ");
      removed.appendChild(el("span", null, memory.removed.join(", ")));
      box.appendChild(removed);
    }
    return box;
  }

  function renderAction(step) {
    const box = panel("Action", "action");
    const head = el("p", "action-call");
    head.appendChild(el("strong", null, step.action_name || "(no parsed action)"));
    if (step.action_arguments) head.appendChild(el("code", null, " " + step.action_arguments));
    box.appendChild(head);
    if (step.invalid_reason) box.appendChild(el("p", "invalid warning", "invalid: " + step.invalid_reason));
    box.appendChild(el("pre", "text raw-action", step.action_text));
    box.appendChild(el("p", "result", "result: " + (step.action_result || "(none)")));
    return box;
  }

  function renderStep(step, position, ep) {
    const article = el("article", "step");
    article.dataset.stepIndex = step.index === null ? position : step.index;
    const meta = "step " + fmt(step.index) + " \u00b7 policy v" + fmt(step.policy_version) + " \u00b7 " +
      fmt(step.response_tokens) + " response tokens";
    article.appendChild(el("h3", null, meta));
    if (ep.branch && ep.replay_command && step.index === ep.branch.step) {
      const restore = el("div", "restore");
      restore.appendChild(el("span", null, "this state is kept: restore it and replay the rest with "));
      restore.appendChild(el("code", "replay-command", ep.replay_command));
      restore.appendChild(el("span", "muted", " (add --model PATH to play it with a model)"));
      article.appendChild(restore);
    }
    const body = el("div", "step-body");
    body.appendChild(renderShot(step));
    const text = el("div", "step-text");
    text.appendChild(textPanel("Intention", "intention", step.intention));
    text.appendChild(renderMemory(step.memory));
    text.appendChild(textPanel("Progress", "progress", step.progress));
    text.appendChild(renderAction(step));
    body.appendChild(text);
    article.appendChild(body);
    return article;
  }

  function renderBranches(ep) {
    // Every trajectory played from the same kept state, side by side from the branch step on.
    const siblings = episodes.filter((other) => other.branch && other.branch.point === ep.branch.point);
    const box = el("section", "branches");
    box.appendChild(el("h3", null, siblings.length + " branches from state " + ep.branch.point +
      " (before step " + ep.branch.step + ")"));
    const grid = el("div", "branch-grid");
    for (const other of siblings) {
      const column = el("div", "branch-column outcome-" + other.outcome);
      column.dataset.trajId = other.traj_id;
      const head = el("button", "branch-head", other.traj_id + " \u00b7 " + other.branch.role + " \u00b7 " +
        other.outcome.replace("_", " ") + " \u00b7 reward " + fmt(other.reward));
      head.addEventListener("click", () => select(other.traj_id));
      column.appendChild(head);
      for (const step of other.steps.filter((s) => s.index !== null && s.index >= ep.branch.step)) {
        const card = el("div", "branch-step");
        card.appendChild(el("div", "muted", "step " + step.index));
        card.appendChild(renderShot(step));
        card.appendChild(el("code", "branch-action", step.action_text || "(no action)"));
        card.appendChild(el("div", "result", step.invalid_reason ? "invalid: " + step.invalid_reason
          : step.action_result || "(none)"));
        column.appendChild(card);
      }
      grid.appendChild(column);
    }
    box.appendChild(grid);
    return box;
  }

  function select(trajId) {
    const ep = byId.get(trajId);
    const detail = document.getElementById("episode-detail");
    detail.replaceChildren();
    if (!ep) return;
    for (const [id, tr] of rows) tr.classList.toggle("selected", id === trajId);
    detail.dataset.trajId = ep.traj_id;
    detail.appendChild(el("h2", null, "Episode " + ep.traj_id));
    detail.appendChild(el("p", "instruction-full", ep.instruction));
    const facts = "task " + ep.task_id + " \u00b7 " + ep.source + " \u00b7 difficulty " + fmt(ep.difficulty) +
      " (" + ep.difficulty_slice + ") \u00b7 global step " + fmt(ep.global_step) + " \u00b7 policy " + versions(ep);
    detail.appendChild(el("p", "muted", facts));
    const outcome = el("div", "final outcome-" + ep.outcome);
    outcome.appendChild(el("strong", "final-reward", "final reward " + fmt(ep.reward) + " \u2014 " +
      ep.outcome.replace("_", " ")));
    const reasons = el("ul", "evaluator-reasons");
    for (const reason of ep.evaluator_reasons) reasons.appendChild(el("li", null, reason));
    if (!ep.evaluator_reasons.length) reasons.appendChild(el("li", "muted", "(no evaluator reasons)"));
    outcome.appendChild(reasons);
    detail.appendChild(outcome);
    if (ep.branch) detail.appendChild(renderBranches(ep));
    ep.steps.forEach((step, i) => detail.appendChild(renderStep(step, i, ep)));
    if (decodeURIComponent(location.hash.slice(1)) !== "traj=" + trajId) {
      history.replaceState(null, "", "#traj=" + encodeURIComponent(trajId));
    }
  }

  applyFilters();
  const fromHash = decodeURIComponent(location.hash.slice(1)).replace(/^traj=/, "");
  if (byId.has(fromHash)) select(fromHash);
  else if (episodes.length) select(episodes[episodes.length - 1].traj_id);
  window.addEventListener("hashchange", () => {
    const id = decodeURIComponent(location.hash.slice(1)).replace(/^traj=/, "");
    if (byId.has(id)) select(id);
  });
  document.body.dataset.ready = "true";
})();
"""
