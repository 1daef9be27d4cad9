"""Exporting a model's eval forward: ``trace.py`` freezes it as a graph of backend primitives, which
the exporters read (``adcuda.onnx.export`` writes ONNX, ``to_c`` writes dependency-free C99)."""

from .to_c import CExport, to_c
from .trace import Constant, Dim, ExportError, Graph, Node, Ref, ValueInfo, trace_forward

__all__ = ["trace_forward", "Graph", "Node", "Constant", "ValueInfo", "Ref", "Dim", "ExportError", "to_c", "CExport"]
