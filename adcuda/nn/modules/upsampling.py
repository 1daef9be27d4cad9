"""``torch.nn.modules.upsampling``'s path to adcuda's upsampling layers (defined in ``pooling.py``):
programs import them from here, and checkpoints that pickled a whole module name their classes by
this path."""

from .pooling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
