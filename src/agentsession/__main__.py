"""``python -m agentsession``: the same as the ``agentsession`` command."""

from .cli.app import main

main()
