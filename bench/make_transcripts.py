"""Write the coding-agent transcripts used as compression fixtures (deterministic).

    python bench/make_transcripts.py            # writes tests/fixtures/transcripts/*.json
    python bench/make_transcripts.py --check    # fails if the files on disk differ

Each file is ``{"name", "shape", "description", "system"?, "messages"}``; the OpenAI ones carry
their system prompt as the first message, the Anthropic one in ``system`` (as that API takes it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import transcript_fetchkit  # noqa: E402
import transcript_invoicer  # noqa: E402
import transcript_retryq  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "transcripts"

DESCRIPTIONS = {
    "invoicer": "OpenAI shape. Python package: fix a date-parsing and a rounding bug, then follow-ups "
    "(CLI option, ruff, discount bug, changelog, custom error).",
    "fetchkit": "Anthropic shape (tool_use/tool_result, is_error). Add a response cache to an HTTP client "
    "library; mypy and pytest failures with retries, parallel reads.",
    "retryq": "OpenAI shape. TypeScript job queue: chase a flaky jest test, tsc errors, repeated test runs, "
    "a CI log pasted twice.",
}


def render() -> dict[str, str]:
    files: dict[str, str] = {}
    for module in (transcript_invoicer, transcript_fetchkit, transcript_retryq):
        session = module.build()
        doc: dict[str, object] = {
            "name": session.name,
            "shape": session.shape,
            "description": DESCRIPTIONS[session.name],
        }
        messages = session.messages
        if session.shape == "anthropic" and messages and messages[0]["role"] == "system":
            doc["system"] = messages[0]["content"]
            messages = messages[1:]
        doc["messages"] = messages
        files[f"{session.name}.json"] = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    args = parser.parse_args()
    files = render()
    if args.check:
        stale = [name for name, text in files.items() if not (OUT / name).exists() or (OUT / name).read_text() != text]
        for name in stale:
            print(f"out of date: {OUT / name}")
        return 1 if stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (OUT / name).write_text(text, encoding="utf-8")
        print(f"wrote {OUT / name} ({len(json.loads(text)['messages'])} messages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
