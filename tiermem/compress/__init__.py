"""DCP-style context compression (R50-R53): pure functions over chat message lists."""

from tiermem.compress.compressor import CompressionResult, compress
from tiermem.compress.messages import looks_failed
from tiermem.compress.pairs import check_tool_pairs
from tiermem.compress.rules import CompressionAction

__all__ = ["CompressionAction", "CompressionResult", "check_tool_pairs", "compress", "looks_failed"]
