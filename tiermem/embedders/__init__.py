"""Embedders: ``local`` (all-MiniLM-L6-v2 on onnxruntime, offline) and ``openai`` / ``openai-compatible``.

Each module is imported on demand through :mod:`tiermem.models.registry`; importing this
package loads nothing heavy.
"""
