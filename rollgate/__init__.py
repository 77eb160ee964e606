"""The ``rollgate`` command (and the kubectl plugin ``kubectl-rollgate``): one entry point
for everything a user runs, so a ``pip install`` gives a command instead of five
top-level packages to call with ``python -m``.

The package only dispatches (``rollgate.__main__``): each command is the existing
program's own ``main`` (``schemas``, ``certs``, ``webhook``, ``reconciler``), imported
only when that command runs, so ``rollgate validate`` in a user's CI never loads the
Kubernetes client or the HTTP server. Nothing of rollgate's imports this package
(``pyproject.toml``, import-linter: it sits on top).
"""
