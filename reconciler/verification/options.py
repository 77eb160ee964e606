"""The modes and the defaults of the verification flags, defined once for the command
line and for ``reconciler.controllers.load`` (README, "Reconciler")."""

from __future__ import annotations

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
