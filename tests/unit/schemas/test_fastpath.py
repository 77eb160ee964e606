"""The fast path: jsonschema-rs decides and locates the errors, jsonschema is the
reference.

Findings stay what jsonschema's errors made of them only if the two always agree: on
valid/invalid, and on every error's keyword and place. These tests compare verdicts,
errors and the findings made of them on generated Stages and RolloutManagers shaped like
the stanzas (near-valid values next to wrong types, unknown fields, unicode, huge numbers
and deep nesting) and on every single-fault neighbour of valid objects, every schema
pattern on every character that could matter, and check that JSON never reaches
jsonschema and that what jsonschema-rs cannot take still gets jsonschema's findings.
"""

from __future__ import annotations

import datetime
import functools
import json
import re
import unicodedata
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

import schemas
from schemas.compiled import (
    PLUGINS_VALIDATOR,
    STAGE_VALIDATOR,
    SchemaValidator,
    rust_pattern,
    rust_patterns,
)
from schemas.findings import sort_findings
from schemas.translate import schema_findings
from testkit import objects

# ------------------------------------------------------------------------- values

# Strings at the edges of the schemas' patterns and lengths: what $ and \s mean, case,
# 253 characters, empty, a final newline, invisible and non-ASCII whitespace.
EDGE_STRINGS = st.sampled_from([
    "", "a\n", "a\r", "\na", "a b", "a\tb", "a\u0085b", "a\u00a0b", "a\u2028b", "a\ufeffb",
    "a\u200bb", "a\u180eb", "a\x1cb", "a\x7fb", "A", "a_b", "a..b", "-a", "a-", ".a", "a.",
    "succès", "日本", "a" * 253, "a" * 254, "a." * 126 + "a", "a." * 126 + "ab", "\U0001f600",
    "a\x00", "AnalysisTemplate", "ClusterAnalysisTemplate", "analysistemplate",
    "AnalysisTemplate\n", "https://example.com/p", "file:///p", "ns/name", "0" * 64,
])
# jsonschema-rs cannot take a lone surrogate (JSON allows "\ud800"); jsonschema decides.
SURROGATES = st.sampled_from(["\ud800", "a\udfffb"])
HUGE_NUMBERS = st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**100, -(10**400), 1e308,
                                -0.0, float("inf"), float("-inf"), float("nan")])
SCALARS = (st.none() | st.booleans() | st.integers() | HUGE_NUMBERS
           | st.floats(allow_nan=True) | st.text(max_size=12) | EDGE_STRINGS | SURROGATES)
NEAR_MISS_KEYS = st.sampled_from([
    "templates", "analysisTemplates", "templateName", "clusterScope", "name", "kind",
    "args", "value", "valueFrom", "secretKeyRef", "secretRef", "key", "analysisRunMetadata",
    "metadata", "labels", "annotations", "trafficManagement", "metric", "location",
    "sha256", "url", "Name", "name ", "nme", "",
])
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(NEAR_MISS_KEYS | st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


@st.composite
def deep(draw: st.DrawFn) -> Any:
    """A value nested up to 300 levels deep: far below the JSON parser's limit, far
    beyond anything the schemas descend into."""
    value: Any = draw(SCALARS)
    for _ in range(draw(st.integers(1, 300))):
        value = [value] if draw(st.booleans()) else {draw(NEAR_MISS_KEYS): value}
    return value


JUNK = JSON | deep()

# ------------------------------------------------------- objects the schemas accept

DNS_NAMES = (st.from_regex(r"[a-z0-9]([-a-z0-9]{0,12}[a-z0-9])?(\.[a-z0-9]{1,4}){0,2}",
                           fullmatch=True)
             | st.sampled_from(["a" * 253, "a." * 126 + "a", "0", "a-b.c"]))
# No whitespace or control characters (what Python's \s and \x00-\x1f\x7f cover).
ARG_NAMES = st.text(st.characters(exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")),
                    min_size=1, max_size=12)
TEXT = st.text(max_size=16)
STRING_MAPS = st.none() | st.dictionaries(TEXT, TEXT, max_size=4)


def usually(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy``, or null (absent) a quarter of the time."""
    return st.one_of(strategy, strategy, strategy, st.none())


def record(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(required, optional=optional)


RUN_METADATA = st.none() | record({}, {"labels": STRING_MAPS, "annotations": STRING_MAPS})
VERIFICATION = record({
    "analysisTemplates": st.lists(record({"name": DNS_NAMES}, {"kind": st.sampled_from(
        ["AnalysisTemplate", "ClusterAnalysisTemplate", None])}), min_size=1, max_size=4),
}, {
    "args": st.none() | st.lists(record({"name": ARG_NAMES, "value": TEXT}, {}), max_size=3),
    "analysisRunMetadata": RUN_METADATA,
})
ANALYSIS = record({
    "templates": st.lists(record({"templateName": DNS_NAMES},
                                 {"clusterScope": st.booleans() | st.none()}),
                          min_size=1, max_size=4),
}, {
    "args": st.none() | st.lists(record({"name": ARG_NAMES}, {
        "value": TEXT | st.none(),
        "valueFrom": st.none() | record({"secretKeyRef": record({
            "name": DNS_NAMES,
            "key": st.from_regex(r"[-._a-zA-Z0-9]{1,12}", fullmatch=True),
        }, {})}, {}),
    }), max_size=3),
    "analysisRunMetadata": RUN_METADATA,
})
PLUGIN = record({"name": TEXT, "location": TEXT},
                {"sha256": st.none() | st.from_regex(r"[0-9a-f]{64}", fullmatch=True) | TEXT})
PLUGINS = record({"trafficManagement": usually(st.lists(PLUGIN, max_size=3)),
                  "metric": usually(st.lists(PLUGIN, max_size=3))}, {})


OTHER = st.lists(SCALARS, max_size=2)


def k8s_object(kind: str, stanzas: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A whole object as the webhook gets it: the stanzas among fields the schemas
    leave alone (Kargo's requestedFreight, metadata, status)."""
    return record({
        "apiVersion": st.just(objects.API_VERSIONS[kind]), "kind": st.just(kind),
        "metadata": record({"name": DNS_NAMES}, {"labels": STRING_MAPS}),
        "spec": record(stanzas, {"requestedFreight": OTHER}),
    }, {"status": OTHER})


# Characters added to either end of a string: one over a length limit, a final newline,
# a character a pattern refuses, whitespace only some regex dialects call whitespace.
TWEAKS = st.sampled_from(["a", "-", ".", "_", "A", "\n", " ", "\x7f", "\u0085", "\u00a0",
                          "\ufeff", "é"])


STANZAS = ("verification", "analysis", "plugins")


def _node_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    items = (node.items() if isinstance(node, dict)
             else enumerate(node) if isinstance(node, list) else ())
    for key, child in items:
        yield from _node_paths(child, (*path, key))


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


# Which nodes each fault can apply to.
_FITS: dict[str, Any] = {
    "replace": lambda node: True,
    "drop": lambda node: True,
    "add": lambda node: isinstance(node, dict | list),
    "tweak": lambda node: isinstance(node, str),
}


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """A valid object, then up to three faults, mostly inside a stanza: a value replaced
    by anything (wrong type, edge string, huge number, deep nesting), a character added
    to either end of a string, a field or entry dropped (a required one, at times), an
    unknown field or an extra entry added. Most objects are valid or a fault or two away
    from it, where a difference between the two validators would show."""
    obj = draw(valid)
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 3]))):
        action = draw(st.sampled_from(sorted(_FITS)))
        paths = [p for p in _node_paths(obj)
                 if (p or action == "replace") and _FITS[action](_at(obj, p))]
        inside = [p for p in paths if len(p) >= 2 and p[1] in STANZAS]
        if not paths:
            continue
        choices = inside if bool(inside) and draw(st.integers(0, 3)) else paths
        path = draw(st.sampled_from(choices))
        if not path:
            obj = draw(JUNK)
            continue
        parent, key = _at(obj, path[:-1]), path[-1]
        node = parent[key]
        if action == "tweak":
            edge = draw(TWEAKS)
            parent[key] = node + edge if draw(st.booleans()) else edge + node
        elif action == "add" and isinstance(node, dict):
            node[draw(NEAR_MISS_KEYS | st.text(max_size=8))] = draw(JUNK)
        elif action == "add":
            node.append(draw(JUNK))
        elif action == "drop":
            del parent[key]
        else:
            parent[key] = draw(JUNK | EDGE_STRINGS | HUGE_NUMBERS | SURROGATES)
    return obj


STAGES = mutated(k8s_object("Stage", {"verification": usually(VERIFICATION),
                                      "analysis": usually(ANALYSIS)}))
ROLLOUT_MANAGERS = mutated(k8s_object("RolloutManager", {"plugins": usually(PLUGINS)}))

# ----------------------------------------------------------------------- verdicts


def _has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _errors(errors: Iterator[Any]) -> list[tuple[str, str, str]]:
    """Each error as (keyword, instance path, keyword's value): what findings are made
    of, sorted, so the order each library reports errors in does not matter."""
    return sorted((str(e.validator), repr(list(e.absolute_path)), repr(e.validator_value))
                  for e in errors)


def same_findings(validator: SchemaValidator, obj: Any) -> bool:
    """Whether both validators' errors make the same findings (in the order every check
    returns them: by field path)."""
    return (sort_findings(schema_findings(validator, obj))
            == sort_findings(schema_findings(validator.jsonschema, obj)))


def assert_same_answer(validator: SchemaValidator, obj: Any) -> None:
    """Same verdict, same errors, same findings, whichever validator answers."""
    expected = validator.jsonschema.is_valid(obj)
    try:
        fast = validator.fast.is_valid(obj)
    except ValueError:
        # The one thing a JSON document can hold that jsonschema-rs refuses.
        assert _has_lone_surrogate(obj)
    else:
        assert fast is expected
    assert validator.is_valid(obj) is expected
    assert (next(validator.iter_errors(obj), None) is None) is expected
    if not expected:
        assert (_errors(validator.iter_errors(obj))
                == _errors(validator.jsonschema.iter_errors(obj)))
        assert same_findings(validator, obj)


SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(STAGES)
def test_stage_verdicts_agree(stage: Any) -> None:
    assert_same_answer(STAGE_VALIDATOR, stage)


@SETTINGS
@given(ROLLOUT_MANAGERS)
def test_rollout_manager_verdicts_agree(rm: Any) -> None:
    assert_same_answer(PLUGINS_VALIDATOR, rm)


@pytest.mark.parametrize(("strategy", "validator"), [(STAGES, STAGE_VALIDATOR),
                                                     (ROLLOUT_MANAGERS, PLUGINS_VALIDATOR)])
def test_generated_objects_are_both_valid_and_invalid(strategy: Any, validator: Any) -> None:
    """The agreement tests mean something only if both verdicts come up, including valid
    objects whose stanza is not empty."""
    def has_stanza(obj: Any) -> bool:
        spec = obj.get("spec") if isinstance(obj, dict) else None
        # Objects jsonschema-rs can take (not a lone surrogate, which makes it raise and
        # jsonschema answer): the assertion below asks jsonschema-rs itself.
        return isinstance(spec, dict) and validator._fast_verdict(obj) is not None and any(
            isinstance(spec.get(name), dict) and spec[name]
            for name in ("verification", "analysis", "plugins"))

    # Found, not shrunk: a shrunk example says nothing more, and shrinking is slow.
    quick = settings(max_examples=500, phases=[Phase.generate], database=None)
    valid = find(strategy, lambda o: has_stanza(o) and validator.jsonschema.is_valid(o),
                 settings=quick)
    invalid = find(strategy, lambda o: has_stanza(o) and not validator.jsonschema.is_valid(o),
                   settings=quick)
    assert validator.fast.is_valid(valid) and not validator.fast.is_valid(invalid)


# Valid objects whose every single-fault neighbour is checked below: both spellings,
# every optional field, names at the 253-character limit.
VALID_OBJECTS: list[tuple[str, SchemaValidator, dict[str, Any]]] = [
    ("stage-verification", STAGE_VALIDATOR, objects.stage(
        "prod", namespace="shop", freight=False, spec={
            "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "w"}}],
            "verification": {
                "analysisTemplates": [{"name": "a" * 253},
                                      {"name": "a.b-c", "kind": "ClusterAnalysisTemplate"},
                                      {"name": "x", "kind": None}],
                "args": [{"name": "svc{}", "value": ""}, {"name": "é", "value": "日本"}],
                "analysisRunMetadata": {"labels": {"team": "web"},
                                        "annotations": {"a/b": "x y"}},
            }})),
    ("stage-analysis", STAGE_VALIDATOR, objects.stage("p", freight=False, spec={"analysis": {
        "templates": [{"templateName": "a.b", "clusterScope": True},
                      {"templateName": "c", "clusterScope": None}],
        "args": [{"name": "a", "value": "1"}, {"name": "b", "value": None},
                 {"name": "c", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k.-_K"}}}],
        "analysisRunMetadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}},
    }})),
    ("rolloutmanager", PLUGINS_VALIDATOR, objects.rollout_manager("rm", plugins={
        "trafficManagement": [{"name": "a/b", "location": "https://x/y", "sha256": None}],
        "metric": [{"name": "c/d", "location": "file:///p", "sha256": "ab" * 32}],
    })),
]
REPLACEMENTS: list[Any] = [
    None, True, False, 0, -1, 2**64, 10**100, 1.5, float("nan"), float("inf"), "", "a",
    "a" * 253, "a" * 254, "a\n", "A", "a b", "a\u0085b", "a\ufeffb", "a\x7f", "-a", "a.",
    "AnalysisTemplate", "ClusterAnalysisTemplate", [], ["a"], [{}], {}, {"name": "a"},
    [[[["a"]]]] , {"a": {"b": {"c": "d"}}},
]
TWEAK_CHARACTERS = ["a", "-", ".", "_", "A", "\n", " ", "\x7f", "\u0085", "\ufeff", "é"]


_DROP, _SAME = object(), object()


def _changed(obj: Any, path: tuple[Any, ...], change: Any) -> Any:
    """A copy of ``obj`` with ``change`` applied to the node at ``path``: it returns the
    new value, _DROP (remove the node) or _SAME (it changed the node in place)."""
    copy = json.loads(json.dumps(obj))
    node = _at(copy, path)
    result = change(node)
    if result is _SAME:
        return copy
    if not path:
        return result
    parent = _at(copy, path[:-1])
    if result is _DROP:
        del parent[path[-1]]
    else:
        parent[path[-1]] = result
    return copy


def single_faults(obj: Any) -> Iterator[Any]:
    """Every object one fault away from ``obj``: each node replaced by each of
    REPLACEMENTS, dropped, a string with a character added at either end, an unknown
    field or an extra entry added."""
    for path in _node_paths(obj):
        node = _at(obj, path)
        for value in REPLACEMENTS:
            yield _changed(obj, path, lambda _node, value=value: value)
        if path:
            yield _changed(obj, path, lambda _node: _DROP)
        if isinstance(node, str):
            for ch in TWEAK_CHARACTERS:
                yield _changed(obj, path, lambda n, ch=ch: n + ch)
                yield _changed(obj, path, lambda n, ch=ch: ch + n)
        if isinstance(node, dict):
            for key in ("unknown", "Name", "name ", ""):
                yield _changed(obj, path, lambda n, key=key: n.setdefault(key, "x") and _SAME)
        if isinstance(node, list):
            for value in (None, "x", {}):
                yield _changed(obj, path, lambda n, value=value: n.append(value) or _SAME)


@pytest.mark.parametrize(("validator", "obj"), [(v, o) for _, v, o in VALID_OBJECTS],
                         ids=[name for name, _, _ in VALID_OBJECTS])
def test_every_single_fault_gets_the_same_answer(validator: SchemaValidator, obj: Any) -> None:
    assert validator.jsonschema.is_valid(obj) and validator.fast.is_valid(obj)
    verdicts = []
    for neighbour in single_faults(obj):
        expected = validator.jsonschema.is_valid(neighbour)
        assert validator.fast.is_valid(neighbour) is expected, neighbour
        if not expected:
            assert same_findings(validator, neighbour), neighbour
        verdicts.append(expected)
    # Most faults are errors; some are not (a label value is any string): both occur.
    assert verdicts.count(False) > 200 and verdicts.count(True) > 20


# ----------------------------------------------------------------------- patterns


def _patterns(node: Any) -> Iterator[str]:
    """Every ``pattern`` keyword in a schema (not the x- annotations' texts)."""
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for key, value in node.items():
            if not key.startswith("x-"):
                yield from _patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from _patterns(value)


PATTERNS = sorted({p for v in (STAGE_VALIDATOR, PLUGINS_VALIDATOR) for p in _patterns(v.schema)})


@functools.cache
def _characters() -> list[str]:
    """Every BMP character, and the astral ones that are not letters, symbols or marks
    (format, control, separator), plus a sample of the rest: where regular expression
    dialects differ is what counts as whitespace, a line end or a word."""
    return [chr(code) for code in range(0x110000)
            if not 0xD800 <= code < 0xE000
            and (code < 0x10000 or code % 97 == 0
                 or unicodedata.category(chr(code)) in ("Cf", "Cc", "Zs"))]


def test_schemas_have_patterns() -> None:
    assert len(PATTERNS) == 3


def test_jsonschema_rs_gets_the_patterns_without_a_look_around() -> None:
    """A look-around sends jsonschema-rs to its backtracking engine (docs/benchmarks.md
    "Inside the webhook server"); the Python ``re`` spelling of the end is translated."""
    assert [rust_pattern(p) for p in PATTERNS] == [p.removesuffix("(?!\\n)") for p in PATTERNS]
    assert not [p for v in (STAGE_VALIDATOR, PLUGINS_VALIDATOR)
                for p in _patterns(rust_patterns(v.schema)) if "(?" in p]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pattern_agrees_with_python_re_on_every_character(pattern: str) -> None:
    """jsonschema's ``pattern`` is ``re.search(pattern, value)``; jsonschema-rs uses a
    Rust regex engine, with the pattern as :class:`SchemaValidator` gives it. Each
    character alone, between letters and before a newline."""
    fast = jsonschema_rs.Draft202012Validator({"pattern": rust_pattern(pattern)})
    regex = re.compile(pattern)
    differ = [(ch, text) for ch in _characters() for text in (ch, f"a{ch}a", f"{ch}\n")
              if fast.is_valid(text) is (regex.search(text) is None)]
    assert differ == []


# ------------------------------------------------------------------- the fast path


class CountingValidator:
    """Stands in for jsonschema inside a SchemaValidator, counting the walks."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.walks = 0

    def iter_errors(self, instance: Any) -> Any:
        self.walks += 1
        return self.real.iter_errors(instance)

    def is_valid(self, instance: Any) -> bool:
        self.walks += 1
        return bool(self.real.is_valid(instance))


VALID_STAGE = objects.stage("prod", namespace="shop", freight=False, verification={
    "analysisTemplates": [{"name": "success-rate"},
                          {"name": "latency", "kind": "ClusterAnalysisTemplate"}],
    "args": [{"name": "service", "value": "shop"}],
    "analysisRunMetadata": {"labels": {"team": "web"}},
})


def test_json_never_reaches_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = CountingValidator(STAGE_VALIDATOR.jsonschema)
    monkeypatch.setattr(STAGE_VALIDATOR, "jsonschema", counting)
    assert schemas.check(VALID_STAGE) == []

    invalid = json.loads(json.dumps(VALID_STAGE))
    invalid["spec"]["verification"]["args"][0]["value"] = 8080
    [finding] = schemas.check(invalid)
    assert counting.walks == 0
    assert finding.field == "spec.verification.args[0].value"
    assert 'quote it: "8080"' in finding.message


@pytest.mark.parametrize("value", ["\ud800", "a\udfffb"])
def test_lone_surrogates_are_decided_by_jsonschema(value: str) -> None:
    stage = json.loads(json.dumps(VALID_STAGE))
    stage["spec"]["verification"]["analysisTemplates"][0]["name"] = value
    with pytest.raises(ValueError):
        STAGE_VALIDATOR.fast.is_valid(stage)
    [finding] = schema_findings(STAGE_VALIDATOR, stage)
    assert finding.field == "spec.verification.analysisTemplates[0].name"
    assert "must be a Kubernetes object name" in finding.message


@pytest.mark.parametrize("labels", [{1: "web"}, {"team": datetime.date(2026, 1, 1)},
                                    {"team": b"web"}])
def test_values_json_cannot_hold_are_decided_by_jsonschema(labels: dict[Any, Any]) -> None:
    """Python callers can pass what no parser produces; jsonschema-rs refuses it, and
    the findings are jsonschema's own."""
    stage = json.loads(json.dumps(VALID_STAGE))
    stage["spec"]["verification"]["analysisRunMetadata"]["labels"] = labels
    with pytest.raises(ValueError):
        STAGE_VALIDATOR.fast.is_valid(stage)
    assert same_findings(STAGE_VALIDATOR, stage)
    assert STAGE_VALIDATOR.is_valid(stage) is STAGE_VALIDATOR.jsonschema.is_valid(stage)


@pytest.mark.parametrize("key", ["", "0", "00", "-1", "a/b", "~0", "~1", " ", "é"])
@pytest.mark.parametrize("where", ["labels", "annotations"])
def test_map_keys_jsonschema_rs_misplaces_get_the_same_findings(key: str, where: str) -> None:
    """Map keys that JSON pointers escape or jsonschema-rs misreads: it drops an empty
    key from an instance path and turns "0" into an index. Whichever library answers,
    the finding names the key itself."""
    stage = json.loads(json.dumps(VALID_STAGE))
    stage["spec"]["verification"]["analysisRunMetadata"][where] = {key: 1, "ok": 2}
    findings = schema_findings(STAGE_VALIDATOR, stage)
    assert same_findings(STAGE_VALIDATOR, stage)
    assert {f.field for f in findings} == {
        f"spec.verification.analysisRunMetadata.{where}[{key}]",
        f"spec.verification.analysisRunMetadata.{where}[ok]"}
