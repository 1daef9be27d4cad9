"""``python -m adcuda``: the same as the ``adcuda`` command (``adcuda.cli``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
