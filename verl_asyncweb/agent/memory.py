"""Per-step analysis of the model's Memory JSON (DESIGN.md section 6, REFERENCE.md "1/|tau| vs 1/k").

AsyncWebRL reports that normalising the advantage by 1/|tau| makes failed (long) trajectories cheap and the
memory degenerates: 34% of keys become generic placeholders and only 7% of trajectories keep their key set to
the end, against 11% generic keys and ~3x shorter memory with 1/k. These functions measure exactly that per step:
size in bytes and tokens, key count, generic-key ratio, and whether a trajectory keeps every key it wrote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GENERIC_WORDS: frozenset[str] = frozenset(
    {
        "info",
        "infos",
        "information",
        "note",
        "notes",
        "memo",
        "data",
        "misc",
        "miscellaneous",
        "item",
        "items",
        "step",
        "steps",
        "field",
        "fields",
        "key",
        "keys",
        "value",
        "values",
        "val",
        "temp",
        "tmp",
        "stuff",
        "detail",
        "details",
        "general",
        "other",
        "others",
        "entry",
        "entries",
        "thing",
        "things",
        "content",
        "contents",
        "text",
        "obj",
        "object",
        "var",
        "variable",
        "extra",
        "placeholder",
        "unknown",
        "new",
        "more",
        "additional",
        "random",
        "something",
    }
)
"""Words that say nothing about what a key holds (see :func:`is_generic_key`)."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")
_TRAILING_DIGITS = re.compile(r"^([a-z]+?)\d+$")


def normalize_key(key: str) -> list[str]:
    """Lower-case word tokens of a key: camelCase, spaces, dashes, dots and underscores all split words.

    ``"fieldX"`` -> ``["field", "x"]``, ``"Step-2"`` -> ``["step", "2"]``, ``"key1"`` -> ``["key1"]``.
    """
    spaced = _CAMEL.sub("_", str(key))
    return [token for token in _SEPARATORS.split(spaced.lower()) if token]


def is_generic_key(key: str) -> bool:
    """Whether a memory key is a generic placeholder rather than a name for what it holds.

    Heuristic: split the key into words (:func:`normalize_key`), strip numbering (a trailing number on a word,
    ``key1`` -> ``key``; number-only words; single-letter words such as the ``x`` of ``field_x``), and call the
    key generic when nothing remains or every remaining word is in :data:`GENERIC_WORDS`.

    ===============================  =======  ===========================================
    key                              generic  why
    ===============================  =======  ===========================================
    ``info``, ``Notes``, ``DATA``    yes      a generic word, any case
    ``item_3``, ``step-2``           yes      generic word + number
    ``key1``, ``entry5``             yes      number glued to a generic word
    ``field_x``, ``item_a``          yes      generic word + single letter
    ``general info``, ``misc.data``  yes      every word generic
    ``otherStuff``                   yes      camelCase split, both words generic
    ``1``, ``a``, ``""``             yes      nothing but numbering
    ``product_info``                 no       ``product`` says what it holds
    ``cart_total``, ``price``        no       descriptive
    ``step3_result_price``           no       ``result``, ``price`` are not generic words
    ===============================  =======  ===========================================

    Args:
        key: A top-level key of the Memory object.
    """
    words = []
    for token in normalize_key(key):
        if token.isdigit() or len(token) == 1:
            continue
        match = _TRAILING_DIGITS.match(token)
        words.append(match.group(1) if match else token)
    return all(word in GENERIC_WORDS for word in words)


@dataclass(frozen=True)
class MemoryStats:
    """Measurements of one step's Memory.

    Args:
        json_bytes: UTF-8 size of the Memory as written (the raw text when given text, else compact JSON).
        tokens: Token count of that text with the given tokenizer, ``None`` without one.
        key_count: Number of top-level keys (0 when invalid).
        generic_key_ratio: Fraction of those keys that :func:`is_generic_key` calls generic (0.0 with no keys).
        keys: The top-level keys.
        generic_keys: The generic ones among them.
        valid_json: The Memory parsed into a JSON object.
    """

    json_bytes: int
    tokens: int | None
    key_count: int
    generic_key_ratio: float
    keys: frozenset[str]
    generic_keys: frozenset[str]
    valid_json: bool


def _count_tokens(tokenizer: Any, text: str) -> int:
    try:
        ids = tokenizer.encode(text, add_special_tokens=False)
    except TypeError:  # tokenizers.Tokenizer.encode has no add_special_tokens keyword
        ids = tokenizer.encode(text)
    ids = getattr(ids, "ids", ids)  # tokenizers.Encoding
    return len(ids)


def analyze_memory(memory: str | Mapping | None, tokenizer: Any = None) -> MemoryStats:
    """Measure one step's Memory; never raises on bad model output.

    Args:
        memory: The Memory section as text (e.g. ``ParsedResponse.memory_raw``) or as a parsed dict; ``None``
            counts as an empty, invalid memory.
        tokenizer: Optional Hugging Face tokenizer (anything with ``encode``) for the token count.

    Returns:
        The :class:`MemoryStats`.
    """
    parsed: Any
    if isinstance(memory, Mapping):
        parsed = dict(memory)
        try:
            text = json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            text = str(parsed)
    elif isinstance(memory, str):
        text = memory.strip()
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            parsed = None
    else:
        text, parsed = "", None
    valid = isinstance(parsed, dict)
    keys = frozenset(str(key) for key in parsed) if valid else frozenset()
    generic = frozenset(key for key in keys if is_generic_key(key))
    return MemoryStats(
        json_bytes=len(text.encode("utf-8", errors="replace")),
        tokens=_count_tokens(tokenizer, text) if tokenizer is not None else None,
        key_count=len(keys),
        generic_key_ratio=len(generic) / len(keys) if keys else 0.0,
        keys=keys,
        generic_keys=generic,
        valid_json=valid,
    )


def keeps_key_set(key_sets: Iterable[Iterable[str] | None]) -> bool:
    """Whether a trajectory kept every Memory key it ever wrote, step after step (append-only memory).

    True when each step's key set contains every key of all earlier steps; a key dropped and re-added later
    still counts as not kept. ``None`` entries (steps whose Memory was missing or invalid, where the loop keeps
    the previous memory) are skipped. An empty sequence keeps its (empty) key set.

    Args:
        key_sets: Per-step key sets in step order, e.g. ``[stats.keys if stats.valid_json else None, ...]``.
    """
    seen: set[str] = set()
    for keys in key_sets:
        if keys is None:
            continue
        current = set(keys)
        if not seen <= current:
            return False
        seen |= current
    return True
