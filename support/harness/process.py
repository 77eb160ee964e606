"""Child processes of the control-plane harness that never outlive it.

Each child runs in its own process group (so gunicorn's workers go with their master)
and is tracked in a module-level registry. ``ManagedProcess.stop()``, an ``atexit``
hook, SIGTERM/SIGHUP handlers and the kernel's parent-death signal all end it: a
failed test, Ctrl-C or even a SIGKILL of the harness leaves nothing behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from testkit.net import free_port as free_port  # the one helper; harness modules import it here


class ProcessError(RuntimeError):
    """The control plane, or one of its processes, failed to start or run."""


_LIVE: set[ManagedProcess] = set()
_LIVE_LOCK = threading.Lock()
_PR_SET_PDEATHSIG = 1
# Loaded once here, not in the child: dlopen between fork and exec can deadlock when
# another thread of the harness held the loader's lock at fork time.
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:
    _LIBC = None


def _die_with_parent(sig: int) -> Callable[[], None] | None:
    """A pre-exec hook: if the harness dies (even by SIGKILL), the kernel sends the
    child ``sig``, the last line of defence against strays (Linux only)."""
    libc = _LIBC
    if libc is None:
        return None

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, sig)

    return hook


def host_address() -> str:
    """The host's IPv4 address on its default route: for what must not be loopback (an
    EndpointSlice refuses 127.0.0.0/8). A UDP connect only picks the source address; no
    packet is sent. Raises OSError on a host without a route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed further than the choice
        return str(s.getsockname()[0])


class ManagedProcess:
    """A child process in its own process group, with its output in a log file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        url: str = "",
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        ready_check: Callable[[], bool] | None = None,
        stop_timeout: float = 10.0,
        death_signal: int = signal.SIGTERM,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.url = url
        self._env = env
        self._cwd = cwd
        self._death_signal = death_signal
        self._ready_check = ready_check
        self._stop_timeout = stop_timeout
        self._stopped = False
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self._log.write(f"--- {name}: {' '.join(self.argv)}\n".encode())
        self._log.flush()
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent(death_signal),
        )
        with _LIVE_LOCK:
            _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the whole process group (e.g. gunicorn and its workers)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM the group, wait, then SIGKILL whatever is left of it.

        Idempotent: once stopped, the group id may be reused by an unrelated process,
        so it is never signalled again.
        """
        if self._stopped:
            return
        self._stopped = True
        timeout = self._stop_timeout if timeout is None else timeout
        if self.alive():
            self.kill(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        # The leader may be gone while its children (gunicorn workers) linger.
        self.kill(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(5)
        with _LIVE_LOCK:
            _LIVE.discard(self)
        with contextlib.suppress(Exception):
            self._log.close()

    def respawn(self) -> ManagedProcess:
        """Stop this process (SIGKILL to its group) and start it again the same way:
        same command line, environment and log (appended to). For fault tests that
        restart one server of a plane under the clients that use it."""
        self.kill(signal.SIGKILL)
        self.stop()
        return ManagedProcess(
            self.name, self.argv, log_path=self.log_path, url=self.url, env=self._env,
            cwd=self._cwd, ready_check=self._ready_check, stop_timeout=self._stop_timeout,
            death_signal=self._death_signal,
        )

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll the readiness check until it passes; fail early if the process exits."""
        check = self._ready_check or (lambda: http_ok(self.url + "/readyz"))
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise ProcessError(
                    f"{self.name} exited with code {self.popen.returncode}; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if check():
                return
            if time.monotonic() > deadline:
                raise ProcessError(
                    f"{self.name} not ready after {timeout:.0f}s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.1)


def stop_all() -> None:
    """Stop every process the harness started, newest first (clients before servers)."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in sorted(procs, key=lambda p: p.pid, reverse=True):
        with contextlib.suppress(Exception):
            proc.stop(timeout=5)


atexit.register(stop_all)


_SIGNALLED = threading.Event()


def install_signal_handlers() -> None:
    """Treat SIGTERM/SIGHUP like Ctrl-C so finally-blocks, fixtures and atexit run.

    SIGINT already raises KeyboardInterrupt, which pytest and support/harness/dev.py handle.
    """
    if threading.current_thread() is not threading.main_thread():
        return

    def _exit(signum: int, _frame: Any) -> None:
        # A second signal (e.g. a supervisor repeating SIGTERM) must not interrupt
        # the teardown the first one started.
        if _SIGNALLED.is_set():
            return
        _SIGNALLED.set()
        stop_all()
        # KeyboardInterrupt, not SystemExit: pytest ends the session on it (a
        # SystemExit inside a test only fails that test and the run goes on).
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _exit)


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False


def log_offset(log_path: Path) -> int:
    """Where the next run of a process starts writing its log (logs are appended to
    across restarts, so readiness must look only past this point)."""
    return log_path.stat().st_size if log_path.exists() else 0


def logged(log_path: Path, offset: int, pattern: re.Pattern[bytes]) -> Callable[[], bool]:
    """A readiness check: true once the log, from ``offset``, has a line matching
    ``pattern`` (for controllers whose only sign of acting is a log line)."""

    def check() -> bool:
        try:
            with open(log_path, "rb") as log:
                log.seek(offset)
                return any(pattern.search(line) for line in log)
        except OSError:
            return False

    return check


def logged_all(log_path: Path, offset: int,
               patterns: Sequence[re.Pattern[bytes]]) -> Callable[[], bool]:
    """A readiness check: true once the log, from ``offset``, has a line matching each
    of ``patterns`` (for a process whose controllers start in parallel and each log
    their own line)."""

    def check() -> bool:
        try:
            with open(log_path, "rb") as log:
                log.seek(offset)
                missing = list(patterns)
                for line in log:
                    if not missing:
                        break
                    missing = [p for p in missing if not p.search(line)]
                return not missing
        except OSError:
            return False

    return check
