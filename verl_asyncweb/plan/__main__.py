"""``python -m verl_asyncweb.plan``: see :mod:`verl_asyncweb.plan.cli`."""

import sys

from verl_asyncweb.plan.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
