"""``torch.nn.modules.instancenorm``'s path to adcuda's instance normalization layers (defined in
``normalization.py``): programs import them from here, and checkpoints that pickled a whole module
name their classes by this path."""

from .normalization import InstanceNorm1d, InstanceNorm2d

__all__ = ["InstanceNorm1d", "InstanceNorm2d"]
