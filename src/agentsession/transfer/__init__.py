"""Moving sessions in and out of a store: :mod:`.jsonl` (agentsession's own export
format, docs/export.md) and :mod:`.openai_agents` (an openai-agents ``SQLiteSession``
database). Both go through the :class:`~agentsession.SessionManager`, so an import is
checked, versioned and audited like any other write."""
