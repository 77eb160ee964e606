"""``python -m schemas validate FILE...``: the webhook's checks, offline, for a user's CI.

Output is one line per finding, ``file: Kind/name: path: message`` (warnings with
``warning: `` before the message), so it reads like the denial the user would get from
``kubectl apply``. Exit codes: 0 clean (warnings allowed), 1 validation errors, 2 a file
that cannot be read or parsed. No look-ups: offline there is no cluster to ask.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import yaml

from schemas.dispatch import check

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
    mapping = loader.construct_mapping(node)
    return {k if isinstance(k, str) else _key_text(k): v for k, v in mapping.items()}


def _key_text(key: object) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _objects(document: object) -> Iterator[dict[str, Any]]:
    """The objects in one YAML document, with ``kind: List`` expanded (recursively)."""
    if not isinstance(document, dict):
        return
    if document.get("kind") == "List" or (
        isinstance(document.get("kind"), str)
        and document["kind"].endswith("List")
        and isinstance(document.get("items"), list)
    ):
        for item in document.get("items") or []:
            yield from _objects(item)
        return
    yield document


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


def _load(path: str, err: TextIO) -> list[object] | None:
    try:
        text = _read(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"{path}: cannot read file: {reason}", file=err)
        return None
    try:
        return list(yaml.load_all(text, Loader=_Loader))
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
        for document in documents:
            for obj in _objects(document):
                for finding in check(obj, allow_http_plugins=allow_http_plugins):
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
