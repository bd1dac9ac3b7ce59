"""Deep Dream: consolidating the Daily journal into ``MEMORY.md`` without inventing or destroying memory.

- :mod:`tiermem.dream.prompt`: ``build_dream_messages`` (package data ``tiermem/prompts/dream.md``)
- :mod:`tiermem.dream.parse`: ``parse_dream_reply`` -> ``DreamReply`` (bullets, diary)
- :mod:`tiermem.dream.support`: ``SupportChecker`` — the no-fabrication check (R40)
- :mod:`tiermem.dream.guards`: ``check_rewrite`` — empty / >25% loss / budget (R41)
- :mod:`tiermem.dream.diary`: ``memory/dreams/YYYY-MM-DD.md``
- :mod:`tiermem.dream.runner`: ``DreamRunner`` — one run with its lock, versions, rollback
- :mod:`tiermem.dream.schedule`: ``Schedule`` and ``DreamScheduler`` (R42)

``Memory.deep_dream``, ``Memory.rollback``, ``Memory.dream_versions`` and
``Memory.start_dream_scheduler`` are the entry points.
"""
