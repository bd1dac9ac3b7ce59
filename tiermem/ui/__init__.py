"""``tiermem ui``: a local web viewer of one memory root (docs/ui.md).

:mod:`tiermem.ui.app` builds the ASGI app (pages in :mod:`tiermem.ui.pages`), :mod:`tiermem.ui.guard`
holds its guards (the MCP HTTP server's), :mod:`tiermem.ui.server` serves it with uvicorn.
Nothing here is imported until a viewer starts.
"""
