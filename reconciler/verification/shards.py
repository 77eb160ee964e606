"""Which Stages a Kargo shard holds, as Kargo v1.11.2 selects them (docs/verification.md, "Observe
mode"): ``--shard NAME`` and ``--default-shard`` mean what ``SHARD_NAME`` and
``IS_DEFAULT_CONTROLLER`` mean to Kargo's controller, by the ``kargo.akuity.io/shard``
label (which Kargo's webhook keeps equal to ``spec.shard``).

Kargo (``pkg/controller/labels.go`` ``GetShardRequirement``, ``pkg/controller/
predicates.go`` ``ResponsibleFor.IsResponsible``):

- a shard name alone: only Stages labelled with it, by the label selector
  ``kargo.akuity.io/shard=NAME`` on the informer;
- the default controller with a shard name: those plus the unlabelled ones. A label
  selector cannot say "equals NAME or absent" (its requirements are ANDed; there is no
  OR), so Kargo caches every Stage and filters with its predicate; rollgate does the
  same (``responsible``). Two informers (``=NAME`` and ``!key``) would each need a store
  of their own while a controller has one primary cache, and every Stage would still
  arrive in one of them, so they would save nothing;
- the default controller alone: only unlabelled Stages, ``!kargo.akuity.io/shard``.

One difference, on purpose: no flag means every Stage (for Kargo an empty
``SHARD_NAME`` means the unlabelled ones only), so a reconciler started without flags
observes the whole cluster, as before sharding existed. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from schemas.objects import as_dict, meta_of

from .options import VerificationOptions

# Kargo's api/v1alpha1 LabelKeyShard.
LABEL_SHARD: Final = "kargo.akuity.io/shard"


@dataclass(frozen=True)
class Shard:
    name: str | None = None  # --shard
    default: bool = False  # --default-shard

    @classmethod
    def from_options(cls, options: VerificationOptions) -> Shard:
        """The selection the flags make (an empty name is no name)."""
        return cls(name=options.shard or None, default=options.default_shard)

    @property
    def everything(self) -> bool:
        """No flag: every Stage."""
        return self.name is None and not self.default

    def label_selector(self) -> str | None:
        """The informer's label selector, when one requirement says it; None for every
        Stage and for the union (filtered by ``responsible``)."""
        if self.name is not None and not self.default:
            return f"{LABEL_SHARD}={self.name}"
        if self.name is None and self.default:
            return f"!{LABEL_SHARD}"
        return None

    def responsible(self, stage: Mapping[str, Any]) -> bool:
        """Whether ``stage`` is in this selection (Kargo's ``IsResponsible``: the label
        equals the shard name, or is empty or absent on the default controller)."""
        if self.everything:
            return True
        label = as_dict(meta_of(stage).get("labels")).get(LABEL_SHARD) or ""
        return label == (self.name or "") or (label == "" and self.default)

    def describe(self) -> str:
        """For logs: which Stages are observed."""
        if self.everything:
            return "every Stage"
        parts = [f"Stages labelled {LABEL_SHARD}={self.name}"] if self.name else []
        if self.default:
            parts.append(f"Stages without {LABEL_SHARD}")
        return " and ".join(parts)
