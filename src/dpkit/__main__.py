"""``python -m dpkit``: the dpkit command line (see :mod:`dpkit.cli`)."""

import sys

from dpkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
