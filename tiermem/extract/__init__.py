"""Fact extraction, the pure part: build the request, parse the reply, one retry.

- :mod:`tiermem.extract.prompt`: ``build_extraction_messages`` and ``EXTRACTION_SCHEMA``
- :mod:`tiermem.extract.parse`: ``parse_extraction`` -> ``ExtractionResult``
- :mod:`tiermem.extract.run`: ``extract_once`` (call, parse, one retry quoting the error)
- :mod:`tiermem.extract.guard`: strip tiermem's own injected memory from turns

Nothing here writes to storage; the ``Memory`` facade applies a result through the fact store.
"""
