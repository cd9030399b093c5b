"""Suite-wide settings: every test runs on the CPU backend and contacts only loopback."""

import os

os.environ.setdefault("VERL_PLATFORM", "cpu")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# verl first: it loads the plugin on import (see verl_asyncweb/main.py).
import verl  # noqa: E402, F401
