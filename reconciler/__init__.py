"""rollgate's reconciler: Stage verification and RolloutManager plugins controllers.

``runtime/`` runs controllers (caches, queues, leader election, health/metrics);
``analysis`` and ``verification`` are the pure rules of Stage verification;
``controllers/`` holds the controllers, loaded by name (``python -m reconciler``).
"""
