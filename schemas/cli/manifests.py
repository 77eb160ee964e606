"""Manifest files as the offline CLI reads them: YAML (or JSON) documents, each with its
node tree, so a finding can be placed (document order, line numbers) and a rewrite can
touch only the text it changes.

YAML is read the way kubectl reads it where that matters: timestamps stay strings (JSON
has no date type), non-string map keys become strings, a mapping with a key twice is
refused, ``*List`` documents are expanded, and a directory means the ``.yaml``, ``.yml``
and ``.json`` files in it (``recursive`` for its subdirectories too, as ``kubectl -R``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any

import yaml

from schemas.findings import Path
from schemas.translate import quote

EXTENSIONS = (".yaml", ".yml", ".json")


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads YAML the way kubectl does, as far as it matters here."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[str, Any]:
    _refuse_duplicate_keys(loader, node)
    mapping = loader.construct_mapping(node)
    return {k if isinstance(k, str) else key_text(k): v for k, v in mapping.items()}


def _refuse_duplicate_keys(loader: _Loader, node: yaml.MappingNode) -> None:
    """kubectl refuses a mapping with a key twice; PyYAML would keep the last value and
    check something other than what the user will apply."""
    seen: dict[object, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # "<<" merges may override keys; that is what they are for
        key = loader.construct_object(key_node, deep=True)
        key = key if isinstance(key, str) else key_text(key)
        try:
            first = seen.get(key)
        except TypeError:
            continue  # an unhashable key: construct_mapping reports it
        if first is not None:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"duplicate key {quote(key)} (first at line {first.start_mark.line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node


def key_text(key: object) -> str:
    """A non-string map key as the string kubectl would make of it."""
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


@dataclass(frozen=True, slots=True)
class Document:
    data: object
    node: yaml.Node | None  # None when the text was read as JSON only (no positions)


@dataclass(frozen=True, slots=True)
class Source:
    """One file (or stdin, ``-``) as read."""

    path: str
    text: str
    documents: list[Document]


@dataclass(frozen=True, slots=True)
class Located:
    """One object of a source: where it is (document index, then ``items`` indexes of
    enclosing ``List`` documents) and its node."""

    data: dict[str, Any]
    node: yaml.Node | None
    where: tuple[int, ...]


class Unreadable(Exception):
    """A path that cannot be read or parsed; the message is ready to print."""


# ---------------------------------------------------------------- paths


def expand_paths(paths: Sequence[str], *, recursive: bool) -> Iterator[str | Unreadable]:
    """Each path given, with directories replaced by their manifest files in name
    order (what kubectl applies for ``-f DIR``); an Unreadable for a directory without
    any. A path that is not a directory is passed on as it is, whatever its name."""
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            yield path
            continue
        found = list(_walk(FsPath(path), recursive=recursive))
        if found:
            yield from found
        else:
            hint = "" if recursive else " (-R also searches its subdirectories)"
            yield Unreadable(f"{path}: no {', '.join(EXTENSIONS)} files in this directory{hint}")


def _walk(directory: FsPath, *, recursive: bool) -> Iterator[str]:
    try:
        entries = sorted(directory.iterdir(), key=lambda p: p.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir():
            # Not through symlinks: a link to a parent would loop.
            if recursive and not entry.is_symlink():
                yield from _walk(entry, recursive=recursive)
        elif entry.suffix.lower() in EXTENSIONS:
            yield str(entry)


# ---------------------------------------------------------------- reading


def read_source(path: str) -> Source:
    """Read and parse ``path``; raises Unreadable with a message naming it."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            # newline="": CRLF stays CRLF, so migrate can keep the file as it was.
            with open(path, encoding="utf-8", newline="") as handle:
                text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise Unreadable(f"{path}: cannot read file: {reason}") from None
    return Source(path=path, text=text, documents=parse(text, path))


def read_sources(paths: Sequence[str], *, recursive: bool) -> tuple[list[Source], list[str]]:
    """Every readable source of ``paths`` (directories expanded), and a message for each
    path that could not be read."""
    sources: list[Source] = []
    problems: list[str] = []
    for item in expand_paths(paths, recursive=recursive):
        try:
            if isinstance(item, Unreadable):
                raise item
            sources.append(read_source(item))
        except Unreadable as problem:
            problems.append(str(problem))
    return sources, problems


def parse(text: str, path: str = "<text>") -> list[Document]:
    """Every document of ``text`` with its node tree; raises Unreadable."""
    try:
        return _yaml_documents(text)
    except yaml.YAMLError as exc:
        documents = _json_documents(text)
        if documents is not None:
            return documents
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" (line {mark.line + 1}, column {mark.column + 1})"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise Unreadable(f"{path}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise Unreadable(f"{path}: invalid YAML: nested too deeply") from None


def _yaml_documents(text: str) -> list[Document]:
    loader = _Loader(text)
    try:
        out: list[Document] = []
        while loader.check_node():
            node = loader.get_node()
            out.append(Document(loader.construct_document(node), node))
        return out
    finally:
        loader.dispose()


def _json_documents(text: str) -> list[Document] | None:
    """JSON that is not YAML to PyYAML (tab indentation is the usual case), read as
    kubectl reads a stream that starts with ``{``: one or more JSON values."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    decoder = json.JSONDecoder()
    out: list[Document] = []
    index = 0
    try:
        while True:
            while index < len(text) and text[index].isspace():
                index += 1
            if index == len(text):
                return out
            value, index = decoder.raw_decode(text, index)
            out.append(Document(value, None))
    except (ValueError, RecursionError):
        return None


# ---------------------------------------------------------------- objects and nodes


def objects(source: Source) -> Iterator[Located]:
    """The objects of every document, ``kind: *List`` expanded (recursively)."""
    for index, document in enumerate(source.documents):
        yield from _objects(document.data, document.node, (index,))


def _objects(data: object, node: yaml.Node | None, where: tuple[int, ...]) -> Iterator[Located]:
    if not isinstance(data, dict):
        return
    kind = data.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and (
            kind == "List" or isinstance(data.get("items"), list)):
        items_node = child(node, "items")
        for index, item in enumerate(data.get("items") or []):
            yield from _objects(item, child(items_node, index), (*where, index))
        return
    yield Located(data, node, where)


def label(obj: dict[str, Any]) -> str:
    """``Kind/name`` of an object, as the CLI names it in its output."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name = metadata.get("name") or metadata.get("generateName") or "<unnamed>"
    return f"{obj.get('kind')}/{name}"


def entry(node: yaml.Node | None, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    """The (key node, value node) of ``key`` in a mapping node, or None."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return key_node, value_node
    return None


def child(node: yaml.Node | None, part: str | int) -> yaml.Node | None:
    """The node at ``part`` under ``node`` (a mapping key or a sequence index)."""
    if isinstance(part, str):
        found = entry(node, part)
        return found[1] if found else None
    if isinstance(node, yaml.SequenceNode) and 0 <= part < len(node.value):
        item: yaml.Node = node.value[part]
        return item
    return None


def node_at(node: yaml.Node | None, path: Path) -> yaml.Node | None:
    """The node at ``path``, or at its nearest parent the file has (None without nodes)."""
    for part in path:
        found = child(node, part)
        if found is None:
            return node
        node = found
    return node


def exact_node(node: yaml.Node | None, path: Path) -> yaml.Node | None:
    """The node at ``path`` itself, or None."""
    for part in path:
        node = child(node, part)
        if node is None:
            return None
    return node


def position(node: yaml.Node | None, path: Path) -> tuple[int, int] | None:
    """1-based (line, column) where the finding at ``path`` is in the file: the field
    itself, or for a missing field the nearest parent that is written."""
    found = node_at(node, path)
    if found is None:
        return None
    return found.start_mark.line + 1, found.start_mark.column + 1
