"""The ``asyncweb:`` config node (typed in :mod:`.schema`) and its Hydra defaults (``asyncweb/default.yaml``)."""
