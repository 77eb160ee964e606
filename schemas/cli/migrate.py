"""``spec.analysis`` -> ``spec.verification``: ``python -m schemas migrate`` (the rewrite
and the command) and the finding ``python -m schemas validate`` gives for the old spelling.

``migrate FILE|DIR...`` prints the files with ``spec.analysis`` rewritten to
``spec.verification`` (``--write``: rewrites them in place); exit 1 when a Stage cannot
be migrated (the reason names its field), 2 when a file cannot be read.

No released Kargo CRD stores ``spec.analysis`` (the form first proposed for Kargo): the
API server refuses it as an unknown field, or drops it and nothing is ever verified. The
two spellings mean the same, except that ``spec.verification`` args take a string
``value`` only, so an arg with ``valueFrom`` cannot be migrated and is refused, naming it.

Kargo v0 ``spec.subscriptions`` is rewritten as ``spec.requestedFreight`` the same way
(``migrate_freight``); ``spec.promotionMechanisms`` is refused, naming
``spec.promotionTemplate.spec.steps``.

The rewrite edits the file text, not a re-dump of the parsed YAML: everything outside
the stanza (comments, key order, quoting, other documents) stays byte for byte. The
stanza itself is rendered anew, so comments and formatting inside it are lost. The
result is parsed again and checked before it is offered.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import yaml

from schemas.cli import EXIT_INVALID, EXIT_OK, EXIT_UNREADABLE
from schemas.cli.manifests import (
    Located,
    Source,
    Unreadable,
    entry,
    label,
    objects,
    parse,
    read_sources,
)
from schemas.cli.migrate_freight import StageIndex, mechanisms_refusal, requested_freight
from schemas.constants import KIND_CLUSTER_ANALYSIS_TEMPLATE, KIND_STAGE
from schemas.crdschema import bundled_schemas, check_against_crds
from schemas.dispatch import owned_kind
from schemas.findings import Finding, Path, errors
from schemas.stage import check_stage

STANZA: Path = ("spec", "analysis")


def legacy_findings(obj: Any, *, file: str = "FILE") -> list[Finding]:
    """The error ``validate`` reports for a Stage that still has ``spec.analysis``."""
    spec = obj.get("spec") if owned_kind(obj) == KIND_STAGE else None
    if not isinstance(spec, dict) or spec.get("analysis") is None:
        return []
    return [Finding(
        path=STANZA,
        message="no released Kargo Stage has spec.analysis (the form first proposed for "
        "Kargo): the API server refuses it as an unknown field, or drops it and nothing "
        "is verified; rewrite it as spec.verification with "
        f"`rollgate migrate {shlex.quote(file)}` (add --write to change the file)",
    )]


# ---------------------------------------------------------------- the data


def _template_ref(ref: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": ref["templateName"]}
    if ref.get("clusterScope") is True:
        out["kind"] = KIND_CLUSTER_ANALYSIS_TEMPLATE
    return out  # a namespaced reference needs no kind: absent means AnalysisTemplate


def convert(body: dict[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
    """A valid ``spec.analysis`` body as the ``spec.verification`` body, keys in the
    order written, nulls (= absent) left out; and a finding for each arg that has no
    ``spec.verification`` form (``valueFrom``)."""
    out: dict[str, Any] = {}
    refused: list[Finding] = []
    for key, value in body.items():
        if value is None:
            continue
        if key == "templates":
            out["analysisTemplates"] = [_template_ref(ref) for ref in value]
        elif key == "args":
            args = []
            for index, arg in enumerate(value):
                if arg.get("valueFrom") is not None:
                    refused.append(Finding(
                        path=(*STANZA, "args", index, "valueFrom"),
                        message="cannot be migrated: spec.verification args take only a "
                        "string value (Kargo has no valueFrom there); declare this arg "
                        "with valueFrom.secretKeyRef in the AnalysisTemplate instead, "
                        "remove it here, and migrate again",
                    ))
                    continue
                args.append({k: v for k, v in arg.items() if k != "valueFrom"})
            out["args"] = args
        elif key == "analysisRunMetadata":
            out[key] = {k: v for k, v in value.items() if v is not None}
    return out, refused


def _refusals(stage: dict[str, Any]) -> list[Finding]:
    """Why this Stage's stanza cannot be migrated as it is (empty: it can)."""
    spec = stage["spec"]
    if spec.get("verification") is not None:
        return [Finding(path=STANZA, message="cannot be migrated: the Stage also has "
                        "spec.verification; keep one of the two")]
    found = [f for f in errors(check_stage(stage)) if f.path[:2] == STANZA]
    return [Finding(path=f.path, message=f"cannot be migrated until fixed: {f.message}")
            for f in found]


# ---------------------------------------------------------------- the text


@dataclass
class Outcome:
    """What migrating one source gives: the new text (the old one when nothing was
    migrated or anything was refused), the Stages migrated, and the refusals."""

    text: str
    migrated: list[tuple[Located, str]] = field(default_factory=list)  # (Stage, what)
    refused: list[tuple[Located, Finding]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Edit:
    start: int
    end: int
    text: str


class _Dumper(yaml.SafeDumper):
    """Block YAML as kubectl users write it; multi-line strings as ``|`` blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True  # merged or shared values are written out, not as &id001 anchors


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data,
                                   style="|" if "\n" in data else None)


_Dumper.add_representer(str, _represent_str)


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    end = len(text) if end < 0 else end
    return end - 1 if end > 0 and text[end - 1] == "\r" else end


def _block_end(text: str, node: yaml.Node) -> int:
    """Where a block collection's text ends: the end of the line of its last scalar (a
    trailing comment there belongs to it); PyYAML's own end mark is the next token."""
    while isinstance(node, yaml.MappingNode | yaml.SequenceNode) and not node.flow_style \
            and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(node, yaml.MappingNode) else last
    end = node.end_mark.index
    while end > node.start_mark.index and text[end - 1] in " \t\r\n":
        end -= 1
    return _line_end(text, end)


def _key_text(key_node: yaml.Node, name: str) -> str:
    style = getattr(key_node, "style", None)  # a scalar key's quoting, if any
    quote_char = style if style in ('"', "'") else ""
    return f"{quote_char}{name}{quote_char}"


def _render(text: str, key_node: yaml.Node, value_node: yaml.Node,
            body: Any, name: str) -> _Edit:
    """The edit that turns ``analysis: <value>`` into ``verification: <body>`` (or
    another old key into ``name``), keeping the text between the key and the value
    (``:``, a comment, the line break)."""
    key = _key_text(key_node, name)
    between = text[key_node.end_mark.index:value_node.start_mark.index]
    newline = "\r\n" if between.endswith("\r\n") or "\r\n" in text else "\n"
    if getattr(value_node, "flow_style", False):
        end = value_node.end_mark.index
        if value_node.start_mark.line == value_node.end_mark.line:
            rendered = json.dumps(body, ensure_ascii=False, separators=(", ", ": "))
        else:
            # Pretty-printed JSON (or flow YAML): pretty-printed at the key's indentation.
            start = _line_start(text, key_node.start_mark.index)
            indent = text[start:key_node.start_mark.index]
            indent = indent if not indent.strip() else " " * key_node.start_mark.column
            rendered = json.dumps(body, ensure_ascii=False, indent=2).replace(
                "\n", newline + indent)
    else:
        end = _block_end(text, value_node)
        dumped = yaml.dump(body, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                           allow_unicode=True, width=1 << 20)
        rendered = (newline + " " * value_node.start_mark.column).join(
            dumped.rstrip("\n").split("\n"))
    return _Edit(key_node.start_mark.index, end, key + between + rendered)


def _removal(text: str, key_node: yaml.Node, value_node: yaml.Node) -> _Edit | None:
    """The edit that deletes the line(s) of ``analysis: null``; None in flow style."""
    start = _line_start(text, key_node.start_mark.index)
    if text[start:key_node.start_mark.index].strip():
        return None
    end = _line_end(text, value_node.end_mark.index)
    rest = text[value_node.end_mark.index:end].strip()
    if rest and not rest.startswith("#"):
        return None
    if end < len(text):
        end = text.index("\n", end) + 1
    return _Edit(start, end, "")


def _nodes(node: yaml.Node, skip_key: yaml.Node | None = None) -> Iterator[yaml.Node]:
    """Every node under ``node`` (itself included) once, leaving out the mapping entry
    whose key node is ``skip_key`` (an alias elsewhere to its value is still visited)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, yaml.MappingNode):
            for key_node, value_node in current.value:
                if key_node is not skip_key:
                    stack.extend((key_node, value_node))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


def _shares_nodes(document: yaml.Node, key_node: yaml.Node, value_node: yaml.Node) -> bool:
    """Whether the stanza and the rest of the document share a node (a YAML anchor and
    alias across the boundary): rewriting the stanza would break the other side."""
    inside = {id(n) for n in _nodes(value_node)}
    return any(id(n) in inside for n in _nodes(document, skip_key=key_node))


@dataclass(frozen=True, slots=True)
class _Rewrite:
    """``spec.<old>`` written as ``spec.<new>: <body>``; body None: removed (it was null)."""

    old: str
    new: str
    body: Any


def _text_edit(source: Source, located: Located, rewrite: _Rewrite
               ) -> tuple[_Edit | None, list[Finding]]:
    """The text edit for one rewrite of one Stage, or why it cannot be made."""
    path = ("spec", rewrite.old)
    found = entry(_child_spec(located), rewrite.old)
    document = source.documents[located.where[0]].node
    if found is None or document is None:
        return None, [Finding(path=path, message="cannot be migrated: it is not written "
                              "as a key of spec in this file's text (a merge key, or JSON "
                              "that only a JSON parser reads); rewrite it by hand")]
    key_node, value_node = found
    if _shares_nodes(document, key_node, value_node):
        return None, [Finding(path=path, message="cannot be migrated: it shares YAML "
                              "anchors or aliases with the rest of the document; rewrite "
                              "it by hand")]
    if rewrite.body is None:
        removal = _removal(source.text, key_node, value_node)
        if removal is None:
            return None, [Finding(path=path, message="cannot be migrated: delete "
                                  f"`{rewrite.old}: null` from this flow mapping by hand")]
        return removal, []
    return _render(source.text, key_node, value_node, rewrite.body, rewrite.new), []


def _analysis_rewrite(located: Located) -> tuple[_Rewrite | None, list[Finding]]:
    """The rewrite of a Stage's ``spec.analysis``, or the refusals."""
    spec = located.data["spec"]
    if spec["analysis"] is None:
        return _Rewrite("analysis", "verification", None), []
    refused = _refusals(located.data)
    if refused:
        return None, refused
    body, refused = convert(spec["analysis"])
    return (None, refused) if refused else (_Rewrite("analysis", "verification", body), [])


def _freight_rewrite(located: Located, index: StageIndex
                     ) -> tuple[_Rewrite | None, list[Finding]]:
    spec = located.data["spec"]
    if spec["subscriptions"] is None:
        return _Rewrite("subscriptions", "requestedFreight", None), []
    body, refused = requested_freight(located.data, index)
    return (None, refused) if body is None else \
        (_Rewrite("subscriptions", "requestedFreight", body), [])


def _stage_rewrites(located: Located, index: StageIndex
                    ) -> tuple[list[_Rewrite], list[Finding]]:
    """Every rewrite one Stage needs, or the refusals."""
    spec = located.data["spec"]
    rewrites: list[_Rewrite] = []
    refused: list[Finding] = []
    if "analysis" in spec:
        rewrite, why = _analysis_rewrite(located)
        rewrites += [rewrite] if rewrite else []
        refused += why
    if "subscriptions" in spec:
        rewrite, why = _freight_rewrite(located, index)
        rewrites += [rewrite] if rewrite else []
        refused += why
    if "promotionMechanisms" in spec:
        if spec["promotionMechanisms"] is None:
            rewrites.append(_Rewrite("promotionMechanisms", "", None))
        else:
            refused.append(mechanisms_refusal())
    return rewrites, refused


def _what(rewrite: _Rewrite) -> str:
    if rewrite.body is None:
        return f"spec.{rewrite.old}: null (the same as absent) removed"
    return f"spec.{rewrite.old} rewritten as spec.{rewrite.new}"


def _child_spec(located: Located) -> yaml.Node | None:
    found = entry(located.node, "spec")
    return found[1] if found else None


def _find(documents: list[Any], where: tuple[int, ...]) -> Any:
    obj = documents[where[0]].data
    for index in where[1:]:
        obj = obj["items"][index]
    return obj


def _rewrite_holds(stage: dict[str, Any], rewrite: _Rewrite) -> bool:
    spec = stage["spec"]
    if rewrite.old in spec:
        return False
    if rewrite.body is None:
        return True
    if spec.get(rewrite.new) != rewrite.body:
        return False
    if rewrite.new == "verification":
        return not errors(check_stage(stage))
    written = ("spec", rewrite.new)
    return not any(f.path[:2] == written
                   for f in check_against_crds(stage, schemas=bundled_schemas()))


def _reads_back(text: str, expected: list[tuple[Located, _Rewrite]]) -> bool:
    """Whether ``text`` parses and each migrated Stage has none of the old keys and,
    where one was written, the intended new stanza without errors."""
    try:
        documents = parse(text)
        return all(_rewrite_holds(_find(documents, located.where), rewrite)
                   for located, rewrite in expected)
    except (Unreadable, LookupError, TypeError):
        return False


_OLD_KEYS = ("analysis", "subscriptions", "promotionMechanisms")


def migrate_source(source: Source, index: StageIndex | None = None) -> Outcome:
    """Migrate every Stage of ``source`` that has ``spec.analysis``,
    ``spec.subscriptions`` or ``spec.promotionMechanisms`` (upstream Stages looked up in
    ``index``, by default the Stages of ``source``); all or nothing."""
    if index is None:
        index = StageIndex(located.data for located in objects(source))
    edits: list[_Edit] = []
    outcome = Outcome(text=source.text)
    expected: list[tuple[Located, _Rewrite]] = []
    for located in objects(source):
        spec = located.data.get("spec")
        if owned_kind(located.data) != KIND_STAGE or not isinstance(spec, dict) \
                or not any(key in spec for key in _OLD_KEYS):
            continue
        rewrites, refused = _stage_rewrites(located, index)
        for rewrite in [] if refused else rewrites:
            edit, why = _text_edit(source, located, rewrite)
            refused += why
            if edit is not None:
                edits.append(edit)
                outcome.migrated.append((located, _what(rewrite)))
                expected.append((located, rewrite))
        outcome.refused.extend((located, finding) for finding in refused)
    if outcome.refused or not edits:
        return outcome
    text = source.text
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[:edit.start] + edit.text + text[edit.end:]
    if not _reads_back(text, expected):
        # Not expected to happen; if it does, the user's file must not pay for it.
        outcome.refused.extend(
            (located, Finding(path=("spec", rewrite.old), message="cannot be migrated "
                              "automatically: the rewritten file did not read back as "
                              "intended; rewrite it by hand (and please report this)"))
            for located, rewrite in expected)
        return outcome
    outcome.text = text
    return outcome


# ---------------------------------------------------------------- the command


def _write_in_place(path: str, text: str) -> None:
    """Replace ``path`` atomically (a reader never sees half a file), keeping its mode."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".migrate-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def migrate(paths: Sequence[str], *, write: bool, recursive: bool = False,
            out: TextIO, err: TextIO) -> int:
    """Rewrite ``spec.analysis`` as ``spec.verification`` in every file of ``paths``."""
    if write and "-" in paths:
        print("--write cannot rewrite stdin (-)", file=err)
        return EXIT_UNREADABLE
    sources, problems = read_sources(paths, recursive=recursive)
    unreadable = len(problems)
    for problem in problems:
        print(problem, file=err)
    texts: list[str] = []
    refused = 0
    index = StageIndex(located.data for source in sources for located in objects(source))
    for source in sources:
        outcome = migrate_source(source, index)
        for located, finding in outcome.refused:
            print(f"{source.path}: {label(located.data)}: {finding}", file=err)
        refused += len(outcome.refused)
        if outcome.refused:
            continue
        for located, what in outcome.migrated:
            print(f"{source.path}: {label(located.data)}: {what}", file=err)
        if not outcome.migrated:
            print(f"{source.path}: nothing to migrate", file=err)
        elif write:
            _write_in_place(source.path, outcome.text)
        texts.append(outcome.text)
    if not write and not refused and not unreadable:
        # Several files become one stream, as `kubectl apply -f -` reads it.
        out.write("---\n".join(t if t.endswith("\n") or not t else t + "\n" for t in texts))
    return EXIT_UNREADABLE if unreadable else EXIT_INVALID if refused else EXIT_OK
