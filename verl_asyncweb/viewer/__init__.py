"""Static HTML trajectory viewer: ``python -m verl_asyncweb.viewer RUN_DIR`` writes ``RUN_DIR/viewer/index.html``.

The page needs no server: data is embedded as a JSON script element, screenshots are linked as files, and all
model text is rendered with ``textContent`` (it is hostile input).
"""
