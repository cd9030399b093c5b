"""Memory analysis: the generic-placeholder heuristic, sizes, and key-set keeping."""

from __future__ import annotations

import json

import pytest

from verl_asyncweb.agent.memory import analyze_memory, is_generic_key, keeps_key_set, normalize_key


@pytest.mark.parametrize(
    "key",
    [
        "info",
        "Notes",
        "note",
        "DATA",
        "misc",
        "item_3",
        "step_2",
        "Step-2",
        "field_x",
        "fieldX",
        "key1",
        "value",
        "temp",
        "stuff",
        "details",
        "general",
        "other",
        "entry_5",
        "entry5",
        "thing",
        "general info",
        "misc.data",
        "otherStuff",
        "item_a",
        "1",
        "a",
        "",
        "__",
    ],
)
def test_is_generic_key_placeholders_are_generic(key):
    assert is_generic_key(key)


@pytest.mark.parametrize(
    "key",
    ["product_info", "cart_total", "price", "step3_result_price", "userEmail", "flight_2_departure", "mp3_title"],
)
def test_is_generic_key_descriptive_keys_are_not_generic(key):
    assert not is_generic_key(key)


def test_normalize_key_splits_camel_and_separators():
    assert normalize_key("fieldX") == ["field", "x"]
    assert normalize_key("Step-2 .info") == ["step", "2", "info"]


def test_analyze_memory_text_counts_bytes_keys_and_generic_ratio():
    text = '{"info": "a", "cart_total": "$12", "item_3": "mug", "zürich": 1}'
    stats = analyze_memory(text)
    assert stats.valid_json
    assert stats.json_bytes == len(text.encode("utf-8"))
    assert stats.key_count == 4
    assert stats.generic_keys == frozenset({"info", "item_3"})
    assert stats.generic_key_ratio == pytest.approx(0.5)
    assert stats.keys == frozenset({"info", "cart_total", "item_3", "zürich"})
    assert stats.tokens is None


def test_analyze_memory_dict_uses_compact_json_size_and_tokenizer():
    class WordTokenizer:
        def encode(self, text, add_special_tokens=True):
            return text.replace('"', " ").split()

    memory = {"price": "12 dollars", "note": "x"}
    stats = analyze_memory(memory, tokenizer=WordTokenizer())
    assert stats.json_bytes == len(json.dumps(memory, separators=(",", ":")).encode())
    assert stats.tokens == len(WordTokenizer().encode(json.dumps(memory, separators=(",", ":"))))
    assert stats.generic_key_ratio == pytest.approx(0.5)


@pytest.mark.parametrize("bad", ["{broken", "[1, 2]", "", None, 5, "{" * 10_000])
def test_analyze_memory_invalid_never_raises(bad):
    stats = analyze_memory(bad)
    assert not stats.valid_json and stats.key_count == 0 and stats.generic_key_ratio == 0.0


def test_analyze_memory_empty_object_is_valid_with_no_keys():
    stats = analyze_memory("{}")
    assert stats.valid_json and stats.key_count == 0 and stats.json_bytes == 2


def test_keeps_key_set_append_only_true():
    assert keeps_key_set([{"a"}, {"a", "b"}, {"a", "b"}, {"a", "b", "c"}])
    assert keeps_key_set([])
    assert keeps_key_set([None, {"a"}, None, {"a", "b"}])  # invalid steps are skipped


def test_keeps_key_set_dropped_key_false_even_if_readded():
    assert not keeps_key_set([{"a", "b"}, {"a"}])
    assert not keeps_key_set([{"a"}, {"b"}, {"a", "b"}])
    assert not keeps_key_set([frozenset({"a"}), frozenset()])
