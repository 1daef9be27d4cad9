"""``adcuda export``: the model of an ``adcuda train`` checkpoint, rebuilt from the task and settings the
checkpoint records, written as ONNX (``adcuda.onnx.export``) or as C99 (``adcuda.export.to_c``)."""

import dataclasses
import os

from .. import onnx
from ..export import to_c
from ..serialization import CheckpointError, load
from . import TASKS
from .checkpoint import CHECKPOINT_NAME, FORMAT, VERSION
from .errors import SettingsError

FORMATS = ("onnx", "c")
# the names the exported graph gives its input and output (ONNX's input_names/output_names)
INPUT_NAME = "input"
OUTPUT_NAME = "logits"
# how much of load_state_dict's list of differences an error quotes
DETAIL_CHARS = 160


class ExportSettingsError(SettingsError):
    """``adcuda export`` cannot run as asked (no checkpoint there, a missing package, a bad option)."""


@dataclasses.dataclass
class TrainedModel:
    model: object  # the task's model with the checkpoint's weights, in float32 and eval mode
    task_name: str
    task: object
    checkpoint: str
    epoch: int


def checkpoint_file(path):
    """The checkpoint file of ``path``: a run folder (``adcuda train --out``) or the file itself."""
    candidate = os.path.join(path, CHECKPOINT_NAME) if os.path.isdir(path) else path
    if not os.path.isfile(candidate):
        where = f"{path} holds no {CHECKPOINT_NAME}" if os.path.isdir(path) else f"there is no file {path}"
        raise ExportSettingsError(
            f"{where}; give the folder an 'adcuda train' run wrote (its --out) or its {CHECKPOINT_NAME}"
        )
    return candidate


def load_trained_model(path):
    """The model an ``adcuda train`` checkpoint holds (see ``TrainedModel``). A file that is not such a
    checkpoint raises ``CheckpointError``; one that is missing, ``ExportSettingsError``."""
    path = checkpoint_file(path)
    state = load(path, map_location="cpu")
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not an 'adcuda train' checkpoint")
    if state.get("version") != VERSION:
        raise CheckpointError(
            f"{path} has checkpoint version {state.get('version')}, this adcuda reads version {VERSION}"
        )
    config = state.get("config", {})
    task_name = config.get("task")
    if task_name not in TASKS:
        raise CheckpointError(f"{path} records the task {task_name!r}, which this adcuda does not know")
    task = TASKS[task_name](config.get("seed", 0))
    model = task.build_model()
    # an --amp run keeps float16 weights: the exported model computes in float32
    weights = {k: v.float() if v.dtype.is_floating_point else v for k, v in state["model"].items()}
    try:
        model.load_state_dict(weights)
    except (RuntimeError, KeyError, ValueError) as error:
        details = [line.strip() for line in str(error).splitlines()[1:] if line.strip()] or [str(error)]
        detail = details[0] if len(details[0]) <= DETAIL_CHARS else details[0][:DETAIL_CHARS] + "..."
        raise CheckpointError(
            f"{path}: its weights do not fit the '{task_name}' model this adcuda builds (a checkpoint of "
            f"another adcuda version?): {detail}"
        ) from None
    model.eval()
    return TrainedModel(model, task_name, task, path, state.get("epoch", 0))


def export_trained(trained, fmt, out, batch_size=1, name="model", weights="embedded", runner=False):
    """Write ``trained``'s model as ``fmt`` ("onnx" or "c") to ``out`` (a file for ONNX, a folder for C;
    ``name``, ``weights`` and ``runner`` as ``to_c``'s); returns the lines that say what was written."""
    example = trained.task.example_input(batch_size)
    if fmt == "onnx":
        try:
            onnx.export(
                trained.model,
                (example,),
                out,
                input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME],
                dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
            )
        except onnx.OnnxNotInstalledError as error:
            raise ExportSettingsError(f"--format onnx: {error}") from None
        shape = ("batch",) + tuple(example.shape[1:])
        return [
            f"wrote {out}: the {trained.task_name} model (epoch {trained.epoch}) as ONNX, input {INPUT_NAME!r} "
            f"{_shape(shape)}, output {OUTPUT_NAME!r}"
        ]
    export = to_c(trained.model, (example,), out, name=name, weights=weights, runner=runner)
    files = [export.source, export.header] + ([export.weights] if export.weights else [])
    files += [os.path.join(out, f"{name}_main.c")] if runner else []
    return [
        f"wrote {', '.join(files)}: the {trained.task_name} model (epoch {trained.epoch}) as C99",
        f"int {name}_forward(const float* in0, float* out0): in0 {_shape(export.input_shapes[0])}, "
        f"out0 {_shape(export.output_shapes[0])} (fixed shapes; --batch-size sets the batch)",
        f"static memory: {export.scratch_bytes:,} bytes of scratch + {export.weight_bytes:,} bytes of weights",
    ]


def default_out(checkpoint, fmt):
    """``<run folder>/model.onnx`` or ``<run folder>/c``, next to the checkpoint."""
    folder = os.path.dirname(os.path.abspath(checkpoint))
    return os.path.join(folder, "model.onnx" if fmt == "onnx" else "c")


def _shape(shape):
    return "(" + ", ".join(str(s) for s in shape) + ")"
