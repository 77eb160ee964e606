"""A bound on the work one object can cause.

Every list and map entry costs a schema walk and rule checks; an 8 MiB object (the
webhook's body limit) can hold some 300 000 args, seconds of CPU in an admission request
the API server gives 5 s. No real stanza comes near a thousand templates, args, labels,
annotations or plugins, so a longer list is reported on its own and the rest of the
checks are skipped (the user fixes that first and re-applies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from schemas.findings import Finding, Path

MAX_ENTRIES = 1000


def oversized(base: Path, body: Mapping[str, Any], fields: Iterable[str]) -> list[Finding]:
    """A finding for each of ``fields`` of ``body`` that has more than MAX_ENTRIES entries."""
    out = []
    for name in fields:
        value = body.get(name)
        if isinstance(value, (list, dict)) and len(value) > MAX_ENTRIES:
            out.append(Finding(
                path=(*base, name),
                message=f"has {len(value)} entries; at most {MAX_ENTRIES} are accepted "
                "(the entries were not checked)",
            ))
    return out
