"""A background poller: something read every ``interval`` seconds in a thread while a
``with`` block runs (pods' readiness, their request counters)."""

from __future__ import annotations

import threading
from typing import Self


class Poller:
    """Calls ``poll_once`` every ``interval`` seconds between ``__enter__`` and
    ``__exit__``; a subclass holds what it reads."""

    interval = 0.5

    def __enter__(self) -> Self:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.interval)

    def poll_once(self) -> None:
        raise NotImplementedError
