"""``python -m agentsession``: the same as the ``agentsession`` command."""

from .cli import main

main()
