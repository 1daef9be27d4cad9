"""Progress of an epoch: a bar on a terminal, one plain line every few seconds anywhere else.

A bar redraws itself with carriage returns, which a log file or a pipe (``adcuda train > log``,
a CI job, ``nohup``) keeps as one ever-growing line or drops; there a line such as
``epoch 2/10: step 40/100 (40%), loss 2.1234, 8.1 steps/s, about 7 s left`` is printed instead,
at most once per ``interval`` seconds, so a long epoch shows that it is alive and how far it got.
"""

import sys
import time

# seconds between two progress lines when the output is not a terminal
LINE_INTERVAL_S = 5.0


class LineProgress:
    """Iterates ``iterable`` like a tqdm bar (``set_postfix``, ``close``), writing a progress line
    to ``file`` whenever ``interval`` seconds have passed since the epoch began or since the last line.

    ``clock``: the time source (``time.monotonic``), replaceable in tests."""

    def __init__(self, iterable, total, description, file=None, interval=LINE_INTERVAL_S, clock=time.monotonic):
        self.iterable = iterable
        self.total = total
        self.description = description
        self.file = file if file is not None else sys.stderr
        self.interval = interval
        self.clock = clock
        self.postfix = {}
        self.done = 0

    def __iter__(self):
        started = last = self.clock()
        for item in self.iterable:
            yield item
            self.done += 1
            now = self.clock()
            if now - last >= self.interval and self.done < self.total:
                self._write(now - started)
                last = now

    def set_postfix(self, refresh=True, **values):
        self.postfix = values

    def close(self):
        pass

    def _write(self, elapsed):
        rate = self.done / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.description}: step {self.done}/{self.total} ({100 * self.done // self.total}%)"]
        parts += [f"{name} {value}" for name, value in self.postfix.items()]
        if rate > 0:
            parts.append(f"{rate:.1f} steps/s, about {_duration((self.total - self.done) / rate)} left")
        print(", ".join(parts), file=self.file, flush=True)


def _duration(seconds):
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def progress(iterable, total, description, quiet, file=None):
    """What ``adcuda train`` shows while an epoch runs: nothing when ``quiet``, a tqdm bar when ``file``
    (default stderr) is a terminal, else ``LineProgress``."""
    file = file if file is not None else sys.stderr
    if quiet:
        return _Silent(iterable)
    if file.isatty():
        from tqdm import tqdm

        return tqdm(iterable, total=total, desc=description, unit="step", leave=False, dynamic_ncols=True, file=file)
    return LineProgress(iterable, total, description, file=file)


class _Silent:
    def __init__(self, iterable):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)

    def set_postfix(self, refresh=True, **values):
        pass

    def close(self):
        pass
