"""Dispatch ``python -m verl_asyncweb.bench NAME [args]`` to ``verl_asyncweb.bench.NAME.main(args)``."""

import importlib
import pkgutil
import sys

import verl_asyncweb.bench as bench_pkg


def _available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench_pkg.__path__) if not m.name.startswith("_"))


def main(argv: list[str]) -> int:
    names = _available()
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(f"usage: python -m verl_asyncweb.bench NAME [args]; NAME is one of {names}\n")
        sys.stdout.write("python -m verl_asyncweb.bench NAME --help describes one benchmark\n")
        return 0
    if not argv or argv[0] not in names:
        got = argv[0] if argv else "nothing"
        sys.stderr.write(f"usage: python -m verl_asyncweb.bench NAME [args]; NAME must be one of {names}, got {got}\n")
        return 2
    module = importlib.import_module(f"verl_asyncweb.bench.{argv[0]}")
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
