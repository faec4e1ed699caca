"""``python -m zoo_attention`` runs the ``zoo-attention`` command."""

import sys

from ._cli import main

sys.exit(main())
