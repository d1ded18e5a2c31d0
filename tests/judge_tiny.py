"""A tiny cross-encoder judge that the tests build themselves (no training, no download).

The graph has the shipped judge's interface (input_ids, attention_mask, token_type_ids -> logits [n, 4]) and a
behaviour a test can predict: each listed word adds its vector of four logits (supported, refuted, nei,
relevance) wherever it appears in the pair, averaged over the pair's tokens. A pair without listed words
scores 0 everywhere.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

from bosun.server.judge_model import tokenizer_path

VOCAB = 30522


def build(path: Path, boosts: dict[str, tuple[float, float, float, float]], outputs: int = 4) -> Path:
    """Write the graph to ``path/model.onnx`` (plus tokenizer.json and judge.json) and return the directory."""
    tok = Tokenizer.from_file(str(tokenizer_path()))
    table = np.zeros((VOCAB, 4), dtype=np.float32)
    for word, vec in boosts.items():
        for tid in tok.encode(word, add_special_tokens=False).ids:
            table[tid] = np.asarray(vec, dtype=np.float32)
    if outputs == 1:
        table = table[:, 3:4]
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["emb"]),  # [n, s, k]
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["maskf", "axis1"], ["count"], keepdims=1),
        helper.make_node("Div", ["summed", "count"], ["mean"]),
        helper.make_node("Mul", ["mean", "gain"], ["logits"]),
        helper.make_node("Cast", ["token_type_ids"], ["unused"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes, "tiny-judge",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
         for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", outputs])],
        [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([2], np.int64), "axis2"),
         numpy_helper.from_array(np.array([1], np.int64), "axis1"),
         numpy_helper.from_array(np.array(8.0, np.float32), "gain")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path / "model.onnx"))
    (path / "tokenizer.json").write_bytes(tokenizer_path().read_bytes())
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
