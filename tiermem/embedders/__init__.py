"""Embedders: ``local`` (all-MiniLM-L6-v2 on onnxruntime, offline; its int8 graph for a new store, the
store's own graph for an existing one) and ``openai`` / ``openai-compatible``.

Each module is imported on demand through :mod:`tiermem.models.registry`; importing this
package loads nothing heavy.
"""
