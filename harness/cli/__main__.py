"""``python -m harness.cli`` (e.g. under ``accelerate launch -m harness.cli eval ...``) = ``lch``."""

import sys

from harness.cli import main

sys.exit(main())
