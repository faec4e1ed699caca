"""``python -m zoo_data``: the ``zoo-data`` command."""

import sys

from .cli import main

sys.exit(main())
