"""``python -m schemas validate|migrate``: the offline CLI and everything that reads files.

The rest of ``schemas`` is the contract as data and pure checks, shared by the webhook
and the reconciler; this package is the one part that does I/O, and nothing in
``schemas`` outside it imports it (an import-linter contract in ``pyproject.toml``).

- ``main``: the arguments (with a did-you-mean) and ``main()``, run by
  ``schemas/__main__.py``;
- ``validate``: the webhook's checks over files, findings in document order (text or
  ``--output json``);
- ``migrate``: the ``spec.analysis`` -> ``spec.verification`` rewrite of the file text,
  the ``migrate`` command, and the error ``validate`` gives for the old spelling;
  ``migrate_freight``: Kargo v0 ``spec.subscriptions`` -> ``spec.requestedFreight``;
- ``crd_files``: ``validate --crds DIR``;
- ``manifests``: reading manifest files as kubectl reads them (YAML or JSON, directories,
  ``*List``), with node trees for positions and text edits;
- ``file_templates``: the template look-up offline (the templates among the files).

The exit codes below are the same for both commands (docs/validate.md
"``rollgate validate``" and "Migrating from ``spec.analysis``").
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INVALID = 1  # validation errors (validate) or a Stage that cannot be migrated
EXIT_UNREADABLE = 2  # a path that cannot be read or parsed
