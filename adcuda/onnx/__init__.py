"""``adcuda.onnx.export``: a model's eval forward written as an ONNX model (PyTorch's
``torch.onnx.export``, classic form). The ``onnx`` package is needed (``pip install adcuda[onnx]``);
``onnxruntime`` runs what it writes. See docs/export.md."""

from .exporter import DEFAULT_OPSET, MIN_OPSET, OnnxNotInstalledError, export

__all__ = ["export", "OnnxNotInstalledError", "DEFAULT_OPSET", "MIN_OPSET"]
