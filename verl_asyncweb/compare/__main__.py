"""``python -m verl_asyncweb.compare``: see :mod:`verl_asyncweb.compare.cli`."""

import sys

from verl_asyncweb.compare.cli import main

if __name__ == "__main__":
    sys.exit(main())
