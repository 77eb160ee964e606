"""One node per machine: a node holds an exclusive lock while it lives.

The lock is a ``flock`` on a file next to the state directory, so the kernel releases it
when the holder dies however it dies; the file names the holder's PID for the message
a second start gets.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO


class NodeBusy(RuntimeError):
    """Another live process holds the node."""


class NodeLock:
    """``acquire()`` or fail at once naming the holder; ``release()`` when done."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise NodeBusy(f"a node is already running (PID {holder}); stop it first "
                           f"(lock {self.path})") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.truncate(0)
            self._file.close()
            self._file = None

    @property
    def held(self) -> bool:
        return self._file is not None
