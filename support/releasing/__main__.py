"""``python -m releasing``: ``make release``."""

import sys

from releasing.release import main

sys.exit(main())
