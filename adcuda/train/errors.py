"""Errors of ``adcuda train`` that the command line reports as a usage error (exit status 2): the
command cannot run as given, and a changed command line can fix it."""


class SettingsError(ValueError):
    """Settings that cannot run as given (a bad value, a distributed run outside a job, a ``--resume``
    that does not match its checkpoint)."""
