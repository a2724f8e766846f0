"""Moving sessions in and out of a store: :mod:`.jsonl` (agentsession's own export
format, docs/export.md), :mod:`.openai_agents` (an openai-agents ``SQLiteSession``
database) and :mod:`.langgraph` (a LangGraph ``SqliteSaver`` database). All go through
the :class:`~agentsession.SessionManager`, so an import is checked, versioned and
audited like any other write; every source is read as untrusted input
(:mod:`.sourcecheck`): a malformed one is one ImportSourceError, and nothing is
written."""
