"""Adapters: agentsession as the session backend of agent frameworks.

Each adapter is one module implementing one framework's session interface over a
:class:`~agentsession.SessionManager`, an :class:`~agentsession.AsyncSessionManager` or
the HTTP client, so switching a framework's storage to agentsession is one import and one
constructor. A framework is an optional extra (``pip install
'agentsession[openai-agents]'``) and is imported only by its own adapter module, so
``import agentsession`` never needs it.

* :mod:`agentsession.adapters.openai_agents`: the openai-agents ``Session`` protocol
  (:class:`~agentsession.adapters.openai_agents.AgentSessionSession`), and its tool
  history hooks (:mod:`agentsession.adapters.openai_agents_hooks`).
* :mod:`agentsession.adapters.langchain`: LangChain's ``BaseChatMessageHistory``
  (:class:`~agentsession.adapters.langchain.AgentSessionChatMessageHistory`).
* :mod:`agentsession.adapters.adk`: Google ADK's ``BaseSessionService``
  (:class:`~agentsession.adapters.adk.AgentSessionService`).
* :mod:`agentsession.adapters.backend`: what the adapters share, the backend seen as
  one async interface and a framework's session id bound to a session
  (:class:`~agentsession.adapters.backend.KeyedSession`).

The mapping of each framework's objects onto sessions and messages, and the pitfalls, are
in docs/adapters.md.
"""
