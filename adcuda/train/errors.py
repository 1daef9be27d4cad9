"""Errors of ``adcuda train`` that the command line reports as a usage error (exit status 2)."""


class SettingsError(ValueError):
    """Settings that cannot run as given (a bad value, or a distributed run outside a job)."""
