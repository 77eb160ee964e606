"""The verification feature's options: its modes and each flag's one default, typed
(docs/components.md, "Reconciler").

``reconciler.cli`` takes the defaults of the flags from here and builds
``VerificationOptions`` from the parsed flags; ``reconciler.controllers.load`` picks the
controller by ``mode`` and hands it these options, and nothing else of the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# --stage-verification: engine (rollgate verifies), observe (Kargo verifies, rollgate
# reports; the default, and the only mode that may run next to Kargo), off.
MODES: Final = ("engine", "observe", "off")
DEFAULT_MODE: Final = "observe"

# --observe-grace-seconds: how old a run no verification records must be before it
# counts as a duplicate.
OBSERVE_GRACE_SECONDS: Final = 60.0
# --observe-lag-seconds: how long after the run of the current verification finished
# the entry may still say Pending/Running before it counts as not recorded.
OBSERVE_LAG_SECONDS: Final = 10.0


@dataclass(frozen=True, kw_only=True, slots=True)
class VerificationOptions:
    """The flags of Stage verification, one field each."""

    mode: str = DEFAULT_MODE  # --stage-verification, one of MODES
    observe_grace_seconds: float = OBSERVE_GRACE_SECONDS
    observe_lag_seconds: float = OBSERVE_LAG_SECONDS
    # --refresh-lagging: observe mode's one write, Kargo's refresh request.
    refresh_lagging: bool = False
    # --shard NAME and --default-shard: which Stages observe mode looks at (``shards``).
    shard: str | None = None
    default_shard: bool = False
