"""``python -m verl_asyncweb.evaluate (RUN_DIR | MODEL_DIR)``: see :mod:`verl_asyncweb.learning.evaluate`."""

import sys

# verl first: importing verl loads this plugin (see verl_asyncweb.main).
import verl  # noqa: F401, I001

from verl_asyncweb.learning.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
