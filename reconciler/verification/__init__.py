"""Stage verification: the feature that decides whether freight is verified in a Stage.

What lives here (docs/verification.md, "Stage verification"):

- ``naming``: Kargo's identity rules (freight collection ids, run names, label values
  shortened as Kargo shortens them) and the labels by which runs are found;
- ``payloads``: the parts of Kargo's and Argo Rollouts' objects verification reads and
  writes, typed, with accessors (``current_freight``, ``current_verification``, ...);
- ``analysis_run``: the pure AnalysisRun builder;
- ``plan``: engine mode's pure planner, ``plan(World) -> Plan``, as named steps;
- ``anomalies``: observe mode's findings, one pure function each;
- ``shards``: which Stages a Kargo shard holds (``--shard``, ``--default-shard``);
- ``options``: the modes, and ``VerificationOptions``: the feature's flags, typed,
  each with its one default;
- ``watches``: what the two controllers watch and how a change maps to Stages;
- ``metrics``: the feature's Prometheus metrics, served by the runtime;
- ``engine``: the engine-mode controller (plan, then carry the plan out);
- ``observer``: the observe-mode controller (read Kargo's work, report).

The pure modules (naming, payloads, analysis_run, plan, anomalies, shards, options)
import neither the Kubernetes client nor the runtime; ``pyproject.toml``'s
import-linter contracts hold them to it. This file imports nothing, so importing a
pure module never loads a controller.
"""
