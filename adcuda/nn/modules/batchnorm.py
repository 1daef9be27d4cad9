"""``torch.nn.modules.batchnorm``'s path to adcuda's batch normalization layers (defined in
``normalization.py``): programs import them from here, and checkpoints that pickled a whole module
name their classes by this path."""

from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
