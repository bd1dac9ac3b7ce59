"""The MCP server (R62): ``tiermem mcp`` serves one scope's memory over stdio or streamable HTTP.

:mod:`tiermem.mcp.tools` holds the tools and resources as plain methods over a ``Memory`` (no
SDK needed); :mod:`tiermem.mcp.server` registers them with the official ``mcp`` SDK. Nothing
here imports the SDK until the server is built, so ``import tiermem`` stays light.
"""
