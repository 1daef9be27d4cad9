"""``torch.nn.modules.channelshuffle``'s path to adcuda's channel shuffling layers (defined in
``pixelshuffle.py``): programs import them from here, and checkpoints that pickled a whole module
name their classes by this path."""

from .pixelshuffle import ChannelShuffle

__all__ = ["ChannelShuffle"]
