"""The text form of ``rollgate explain stage`` (``explain.explain_stage``'s document for
a terminal): a header, the answer, the timeline one line per item with its time (blank
where the objects record none), the findings. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Items that belong to a run are indented under the verification that started it.
_NESTED = frozenset({"analysis-run-started", "measurement", "analysis-run-completed",
                     "analysis-run-running", "analysis-run-missing"})
_TIME_WIDTH = len("2026-12-01T19:40:00Z")


def render(doc: Mapping[str, Any]) -> str:
    """The explanation as lines of text, ending with a newline."""
    stage = doc["stage"]
    freight = doc["freight"]
    head = f"Stage {stage['namespace']}/{stage['name']}"
    if freight["collection"]:
        head += (f", freight collection {freight['collection']} "
                 f"(Freight {', '.join(freight['names']) or '-'})")
    lines = [head, f"Answer: {doc['answer']}", ""]
    for item in doc["timeline"]:
        indent = "    " if item["what"] == "measurement" else (
            "  " if item["what"] in _NESTED else "")
        when = str(item.get("time") or "").ljust(_TIME_WIDTH)
        lines.append(f"{when}  {indent}{item['text']}")
    lines.append("")
    if doc["findings"]:
        lines.append("Findings (what observe mode reports as Warning events):")
        lines += [f"  {f['text']}" for f in doc["findings"]]
    else:
        lines.append("Findings: none")
    return "\n".join(lines) + "\n"
