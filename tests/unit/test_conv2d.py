"""1-D convolutional ONNX graphs rewritten as 2-D ones: the same outputs, or a refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from voxserve.backends.tts.conv2d import as_2d, rewrite_file  # noqa: E402

RNG = np.random.default_rng(3)


def weight(name: str, *shape: int) -> Any:
    """The same weights for the same name on every call (graphs built twice are the same graph)."""
    rng = np.random.default_rng(sum(map(ord, name)))
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def decoder_like(add_constant: np.ndarray | None = None, conv_weight_in_graph: bool = True) -> Any:
    """A small HiFi-GAN-shaped graph: conv, leaky ReLU, a strided transposed conv, a dilated conv with a
    residual add, a division by a scalar, tanh, and a final Unsqueeze (as Piper's decoder ends)."""
    inits = [weight("w0", 6, 4, 7), weight("b0", 6), weight("wt", 6, 3, 16), weight("bt", 3),
             weight("w1", 3, 3, 3), weight("w2", 1, 3, 7),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[7], pads=[3, 3]),
             helper.make_node("LeakyRelu", ["c0"], ["r0"], alpha=0.1),
             helper.make_node("ConvTranspose", ["r0", "wt", "bt"], ["up"], kernel_shape=[16], strides=[8],
                              pads=[4, 4]),
             helper.make_node("Conv", ["up", "w1"], ["c1"], kernel_shape=[3], pads=[2, 2], dilations=[2]),
             helper.make_node("Add", ["c1", "up"], ["s1"]),
             helper.make_node("Div", ["s1", "two"], ["d1"]),
             helper.make_node("Conv", ["d1", "w2"], ["c2"], kernel_shape=[7], pads=[3, 3]),
             helper.make_node("Tanh", ["c2"], ["t"]),
             helper.make_node("Unsqueeze", ["t", "axis1"], ["y"])]
    if add_constant is not None:
        inits.append(numpy_helper.from_array(add_constant.astype(np.float32), "k"))
        nodes.insert(5, helper.make_node("Add", ["s1", "k"], ["s1k"]))
        nodes[6].input[0] = "s1k"
    if not conv_weight_in_graph:
        inits = [i for i in inits if i.name != "w2"]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4, "t"])]
    if not conv_weight_in_graph:
        inputs.append(helper.make_tensor_value_info("w2", TensorProto.FLOAT, [1, 3, 7]))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


def run(model: Any, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


@pytest.mark.parametrize("frames", [1, 5, 37])
def test_the_rewrite_computes_the_same_outputs_with_2d_convolutions(frames: int) -> None:
    model = decoder_like()
    rewritten = as_2d(model)
    assert rewritten is not None
    kernels = {i.name: len(i.dims) for i in rewritten.graph.initializer}
    convs = [n for n in rewritten.graph.node if n.op_type in ("Conv", "ConvTranspose")]
    assert len(convs) == 4 and all(kernels[n.input[1]] == 4 for n in convs)
    assert [len(i.dims) for i in model.graph.initializer if i.name == "w0"] == [3]  # the input is not changed
    x = RNG.standard_normal((2, 4, frames)).astype(np.float32)
    expected, got = run(model, x), run(rewritten, x)
    assert got.shape == expected.shape == (2, 1, 1, frames * 8)
    assert float(np.max(np.abs(got - expected))) < 1e-5


def test_a_constant_that_would_broadcast_otherwise_or_weights_from_outside_are_refused() -> None:
    assert as_2d(decoder_like(add_constant=RNG.standard_normal((3, 1)))) is None
    assert as_2d(decoder_like(add_constant=np.array([0.5]))) is not None  # a scalar broadcasts alike
    assert as_2d(decoder_like(conv_weight_in_graph=False)) is None


def test_rewrite_file_keeps_an_exact_rewrite_and_leaves_a_refused_graph_alone(tmp_path: Path) -> None:
    good, refused = tmp_path / "good.onnx", tmp_path / "refused.onnx"
    onnx.save(decoder_like(), str(good))
    onnx.save(decoder_like(add_constant=np.ones((3, 1))), str(refused))
    before = refused.read_bytes()
    assert rewrite_file(good) is True
    assert rewrite_file(refused) is False
    assert refused.read_bytes() == before
    x = RNG.standard_normal((1, 4, 9)).astype(np.float32)
    assert float(np.max(np.abs(run(onnx.load(str(good)), x) - run(decoder_like(), x)))) < 1e-5
