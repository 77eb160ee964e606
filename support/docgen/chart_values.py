"""The values table of the chart's README (charts/rollgate/README.md), generated from
values.yaml and values.schema.json.

A value's description is the comment lines directly above its key in values.yaml (no
blank line between), its type comes from the schema and its default from values.yaml.
The table lists every value the chart defines: it goes into an object the schema closes
(``additionalProperties: false``) whose default is not empty, and stops at anything else
(free-form maps such as ``resources``, an empty label selector, lists, scalars). Every
such value needs a description, every key of values.yaml a schema entry and every schema
entry a key (but ``global``, Helm's), or the generator refuses. ``make chart-docs``
(``python -m docgen.chart_values``) rewrites the table between the README's markers;
``--check`` only says whether it is current, and a test fails when it is not.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testkit.paths import REPO_ROOT

CHART = REPO_ROOT / "charts" / "rollgate"
VALUES = CHART / "values.yaml"
SCHEMA = CHART / "values.schema.json"
README = CHART / "README.md"
BEGIN = "<!-- values table: generated from values.yaml by `make chart-docs`; do not edit -->"
END = "<!-- end of values table -->"
# Schema properties that values.yaml need not carry.
SCHEMA_ONLY = frozenset({"global"})

_KEY = re.compile(r"""^(?P<indent> *)(?P<key>"[^"]*"|'[^']*'|[^\s:#'"-][^\s:#]*):(?:\s|$)""")


class ValuesDocError(ValueError):
    """values.yaml and the schema do not describe the same values, or one is not
    described."""


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    type: str
    default: str
    description: str


def comments(text: str) -> dict[str, str]:
    """Each key path (``webhook.podDisruptionBudget.enabled``) of a YAML text with the
    comment lines directly above it, joined. Keys inside list items are not values."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    list_indent: int | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            pending = []
            continue
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        indent = len(line) - len(line.lstrip(" "))
        if list_indent is not None and indent > list_indent:
            pending = []
            continue
        list_indent = None
        if stripped == "-" or stripped.startswith("- "):
            list_indent, pending = indent, []
            continue
        match = _KEY.match(line)
        if not match:
            pending = []
            continue
        key = match["key"].strip("\"'")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        if any(pending):
            out[path] = " ".join(p for p in pending if p)
        stack.append((indent, key))
        pending = []
    return out


def _resolve(node: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in node:
        ref = str(node["$ref"])
        if not ref.startswith("#/"):
            raise ValuesDocError(f"only local $refs are followed, not {ref}")
        target: Any = schema
        for part in ref[2:].split("/"):
            target = target[part]
        node = target
    return node


def _closed(node: Mapping[str, Any]) -> bool:
    return node.get("type") == "object" and node.get("additionalProperties") is False


def type_of(node: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
    """A schema node's type as the table shows it."""
    node = _resolve(node, schema)
    if "enum" in node:
        return " | ".join(json.dumps(v) for v in node["enum"])
    if "oneOf" in node:
        return " or ".join(type_of(alt, schema) for alt in node["oneOf"])
    kind = node.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    if kinds == ["array"] and "items" in node:
        items = _resolve(node["items"], schema)
        return f"list of {type_of(items, schema)}" if "type" in items or "enum" in items \
            else "list"
    extra = node.get("additionalProperties")
    if kinds == ["object"] and isinstance(extra, Mapping) and "type" in extra:
        return f"map of {type_of(extra, schema)}"
    return " or ".join(str(k) for k in kinds)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rows(values_text: str, schema: Mapping[str, Any]) -> list[Row]:
    """The table's rows, in values.yaml's order."""
    values = yaml.safe_load(values_text) or {}
    described = comments(values_text)
    out: list[Row] = []
    problems: list[str] = []

    def walk(node: Mapping[str, Any], value: Mapping[str, Any], prefix: str) -> None:
        props: Mapping[str, Any] = node.get("properties", {})
        for key in sorted(set(props) - set(value) - (SCHEMA_ONLY if not prefix else set())):
            problems.append(f"{prefix}{key}: in the schema, not in values.yaml")
        for key, default in value.items():
            path = f"{prefix}{key}"
            if key not in props:
                problems.append(f"{path}: in values.yaml, not in the schema")
                continue
            child = _resolve(props[key], schema)
            description = described.get(path, "")
            if _closed(child) and isinstance(default, Mapping) and default:
                if description:
                    out.append(Row(path, "object", "", description))
                walk(child, default, path + ".")
                continue
            if not description:
                problems.append(f"{path}: no comment above it in values.yaml")
            out.append(Row(path, type_of(child, schema), json.dumps(default), description))

    walk(_resolve(schema, schema), values, "")
    if problems:
        raise ValuesDocError("values.yaml and values.schema.json:\n  " + "\n  ".join(problems))
    return out


def table(items: list[Row]) -> str:
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for row in items:
        default = f"`{_cell(row.default)}`" if row.default else ""
        lines.append(f"| `{row.key}` | {_cell(row.type)} | {default} | "
                     f"{_cell(row.description)} |")
    return "\n".join(lines)


def generated_table() -> str:
    return table(rows(VALUES.read_text(), json.loads(SCHEMA.read_text())))


def with_table(readme: str, generated: str) -> str:
    """``readme`` with the text between its markers replaced by ``generated``."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValuesDocError(f"{README}: the markers {BEGIN!r} and {END!r} are missing")
    return f"{readme[:start]}{BEGIN}\n{generated}\n{readme[end:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m docgen.chart_values",
                                     description="Regenerate the values table of " + str(README))
    parser.add_argument("--check", action="store_true",
                        help="only report whether the table is current (exit 1 if not)")
    args = parser.parse_args(argv)
    try:
        current = README.read_text()
        wanted = with_table(current, generated_table())
    except ValuesDocError as exc:
        print(exc, file=sys.stderr)
        return 2
    if current == wanted:
        print(f"{README.relative_to(REPO_ROOT)}: values table is current")
        return 0
    if args.check:
        print(f"{README.relative_to(REPO_ROOT)}: values table is out of date; run "
              "`make chart-docs`", file=sys.stderr)
        return 1
    Path(README).write_text(wanted)
    print(f"{README.relative_to(REPO_ROOT)}: values table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
