"""The one Python module that imports the native extension ``adcuda._C``.

A pure-source checkout (no compiled module) still works on the CPU: ``_C`` is then ``None`` and
``IMPORT_ERROR`` says why, so that ``adcuda.info()`` and the CUDA helpers can explain instead of failing.
"""

import importlib

try:
    # import_module rather than ``from adcuda import _C``: during adcuda's own import the latter
    # reports a missing module as a "circular import", which misleads
    _C = importlib.import_module("adcuda._C")
except ImportError as exc:
    _C = None
    IMPORT_ERROR = str(exc)
else:
    IMPORT_ERROR = None


def native_module_loaded():
    return _C is not None


def build_info():
    """How the native module was built, plus ``native_module_loaded`` (and ``native_import_error``)."""
    if _C is None:
        return {
            "native_module_loaded": False,
            "native_import_error": IMPORT_ERROR,
            "cuda_compiled": False,
            "cuda_version": None,
            "cuda_architectures": [],
            "compiler": None,
            "build_type": None,
        }
    return {"native_module_loaded": True, "native_import_error": None, **_C.build_info()}
