"""``python -m bayeval.cli``: the ``bayeval`` command."""

from bayeval.cli import main

main()
