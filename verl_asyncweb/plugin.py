"""Entry point of verl's ``verl.plugins`` group: importing this module performs every registration.

verl imports it in the driver and in every Ray worker when ``verl`` is imported. Each module below registers
on its definitions with verl's own registries; nothing here starts a browser, Ray or any I/O.
"""

from verl_asyncweb.backends import cpu_backend, cpu_platform, hf_replica, weight_sync  # noqa: F401
