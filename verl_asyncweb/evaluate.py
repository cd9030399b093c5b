"""``python -m verl_asyncweb.evaluate (RUN_DIR | MODEL_DIR)``: see :mod:`verl_asyncweb.learning.evaluate`."""

import sys

from verl_asyncweb.learning.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
