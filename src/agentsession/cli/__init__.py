"""The ``agentsession`` command line (entry point: :func:`agentsession.cli.app.main`).

One module per job: :mod:`.app` assembles the commands, :mod:`.common` holds the shared
options, store opening and error-to-exit-code mapping, :mod:`.sessions`,
:mod:`.lifecycle`, :mod:`.db`, :mod:`.demo` and :mod:`.server` hold the commands, and
:mod:`.render` turns snapshots into tables and JSON (the demo prints with it too),
through :mod:`.fit`'s tables that keep the columns the terminal's width has room for.
"""
