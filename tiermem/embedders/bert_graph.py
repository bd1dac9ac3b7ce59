"""Build an ONNX graph of a BERT sentence encoder (MiniLM) straight from its safetensors weights.

No torch: the graph is written node by node with the ``onnx`` helper API. It takes
``input_ids`` and ``attention_mask`` (int64, ``(batch, seq)``) and returns the mean-pooled,
L2-normalised sentence vectors ``(batch, hidden)`` - the same computation as
sentence-transformers' Transformer -> Pooling(mean) -> Normalize for a BERT model with
``token_type_ids`` all zero. Only standard ONNX operators are used; onnxruntime fuses them
(LayerNorm, BiasGelu) when the session is created. (Emitting its contrib ``Attention`` and
``SkipLayerNormalization`` ops instead was measured: no faster on this model, so not done.)

``int8=`` names linears whose weights are quantised to int8 (symmetric, one scale per output
channel) and whose inputs are quantised to uint8 per token (one scale per row, so a text's vector
does not depend on the other texts of its batch, unlike onnxruntime's per-tensor
``DynamicQuantizeMatMul``), multiplied with ``MatMulInteger``: ~2.2x the throughput on a CPU with
AVX512-VNNI, vectors within cosine 0.995 of fp32 (figures in bench/README.md, issue 16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Weights = dict[str, npt.NDArray[np.float32]]

#: Bump when the graph layout changes so cached graphs are rebuilt.
GRAPH_VERSION = 1
OPSET = 18
#: The kinds of linear layer in each transformer block, as named for ``int8=``.
LINEAR_KINDS = ("qkv", "attention_output", "intermediate", "output")
#: What the int8 variant quantises: every linear (per-token activation scales keep even the
#: feed-forward output, whose post-gelu input has large outliers, within cosine 0.995 of fp32).
INT8_LINEARS = frozenset(LINEAR_KINDS)
#: Bump when the int8 layout or :data:`INT8_LINEARS` changes (part of the cached graph's name).
INT8_VERSION = 1


@dataclass(frozen=True)
class BertShape:
    """The few numbers of a BERT ``config.json`` the graph needs."""

    hidden: int
    heads: int
    layers: int
    layer_norm_eps: float

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> BertShape:
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError("only BERT models with exact gelu are supported")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        return cls(
            hidden=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            layers=int(config["num_hidden_layers"]),
            layer_norm_eps=float(config["layer_norm_eps"]),
        )


class _GraphWriter:
    """Accumulates nodes and initializers, naming intermediates uniquely."""

    def __init__(self, int8: frozenset[str] = frozenset()) -> None:
        from onnx import helper, numpy_helper

        self.int8 = int8
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, array: Any) -> str:
        self.initializers.append(self.numpy_helper.from_array(array, name=name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x: str, weights: Weights, prefix: str, kind: str) -> str:
        """``x @ W.T + b`` for a torch ``Linear`` stored as ``prefix.weight`` / ``prefix.bias``."""
        import numpy as np

        if kind in self.int8:
            return self.int8_linear(x, weights, prefix)
        w = self.const(f"{prefix}.wT", np.ascontiguousarray(weights[f"{prefix}.weight"].T))
        b = self.const(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def int8_linear(self, x: str, weights: Weights, prefix: str) -> str:
        """The same linear on int8 weights (symmetric, a scale per output column) and uint8 inputs
        (zero point 128, a scale per row: max |x| / 127 of that token's features)."""
        import numpy as np
        from onnx import TensorProto

        wt = np.asarray(weights[f"{prefix}.weight"], dtype=np.float32).T  # (in, out)
        w_scale = np.maximum(np.abs(wt).max(axis=0), 1e-12) / 127.0
        quantised = np.clip(np.rint(wt / w_scale), -127, 127).astype(np.int8)
        wq = self.const(f"{prefix}.wq", np.ascontiguousarray(quantised))
        ws = self.const(f"{prefix}.wscale", w_scale.astype(np.float32))
        wz = self.const(f"{prefix}.wzero", np.zeros(quantised.shape[1], dtype=np.int8))
        bias = self.const(f"{prefix}.bias", np.asarray(weights[f"{prefix}.bias"], dtype=np.float32))
        rows = self.const(f"{prefix}.rows_shape", np.array([-1, wt.shape[0]], dtype=np.int64))
        out_dim = self.const(f"{prefix}.out_dim", np.array([wt.shape[1]], dtype=np.int64))
        x2 = self.op("Reshape", [x, rows])  # (tokens, in)
        amax = self.op("ReduceMax", [self.op("Abs", [x2]), "i64_last"], keepdims=0)  # (tokens,)
        scale = self.op("Mul", [self.op("Max", [amax, "q_tiny"]), "q_inv127"])
        zero = self.op("Expand", ["q_zero_u8", self.op("Shape", [scale])])  # per-axis needs one per row
        xq = self.op("QuantizeLinear", [x2, scale, zero], axis=0)
        acc = self.op("Cast", [self.op("MatMulInteger", [xq, wq, "q_zero_u8", wz])], to=TensorProto.FLOAT)
        y = self.op("Add", [self.op("Mul", [self.op("Mul", [acc, self.op("Unsqueeze", [scale, "i64_last"])]), ws]),
                            bias])
        lead = self.op("Slice", [self.op("Shape", [x]), "i64_0", "i64_2", "i64_0"])  # (batch, seq)
        return self.op("Reshape", [y, self.op("Concat", [lead, out_dim], axis=0)])

    def layer_norm(self, x: str, weights: Weights, prefix: str, eps: float) -> str:
        scale = self.const(f"{prefix}.weight", weights[f"{prefix}.weight"])
        bias = self.const(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=eps)


def _embeddings(g: _GraphWriter, w: Weights, shape: BertShape) -> str:
    import numpy as np

    # token_type_ids are always 0 for single sentences: fold that row into the position table.
    pos_type = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    g.const("pos_type", np.ascontiguousarray(pos_type, dtype=np.float32))
    g.const("word_embeddings", w["embeddings.word_embeddings.weight"])
    g.const("i64_0", np.array([0], dtype=np.int64))
    g.const("i64_1", np.array([1], dtype=np.int64))
    g.const("i64_2", np.array([2], dtype=np.int64))
    seq_len = g.op("Slice", [g.op("Shape", ["input_ids"]), "i64_1", "i64_2", "i64_0"])
    positions = g.op("Slice", ["pos_type", "i64_0", seq_len, "i64_0"])
    words = g.op("Gather", ["word_embeddings", "input_ids"], axis=0)
    summed = g.op("Add", [words, positions])
    return g.layer_norm(summed, w, "embeddings.LayerNorm", shape.layer_norm_eps)


def _attention(g: _GraphWriter, x: str, mask_bias: str, w: Weights, p: str, shape: BertShape) -> str:
    import numpy as np

    head_dim = shape.hidden // shape.heads
    scale = 1.0 / math.sqrt(head_dim)
    # One fused QKV projection; the query is pre-scaled by 1/sqrt(head_dim).
    wq = w[f"{p}.attention.self.query.weight"] * scale
    bq = w[f"{p}.attention.self.query.bias"] * scale
    wqkv = np.concatenate([wq, w[f"{p}.attention.self.key.weight"], w[f"{p}.attention.self.value.weight"]])
    bqkv = np.concatenate([bq, w[f"{p}.attention.self.key.bias"], w[f"{p}.attention.self.value.bias"]])
    fused = {f"{p}.qkv.weight": wqkv.astype(np.float32), f"{p}.qkv.bias": bqkv.astype(np.float32)}
    qkv = g.linear(x, fused, f"{p}.qkv", "qkv")
    split = g.const(f"{p}.split", np.array([shape.hidden] * 3, dtype=np.int64))
    names = [f"{p}.q", f"{p}.k", f"{p}.v"]
    g.nodes.append(g.helper.make_node("Split", [qkv, split], names, axis=-1))
    heads_shape = g.const(f"{p}.heads_shape", np.array([0, 0, shape.heads, head_dim], dtype=np.int64))
    q = g.op("Transpose", [g.op("Reshape", [names[0], heads_shape])], perm=[0, 2, 1, 3])
    k = g.op("Transpose", [g.op("Reshape", [names[1], heads_shape])], perm=[0, 2, 3, 1])
    v = g.op("Transpose", [g.op("Reshape", [names[2], heads_shape])], perm=[0, 2, 1, 3])
    scores = g.op("Add", [g.op("MatMul", [q, k]), mask_bias])
    probs = g.op("Softmax", [scores], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged_shape = g.const(f"{p}.merged_shape", np.array([0, 0, shape.hidden], dtype=np.int64))
    merged = g.op("Reshape", [context, merged_shape])
    out = g.linear(merged, w, f"{p}.attention.output.dense", "attention_output")
    return g.layer_norm(g.op("Add", [out, x]), w, f"{p}.attention.output.LayerNorm", shape.layer_norm_eps)


def _feed_forward(g: _GraphWriter, x: str, w: Weights, p: str, shape: BertShape) -> str:
    h = g.linear(x, w, f"{p}.intermediate.dense", "intermediate")
    # exact gelu: 0.5 * h * (1 + erf(h / sqrt(2))); onnxruntime fuses this into BiasGelu
    erf = g.op("Erf", [g.op("Div", [h, "sqrt2"])])
    gelu = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, "one"])]), "half"])
    out = g.linear(gelu, w, f"{p}.output.dense", "output")
    return g.layer_norm(g.op("Add", [out, x]), w, f"{p}.output.LayerNorm", shape.layer_norm_eps)


def _mean_pool_normalise(g: _GraphWriter, x: str, mask: str) -> str:
    import numpy as np

    g.const("eps_count", np.array(1e-9, dtype=np.float32))
    g.const("eps_norm", np.array(1e-12, dtype=np.float32))
    m = g.op("Unsqueeze", [mask, "i64_2"])  # (B, S, 1)
    summed = g.op("ReduceSum", [g.op("Mul", [x, m]), "i64_1"], keepdims=0)  # (B, H)
    count = g.op("Max", [g.op("ReduceSum", [m, "i64_1"], keepdims=0), "eps_count"])  # (B, 1)
    mean = g.op("Div", [summed, count])
    norm = g.op("Max", [g.op("ReduceL2", [mean, "i64_1"], keepdims=1), "eps_norm"])
    return g.op("Div", [mean, norm])


def build_bert_graph(weights: Weights, config: dict[str, Any], *, int8: frozenset[str] = frozenset()) -> bytes:
    """Serialised ONNX model (weights embedded) for the BERT encoder in ``weights``; the linears
    of the kinds in ``int8`` (see :data:`LINEAR_KINDS`) get int8 weights."""
    import numpy as np
    from onnx import TensorProto, checker, helper

    unknown = set(int8) - set(LINEAR_KINDS)
    if unknown:
        raise ValueError(f"unknown linear kinds {sorted(unknown)}; expected some of {LINEAR_KINDS}")
    shape = BertShape.from_config(config)
    g = _GraphWriter(frozenset(int8))
    g.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    g.const("one", np.array(1.0, dtype=np.float32))
    g.const("half", np.array(0.5, dtype=np.float32))
    g.const("neg_big", np.array(-10000.0, dtype=np.float32))
    if int8:
        g.const("i64_last", np.array([-1], dtype=np.int64))
        g.const("q_tiny", np.array(1e-12, dtype=np.float32))
        g.const("q_inv127", np.array(1.0 / 127.0, dtype=np.float32))
        g.const("q_zero_u8", np.array(128, dtype=np.uint8))
    x = _embeddings(g, weights, shape)
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)  # (B, S)
    # (1 - mask) * -10000, shaped (B, 1, 1, S) to broadcast over heads and query positions
    inverted = g.op("Sub", ["one", mask])
    mask_bias = g.op("Unsqueeze", [g.op("Mul", [inverted, "neg_big"]), "i64_1"])
    mask_bias = g.op("Unsqueeze", [mask_bias, "i64_1"])
    for layer in range(shape.layers):
        prefix = f"encoder.layer.{layer}"
        x = _attention(g, x, mask_bias, weights, prefix, shape)
        x = _feed_forward(g, x, weights, prefix, shape)
    pooled = _mean_pool_normalise(g, x, mask)
    g.nodes.append(helper.make_node("Identity", [pooled], ["sentence_embedding"]))
    graph = helper.make_graph(
        g.nodes,
        "bert_sentence_encoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", shape.hidden])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tiermem")
    model.ir_version = 9
    checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data
