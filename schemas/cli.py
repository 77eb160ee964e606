"""``python -m schemas validate FILE...``: the webhook's checks, offline, for a user's CI.

Output is one line per finding, ``file: Kind/name: path: message`` (warnings with
``warning: `` before the message), so it reads like the denial the user would get from
``kubectl apply``. Exit codes: 0 clean (warnings allowed), 1 validation errors, 2 a file
that cannot be read or parsed. No look-ups: offline there is no cluster to ask.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, TextIO

import yaml

from schemas.dispatch import check
from schemas.findings import Finding, Path
from schemas.translate import quote_hint

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_UNREADABLE = 2


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads YAML the way kubectl does, as far as it matters here.

    Timestamps stay strings (JSON has no date type) and non-string map keys become
    strings, so the checks see what the API server would see.
    """


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[str, Any]:
    _refuse_duplicate_keys(loader, node)
    mapping = loader.construct_mapping(node)
    return {k if isinstance(k, str) else _key_text(k): v for k, v in mapping.items()}


def _refuse_duplicate_keys(loader: _Loader, node: yaml.MappingNode) -> None:
    """kubectl refuses a mapping with a key twice; PyYAML would keep the last value and
    check something other than what the user will apply."""
    seen: dict[object, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # "<<" merges may override keys; that is what they are for
        key = loader.construct_object(key_node, deep=True)
        key = key if isinstance(key, str) else _key_text(key)
        try:
            first = seen.get(key)
        except TypeError:
            continue  # an unhashable key: construct_mapping reports it
        if first is not None:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"duplicate key {json.dumps(key)} (first at line {first.start_mark.line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node


def _key_text(key: object) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


Document = tuple[object, yaml.Node | None]


def _child(node: yaml.Node | None, part: str | int) -> yaml.Node | None:
    """The node at ``part`` under ``node`` (a mapping key or a sequence index)."""
    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == part:
                return value_node
    elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and (
            0 <= part < len(node.value)):
        return node.value[part]
    return None


def _objects(document: object, node: yaml.Node | None = None
             ) -> Iterator[tuple[dict[str, Any], yaml.Node | None]]:
    """The objects in one YAML document, with ``kind: List`` expanded (recursively),
    each with its YAML node (for the scalars as written)."""
    if not isinstance(document, dict):
        return
    if document.get("kind") == "List" or (
        isinstance(document.get("kind"), str)
        and document["kind"].endswith("List")
        and isinstance(document.get("items"), list)
    ):
        items_node = _child(node, "items")
        for index, item in enumerate(document.get("items") or []):
            yield from _objects(item, _child(items_node, index))
        return
    yield document, node


def _value_at(obj: object, path: Path) -> object:
    for part in path:
        found = (isinstance(obj, dict) and isinstance(part, str) and part in obj) or (
            isinstance(obj, list) and isinstance(part, int) and 0 <= part < len(obj))
        if not found:
            return None
        obj = obj[part]  # type: ignore[index]
    return obj


def _as_written(finding: Finding, obj: dict[str, Any], node: yaml.Node | None) -> Finding:
    """A "quote it" hint with the scalar as the file spells it (``on``, not ``true``)."""
    value = _value_at(obj, finding.path)
    if finding.message != quote_hint(value):
        return finding
    for part in finding.path:
        node = _child(node, part)
    if not isinstance(node, yaml.ScalarNode) or node.style is not None:
        return finding
    written = quote_hint(value, node.value)
    return replace(finding, message=written) if written else finding


def _label(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name = metadata.get("name") or metadata.get("generateName") or "<unnamed>"
    return f"{obj.get('kind')}/{name}"


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _documents(text: str) -> list[Document]:
    """Each YAML document as data and as its node tree, in one parse."""
    loader = _Loader(text)
    try:
        out: list[Document] = []
        while loader.check_node():
            node = loader.get_node()
            out.append((loader.construct_document(node), node))
        return out
    finally:
        loader.dispose()


def _load(path: str, err: TextIO) -> list[Document] | None:
    try:
        text = _read(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"{path}: cannot read file: {reason}", file=err)
        return None
    try:
        return _documents(text)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" (line {mark.line + 1}, column {mark.column + 1})"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        print(f"{path}: invalid YAML{where}: {problem}", file=err)
        return None
    except RecursionError:
        print(f"{path}: invalid YAML: nested too deeply", file=err)
        return None


def validate(
    paths: Sequence[str], *, allow_http_plugins: bool, out: TextIO, err: TextIO
) -> int:
    """Check every object in ``paths``; print findings; return the exit code."""
    status = EXIT_OK
    for path in paths:
        documents = _load(path, err)
        if documents is None:
            status = EXIT_UNREADABLE
            continue
        for document, node in documents:
            for obj, obj_node in _objects(document, node):
                for finding in check(obj, allow_http_plugins=allow_http_plugins):
                    finding = _as_written(finding, obj, obj_node)
                    print(f"{path}: {_label(obj)}: {finding}", file=out)
                    if not finding.warning and status == EXIT_OK:
                        status = EXIT_INVALID
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m schemas",
        description="Check rollgate's Stage and RolloutManager stanzas offline.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check_files = commands.add_parser(
        "validate",
        help="validate manifests (multi-document YAML; other kinds are ignored)",
        description="Exit 0 when clean (warnings allowed), 1 on errors, 2 when a file "
        "cannot be read or parsed.",
    )
    check_files.add_argument("files", nargs="+", metavar="FILE", help="YAML file, or - for stdin")
    check_files.add_argument(
        "--allow-http-plugins",
        action="store_true",
        help="accept http:// plugin locations (as the webhook does with the same flag)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return validate(
        args.files,
        allow_http_plugins=args.allow_http_plugins,
        out=sys.stdout,
        err=sys.stderr,
    )
