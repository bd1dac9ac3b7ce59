"""Memory for coding agents (Claude Code, Codex CLI, Gemini CLI) through their lifecycle hooks.

``tiermem setup CLIENT`` registers the MCP server and the hooks in the client's own config
(:mod:`tiermem.agents.setup`); ``tiermem hook CLIENT EVENT`` answers one hook
(:mod:`tiermem.agents.hook_runner`); a small resident server per root keeps the embedder warm
for the per-prompt hook (:mod:`tiermem.agents.server`). Each client is one module registered in
:mod:`tiermem.agents.clients`. See docs/coding-agents.md.
"""
