"""rollgate's reconciler: Stage verification and RolloutManager plugins controllers.

``runtime/`` runs controllers (caches, queues, leader election, health/metrics) and
knows no feature; ``verification/`` is Stage verification (its pure rules and its two
controllers, engine and observe); ``controllers/`` is the registry the command line
loads controllers from by name (``python -m reconciler``), and the plugins controller;
``options.py`` is ``ReconcilerOptions``, the whole command line typed (the runtime's and
each feature's options dataclass), which ``cli.py`` alone builds from the flags.
"""
