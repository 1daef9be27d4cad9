"""The error every failed or misused collective raises."""

from ..errors import AdcudaError


class DistributedError(AdcudaError, RuntimeError):
    """A process group that is missing, misused, or whose ranks stopped answering."""
