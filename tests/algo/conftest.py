"""Algorithm tests import the registering modules once, as ``verl_asyncweb.plugin`` does."""

import verl_asyncweb.algo.estimators  # noqa: F401
import verl_asyncweb.algo.losses  # noqa: F401
