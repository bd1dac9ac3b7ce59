"""Framework adapters, each behind an optional extra; this package imports none of them (importing
:mod:`tiermem` must not pull in a framework), so import the submodule you use, and without its
extra that import raises an ``ImportError`` naming it. :mod:`tiermem.integrations.langgraph`
(``pip install 'tiermem[langgraph]'``): ``TiermemStore``, a LangGraph ``BaseStore`` of JSON items
by (namespace, key) with value filters, TTL and hybrid ``query=`` search.
:mod:`tiermem.integrations.openai_agents` (``pip install 'tiermem[openai-agents]'``):
``TiermemSession``, an OpenAI Agents SDK ``Session`` whose items are kept in the store and
journaled, with ``memory_tools`` (``remember``, ``recall``) and ``memory_instructions``.
:mod:`tiermem.integrations.pydantic_ai` (``pip install 'tiermem[pydantic-ai]'``):
``memory_toolset`` (``remember``, ``recall``, ``forget``) and ``memory_instructions`` from
``format_for_injection``. All three write through the storage layer, with the same validation and
secret redaction as the rest of tiermem.
"""
