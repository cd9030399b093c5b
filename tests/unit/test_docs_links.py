"""The README and docs/*.md point at things that exist: relative links (and their #anchors) and `python -m` modules.

Links are resolved like GitHub renders them: relative to the page, anchors as GitHub's heading slugs. Modules are
found with ``importlib.util.find_spec``, which imports only the parent packages (none of them imports verl or
torch); a package named after ``-m`` must have a ``__main__``, and ``python -m verl_asyncweb.bench NAME`` must name a
module of ``verl_asyncweb.bench``.
"""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", flags=re.MULTILINE)
_MODULE = re.compile(r"python3? -m (verl_asyncweb(?:\.[A-Za-z_]\w*)*)(?: +([a-z_]\w*))?")


def _prose(text: str) -> str:
    """The page without code blocks and inline code, where a bracket is not a link."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (word characters, spaces and '-' kept)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor GitHub gives the headings of ``page`` (repeats get -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(text: str) -> list[str]:
    """Link and image targets outside code, without those with a scheme (http:, https:, mailto:)."""
    return [t for t in _LINK.findall(_prose(text)) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def modules(page: Path) -> list[tuple[str, str | None]]:
    """``(module, first argument)`` of every ``python -m verl_asyncweb...`` on the page, code blocks included."""
    return [(m.group(1), m.group(2)) for m in _MODULE.finditer(page.read_text())]


def _runnable(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    if spec is None:
        return False
    if spec.submodule_search_locations is not None:  # a package runs its __main__
        return importlib.util.find_spec(f"{module}.__main__") is not None
    return True


def test_the_docs_pages_exist_and_the_readme_is_short():
    assert len(PAGES) > 5
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= 250, f"README.md must stay a front page of <= 250 lines, got {lines}; move reference to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_points_at_an_existing_file_and_anchor(page):
    broken = []
    for target in relative_links(page.read_text()):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with anchor #{anchor} in {file.name}")
    assert not broken, f"broken links in {page.relative_to(ROOT)}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_m_module_named_exists(page):
    missing = []
    for module, argument in modules(page):
        if not _runnable(module):
            missing.append(module)
        elif module == "verl_asyncweb.bench" and argument and importlib.util.find_spec(f"{module}.{argument}") is None:
            missing.append(f"{module} {argument}")
    assert not missing, f"{page.relative_to(ROOT)} names modules that do not exist: {sorted(set(missing))}"


def test_the_link_checks_catch_what_they_check():
    assert _slug("Browser hosts: `python -m verl_asyncweb.bench env --capacity`") == (
        "browser-hosts-python--m-verl_asyncwebbench-env---capacity"
    )
    assert _slug("Result: +33.3 points held-out; π_prox") == "result-333-points-held-out-π_prox"
    assert relative_links("see [a](docs/x.md#y), ![i](images/p.png), [w](https://e.org), `[c](no.md)`") == [
        "docs/x.md#y",
        "images/p.png",
    ]
    assert not _runnable("verl_asyncweb.no_such_module")
    assert not _runnable("verl_asyncweb.bench.no_such_bench")
    assert not _runnable("verl_asyncweb.env")  # a package without __main__
    assert _runnable("verl_asyncweb.plan") and _runnable("verl_asyncweb.main")
