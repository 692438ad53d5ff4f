"""The ONNX constant reader against the ``onnx`` package's own encoding (built models, every storage form)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxserve.backends.vad.onnx_tensors import OnnxFormatError, graph_constants

onnx = pytest.importorskip("onnx")
helper, numpy_helper = onnx.helper, onnx.numpy_helper


def _constant(name: str, tensor: object) -> object:
    return helper.make_node("Constant", [], [name], value=tensor)


def _model(tmp_path: Path) -> Path:
    """A main graph with an initializer and a constant, and an ``If`` whose branches hold constants of their own."""
    branch_a = helper.make_graph(
        [_constant("a.weight", numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5))],
        "a", [], [helper.make_tensor_value_info("a.weight", onnx.TensorProto.FLOAT, [2, 3])])
    branch_b = helper.make_graph(
        [_constant("b.steps", helper.make_tensor("s", onnx.TensorProto.INT64, [3], [-9, 0, 2**40]))],
        "b", [], [helper.make_tensor_value_info("b.steps", onnx.TensorProto.INT64, [3])])
    nodes = [
        # float_data (not raw bytes), as some exporters write small tensors
        _constant("scale", helper.make_tensor("scale", onnx.TensorProto.FLOAT, [2], [0.5, -1.25])),
        helper.make_node("If", ["cond"], ["out"], then_branch=branch_a, else_branch=branch_b),
    ]
    graph = helper.make_graph(
        nodes, "main", [helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.full((1, 4), 7.0, np.float64), name="init")])
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph), str(path))
    return path


def test_every_graph_s_constants_are_read_as_onnx_writes_them(tmp_path: Path) -> None:
    main, *branches = graph_constants(_model(tmp_path))
    assert set(main) == {"init", "scale"}
    assert sorted(sorted(b) for b in branches) == [["a.weight"], ["b.steps"]]  # each branch on its own
    then_branch, else_branch = sorted(branches, key=lambda b: sorted(b))
    np.testing.assert_array_equal(main["init"], np.full((1, 4), 7.0))
    assert main["init"].dtype == np.float64
    np.testing.assert_array_equal(main["scale"], np.array([0.5, -1.25], np.float32))
    np.testing.assert_array_equal(then_branch["a.weight"], np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5)
    np.testing.assert_array_equal(else_branch["b.steps"], np.array([-9, 0, 2**40], np.int64))


def test_the_silero_file_reads_as_the_onnx_package_reads_it() -> None:
    from voxserve.backends.vad.silero_net import default_model_path

    path = default_model_path()
    ours = {name: value for graph in graph_constants(path) for name, value in graph.items()}
    theirs = {}
    pending = [onnx.load(str(path)).graph]
    while pending:
        graph = pending.pop()
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    pending.append(attribute.g)
                elif node.op_type == "Constant" and attribute.name == "value":
                    theirs[node.output[0]] = numpy_helper.to_array(attribute.t)
    assert set(ours) == set(theirs)
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)


@pytest.mark.parametrize("content", [b"", b"not a model at all", b"\x3a\xff\xff\xff\x0f\x01"])
def test_a_file_that_is_not_onnx_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(OnnxFormatError):
        graph_constants(path)


def test_a_truncated_model_is_refused(tmp_path: Path) -> None:
    path = _model(tmp_path)
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(OnnxFormatError):
        graph_constants(path)
