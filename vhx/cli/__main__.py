"""``python -m vhx.cli``: the ``vhx`` command (how ``accelerate launch -m vhx.cli ...`` starts it)."""

import sys

from vhx.cli import main

sys.exit(main())
