"""Benchmark scripts: ``python -m verl_asyncweb.bench NAME``; each NAME is a module here with ``main(argv)``."""
