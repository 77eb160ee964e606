"""Entry point for ``python -m schemas`` (see ``schemas.cli``)."""

from __future__ import annotations

import sys

from schemas.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
