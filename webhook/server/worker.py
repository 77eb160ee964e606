"""The webhook's gunicorn worker: an event loop that does the TLS handshake and reads
each request whole, and threads that answer complete requests.

Why: the validating webhook fails closed, so a client that can tie up the webhook's
threads blocks every Stage and RolloutManager write in the cluster. A connection costs a
thread here only from the moment its whole request is in memory until the answer is
written; everything before that happens in the loop, without blocking, under these
rules (docs/components.md "Hostile and broken clients"):

- **One deadline per request** (``request_timeout``): a new connection's TLS handshake,
  headers and body, or a kept-alive connection's next request from its first byte,
  must arrive within it; past it the client gets a 408 and the connection is closed.
  What already waits in the socket is read first, so a loop that was busy elsewhere
  never counts as the client's delay.
- **A cap on connections held by the loop** (``max_connections`` per worker): a new
  connection past the cap closes the one that has waited longest, lingering closes
  first, then idle keep-alive connections (the least recently used first), then
  unfinished requests, so a flood of idle connections cannot lock new clients out.
- **Framing is checked before a thread sees the request** (:mod:`webhook.server.framing`): a
  malformed chunked body is a 400, a body over the limit a 413, each sent with
  ``Connection: close``; then the rest of the body the client is still sending is read
  and dropped (a declared length exactly, else until the client closes) before the
  close, for ``linger_max_seconds`` and ``max_drain_bytes`` at most. Closing while the
  client still sends makes the kernel reset the connection, and a client that sends
  its whole body before reading never reads its answer: any rule that cut the drain
  sooner (a fixed 5 s, then a pause of 5 s) cut clients of a loaded machine, which
  saw a TLS EOF instead of the 413. Only the connection cap closes a lingering
  connection sooner.
- **Bytes held by the loop are budgeted** (``buffer_budget`` per worker): when the
  requests being received would together exceed it, the one holding the most is
  refused with a 503, so a few huge uploads cannot starve small reviews.
- **No connection has the loop to itself**: each turn reads at most ``SLICE_BYTES``
  from a connection before the others get theirs, so one fast sender delays the rest
  by a slice, not by its whole body.

A complete request is answered by the loop itself (:mod:`webhook.server.http11`, the
app's ``respond``) when it is small (``INLINE_BYTES``) and its answer needs no look-up
that only the API server can answer: most admission requests, whose templates are in
the look-up cache. The hand-off to a thread and back costs more than such an answer's
own work. Otherwise a thread answers it, waiting as long as the look-up budget allows,
writes the answer and hands the connection back to the loop.

gunicorn runs the processes (the number of workers, restarts, signals, the graceful
stop); this worker uses only what gunicorn gives any worker class
(``gunicorn.workers.base.Worker``: ``init_process``, ``run``, ``notify``, ``alive``,
``cfg``, ``log``, ``sockets``, ``wsgi``, ``ppid``, ``PIPE``), named in
:data:`WORKER_INTERFACE` and checked against the installed gunicorn by
tests/unit/webhook/test_worker_interface.py.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import queue
import selectors
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, cast

from gunicorn.workers.base import Worker

from webhook.config import MAX_BODY_BYTES
from webhook.server.framing import Complete, Framer, Refuse
from webhook.server.http11 import App, exchange, refusal_bytes
from webhook.server.tls import ReloadingContext

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE
RECV_BYTES = 64 * 1024  # TLS gives at most a record (16 KiB) a call anyway
SLICE_BYTES = 1024 * 1024  # read from one connection per turn of the loop
# A request at most this large is answered by the loop itself when it needs no look-up
# the cache cannot answer; its decision takes a few milliseconds at most (the fuzz's
# slowest small review: 77 ms), so the other connections wait little behind it.
INLINE_BYTES = 64 * 1024
SWEEP_SECONDS = 0.25  # how often deadlines are checked
REPORT_SECONDS = 60.0  # how often a summary of connections the worker cut is logged
# A thread writes the answer with this timeout, so a client that stops reading cannot
# keep it. (Reading never blocks a thread: the loop reads.)
IO_TIMEOUT_SECONDS = 5.0
# After an answer that closes the connection: how long and how much of what the client
# still sends is read while it reads the answer and closes its end.
CLOSE_LINGER_SECONDS = 2.0
CLOSE_DRAIN_BYTES = 64 * 1024

# What this worker uses of gunicorn's worker class (see the module docstring).
WORKER_INTERFACE = ("init_process", "run", "notify", "alive", "cfg", "log", "sockets",
                    "wsgi", "ppid", "PIPE")


@dataclass(frozen=True, slots=True)
class Limits:
    """The connection rules of one worker process (see the module docstring)."""

    max_connections: int = 1000
    request_timeout: float = 10.0
    max_body_bytes: int = MAX_BODY_BYTES
    buffer_budget: int = 32 * 1024 * 1024
    # Draining what a refused client still sends: the longest drain, and the most bytes.
    linger_max_seconds: float = 60.0
    max_drain_bytes: int = 64 * 1024 * 1024
    # After SIGTERM: how long a kept-alive connection stays open for the client's next
    # request, which is answered with "Connection: close".
    stop_linger_seconds: float = 8.0


# Where a connection is. "new": just accepted; "busy": a thread has it; "closed": gone.
NEW, HANDSHAKE, READING, IDLE, LINGER, BUSY, CLOSED = (
    "new", "handshake", "reading", "idle", "linger", "busy", "closed")
_GROUP = {HANDSHAKE: READING, READING: READING, IDLE: IDLE, LINGER: LINGER}
_EVICTION_ORDER = (LINGER, IDLE, READING)


class Conn:
    """One client connection and the loop's state for it."""

    __slots__ = ("buf", "continued", "deadline", "drain_left", "drain_plain", "events",
                 "framer", "peer", "phase", "sock")

    def __init__(self, sock: socket.socket, peer: Any) -> None:
        self.sock = sock
        self.peer = peer
        self.phase = NEW
        self.deadline = 0.0
        self.events = 0  # what the poller watches for; 0 = not registered
        self.buf = bytearray()
        self.framer: Framer | None = None
        self.continued = False  # "100 Continue" sent for the current request
        self.drain_left = 0
        self.drain_plain = False  # drain decrypted body bytes (True) or raw bytes


class ServedApp(App, Protocol):
    """What the worker serves (``webhook.server.app.App``): an app :func:`exchange` can
    ask, told when the answers it gave are written, for the work that need not hold
    them up (their metrics)."""

    def after_answers(self) -> None: ...


def _record_certificate(certfile: str) -> None:
    # Imported here: prometheus-client must not be imported before python -m webhook
    # has set PROMETHEUS_MULTIPROC_DIR, and python -m webhook imports this module first.
    from webhook import metrics

    metrics.record_certificate(certfile)


class WebhookWorker(Worker):
    """See the module docstring."""

    limits = Limits()

    @classmethod
    def with_limits(cls, limits: Limits) -> type[WebhookWorker]:
        """This worker class with other limits (gunicorn takes a class, not an instance)."""
        return type(cls.__name__, (cls,), {"limits": limits})

    def init_process(self) -> None:
        """After the fork: the loop's state; gunicorn's part then loads the app and
        calls :meth:`run`."""
        self.poller = selectors.DefaultSelector()
        # Connections the loop holds, per eviction group, oldest first (dicts keep order).
        self._held: dict[str, dict[Conn, None]] = {LINGER: {}, IDLE: {}, READING: {}}
        self._ready: dict[Conn, None] = {}  # more to read than one turn's slice
        self._busy = 0
        self._buffered = 0
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._returned: queue.SimpleQueue[tuple[Conn, bool | None]] = queue.SimpleQueue()
        self._tls = (ReloadingContext(certfile=self.cfg.certfile, keyfile=self.cfg.keyfile,
                                      on_load=_record_certificate)
                     if self.cfg.is_ssl else None)
        self._next_sweep = 0.0
        self._next_report = time.monotonic() + REPORT_SECONDS
        self._cut: Counter[str] = Counter()
        super().init_process()

    # ------------------------------------------------------------ the loop

    def run(self) -> None:
        # What gunicorn loaded (its "WSGI app"): webhook.server.app.App, not a WSGI callable.
        self._app: ServedApp = cast(ServedApp, self.wsgi)
        # What was loaded so far (the app, its compiled schemas: some 30,000 objects) is
        # never garbage: the cyclic collector's full passes skip it from now on (4.4 ms
        # each, that an admission request would wait behind, otherwise).
        gc.freeze()
        if self._tls is not None:
            # Loaded now, not at the first connection: the certificate's notAfter is on
            # /metrics from the start, and a pair that cannot serve fails the worker.
            self._tls.get()
        for listener in self.sockets:
            listener.setblocking(False)
            self.poller.register(listener, READ, self._accept)
        # gunicorn's wake-up pipe (signals write to it): the threads write to it too.
        self.poller.register(self.PIPE[0], READ, self._take_back)
        threads = [threading.Thread(target=self._answer_requests, name=f"answer-{i}",
                                    daemon=True) for i in range(self.cfg.threads)]
        for thread in threads:
            thread.start()
        try:
            while self.alive and self.ppid == os.getppid():
                self.notify()
                self._turn()
            self._stop()
        finally:
            for _ in threads:
                self._work.put(None)
            self._close_all()
            self._app.after_answers()

    def _turn(self) -> None:
        ready, self._ready = self._ready, {}
        for key, _ in self.poller.select(0 if ready else SWEEP_SECONDS):
            if isinstance(key.data, Conn):
                self._on_event(key.data)
            else:
                key.data(key.fileobj)  # a listener, or the wake-up pipe
        for conn in ready:
            self._on_event(conn)
        # The answers of this turn are written, a thread's included (it hands the
        # connection back through this loop): what the app records about them (its
        # metrics) is done now, not before they were sent.
        self._app.after_answers()
        self._sweep()

    def _stop(self) -> None:
        """After SIGTERM: accept nothing more; answer what arrives on kept-alive
        connections (with ``Connection: close``) for ``stop_linger_seconds``, and what
        threads are answering, within gunicorn's graceful timeout."""
        for listener in self.sockets:
            with contextlib.suppress(KeyError, ValueError):
                self.poller.unregister(listener)
        until = time.monotonic() + self.limits.stop_linger_seconds
        for conn in self._held[IDLE]:
            conn.deadline = min(conn.deadline, until)
        give_up = time.monotonic() + self.cfg.graceful_timeout
        while (self._busy or self._held_count()) and time.monotonic() < give_up:
            self.notify()
            self._turn()

    def _close_all(self) -> None:
        for group in _EVICTION_ORDER:
            for conn in list(self._held[group]):
                self._close(conn)
        self.poller.close()

    # ------------------------------------------------------------ bookkeeping

    def _held_count(self) -> int:
        return sum(len(group) for group in self._held.values())

    def _hold(self, conn: Conn, phase: str, deadline: float) -> None:
        old = _GROUP.get(conn.phase)
        new = _GROUP[phase]
        if old is not None and old != new:
            self._held[old].pop(conn, None)
        if old != new or phase == IDLE:
            self._held[new].pop(conn, None)  # re-insert: becomes the newest of its group
            self._held[new][conn] = None
        conn.phase = phase
        conn.deadline = deadline

    def _watch(self, conn: Conn, events: int) -> None:
        if conn.events == events:
            return
        if conn.events:
            self.poller.modify(conn.sock, events, conn)
        else:
            self.poller.register(conn.sock, events, conn)
        conn.events = events

    def _unwatch(self, conn: Conn) -> None:
        """Take ``conn`` out of the poller and the groups (a thread has it, or it goes)."""
        group = _GROUP.get(conn.phase)
        if group is not None:
            self._held[group].pop(conn, None)
        self._ready.pop(conn, None)
        if conn.events:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(conn.sock)
            conn.events = 0

    def _release(self, conn: Conn) -> None:
        """Take ``conn`` out of the loop (poller, groups, buffer budget)."""
        self._unwatch(conn)
        self._buffered -= len(conn.buf)
        conn.buf = bytearray()

    def _close(self, conn: Conn, cut: str | None = None) -> None:
        if conn.phase == CLOSED:
            return
        if cut:
            self._cut[cut] += 1
            self.log.debug("closed a connection: %s", cut, extra={"peer": str(conn.peer)})
        self._release(conn)
        conn.phase = CLOSED
        with contextlib.suppress(OSError):
            conn.sock.close()

    def _evict_one(self) -> bool:
        for group in _EVICTION_ORDER:
            held = self._held[group]
            if held:
                self._close(next(iter(held)), f"evicted_{group}")
                return True
        return False

    def _sweep(self) -> None:
        """Close what is past its deadline, at most every :data:`SWEEP_SECONDS`, and
        log the connections cut once a minute."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_SECONDS
        for group in _EVICTION_ORDER:
            for conn in [c for c in self._held[group] if c.deadline <= now]:
                self._expire(conn)
        if now >= self._next_report:
            self._next_report = now + REPORT_SECONDS
            if self._cut:
                summary = ", ".join(f"{k}={v}" for k, v in sorted(self._cut.items()))
                self.log.info("connections cut in the last %.0f s: %s", REPORT_SECONDS,
                              summary, extra={"cut": dict(self._cut)})
                self._cut.clear()

    # ------------------------------------------------------------ connections

    def _accept(self, listener: Any) -> None:
        if not self.alive:
            return
        try:
            sock, peer = listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                # Out of descriptors or memory: make room for the next client.
                self._evict_one()
                return
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        sock.setblocking(False)
        conn = Conn(sock, peer)
        if self._tls is not None:
            try:
                conn.sock = self._tls.get().wrap_socket(sock, server_side=True,
                                                        do_handshake_on_connect=False)
            except (OSError, ValueError) as exc:
                self.log.warning("cannot set up TLS for a connection: %s", exc)
                sock.close()
                return
        self._hold(conn, HANDSHAKE if self._tls is not None else READING,
                   time.monotonic() + self.limits.request_timeout)
        self._watch(conn, READ)
        while self._held_count() > self.limits.max_connections and self._evict_one():
            pass

    def _on_event(self, conn: Conn) -> None:
        try:
            if conn.phase == HANDSHAKE:
                self._handshake(conn)
            elif conn.phase in (READING, IDLE):
                self._receive(conn)
            elif conn.phase == LINGER:
                self._drain(conn)
            # BUSY or CLOSED: an event from before the connection changed hands.
        except Exception as exc:  # a bug here must not take the worker down
            self.log.warning("closing a connection after an error: %s: %s",
                             type(exc).__name__, exc)
            self._close(conn)

    def _handshake(self, conn: Conn) -> None:
        try:
            cast(ssl.SSLSocket, conn.sock).do_handshake()  # only TLS connections start here
        except ssl.SSLWantReadError:
            self._watch(conn, READ)
            return
        except ssl.SSLWantWriteError:
            self._watch(conn, WRITE)
            return
        except OSError:  # SSLError included: a scanner, a wrong protocol, a reset
            self._close(conn, "tls_failed")
            return
        conn.phase = READING
        self._watch(conn, READ)
        self._receive(conn)  # the request may have come with the handshake's last flight

    def _receive(self, conn: Conn, budget: float = SLICE_BYTES) -> None:
        """Read what the client sent, up to ``budget`` bytes this turn (first what it
        sent after its last request, already in hand)."""
        if conn.buf and conn.framer is None and not self._take(conn, b""):
            return
        while conn.phase in (READING, IDLE):
            if budget <= 0:
                self._ready[conn] = None
                return
            try:
                data = conn.sock.recv(RECV_BYTES)
            except (ssl.SSLWantReadError, BlockingIOError):
                self._watch(conn, READ)
                return
            except ssl.SSLWantWriteError:
                self._watch(conn, WRITE)
                return
            except OSError:
                self._close(conn, "reset" if conn.phase == READING else None)
                return
            if not data:
                # Under TLS nothing can be answered after the client's EOF.
                self._close(conn, "closed_mid_request" if conn.phase == READING else None)
                return
            budget -= len(data)
            if not self._take(conn, data):
                return

    def _take(self, conn: Conn, data: bytes) -> bool:
        """Add received bytes; dispatch or refuse the request when that is decided.
        Returns whether the loop should keep reading this connection."""
        if conn.framer is None:  # the first bytes of a request
            if conn.phase == IDLE:
                self._hold(conn, READING, time.monotonic() + self.limits.request_timeout)
            conn.framer = Framer(max_body_bytes=self.limits.max_body_bytes)
        if data:
            if not self._reserve(conn, len(data)):
                return False
            conn.buf += data
        progress = conn.framer.feed(conn.buf)
        if isinstance(progress, Complete):
            self._dispatch(conn, progress.end)
            return False
        if isinstance(progress, Refuse):
            self._refuse(conn, progress)
            return False
        if conn.framer.expect_continue and conn.framer.headers_done and not conn.continued:
            conn.continued = True
            self._send_quietly(conn, b"HTTP/1.1 100 Continue\r\n\r\n")
        return True

    def _reserve(self, conn: Conn, size: int) -> bool:
        """Room in the buffer budget for ``size`` more bytes of ``conn``; the request
        holding the most is refused until there is (``conn`` itself, if it is that one)."""
        while self._buffered + size > self.limits.buffer_budget:
            victim = max(self._held[READING], key=lambda c: len(c.buf), default=conn)
            if len(conn.buf) + size >= len(victim.buf):
                victim = conn
            self._refuse(victim, Refuse(503, "the webhook is receiving too many large "
                                             "requests at once; retry"), cut="over_budget")
            if victim is conn:
                return False
        self._buffered += size
        return True

    def _dispatch(self, conn: Conn, end: int) -> None:
        """The request is ``conn.buf[:end]``: answered here when that cannot wait, else
        by a thread. What follows it (a client that sends its next request early) stays
        for when the answer is written."""
        framer = conn.framer
        assert framer is not None  # set by _take before any request completes
        data = bytes(conn.buf[:end])
        del conn.buf[:end]
        self._buffered -= end
        conn.framer = None
        conn.continued = False
        if end <= INLINE_BYTES and self._answer_here(conn, data, framer):
            return
        self._to_thread(conn, partial(self._answer, conn, data, framer))

    def _answer_here(self, conn: Conn, data: bytes, framer: Framer) -> bool:
        """Answer in the loop, sparing the hand-off to a thread and back: whether that
        was possible (no look-up the cache cannot answer). An answer the socket cannot
        take at once is written by a thread."""
        exchanged = exchange(self._app, data, body_start=framer.body_start,
                             chunked=framer.chunked, stopping=not self.alive, may_wait=False)
        if exchanged is None:
            return False
        reply, keep = exchanged
        try:
            sent = conn.sock.send(reply)
        except (ssl.SSLWantWriteError, BlockingIOError):
            sent = 0  # TLS takes the same bytes again: nothing left half-written
        except OSError:
            self._close(conn)
            return True
        if sent < len(reply):
            self._to_thread(conn, partial(self._write, conn, reply[sent:], keep))
        else:
            self._after_answer(conn, keep)
        return True

    def _to_thread(self, conn: Conn, work: Callable[[], None]) -> None:
        self._unwatch(conn)
        conn.phase = BUSY
        self._busy += 1
        self._work.put(work)

    def _answer_requests(self) -> None:
        """A thread: do what the loop hands over, until told to stop."""
        while (work := self._work.get()) is not None:
            work()

    def _answer(self, conn: Conn, data: bytes, framer: Framer) -> None:
        """(A thread.) Answer a request, waiting for its look-ups if need be."""
        try:
            exchanged = exchange(self._app, data, body_start=framer.body_start,
                                 chunked=framer.chunked, stopping=not self.alive)
        except Exception:  # a bug must not lose the connection or the thread
            self.log.exception("error answering a request")
            exchanged = None
        if exchanged is None:
            self._give_back(conn, None)
            return
        self._write(conn, *exchanged)

    def _write(self, conn: Conn, reply: bytes, keep: bool) -> None:
        """(A thread.) Write an answer, waiting at most IO_TIMEOUT_SECONDS on the client."""
        try:
            conn.sock.settimeout(IO_TIMEOUT_SECONDS)
            conn.sock.sendall(reply)
        except OSError as exc:  # the client went away, or stopped reading
            self.log.debug("could not write an answer: %s", exc, extra={"peer": str(conn.peer)})
            self._give_back(conn, None)
            return
        self._give_back(conn, keep)

    def _give_back(self, conn: Conn, keep: bool | None) -> None:
        """(A thread.) The connection back to the loop (``keep`` None: close it)."""
        self._returned.put((conn, keep))
        with contextlib.suppress(BlockingIOError):  # full: the loop is awake anyway
            os.write(self.PIPE[1], b"\0")

    def _take_back(self, fileobj: Any) -> None:
        """Connections whose answer a thread has written (the loop's thread; also woken
        by a signal)."""
        with contextlib.suppress(BlockingIOError):
            os.read(fileobj, 4096)
        while True:
            try:
                conn, keep = self._returned.get_nowait()
            except queue.Empty:
                return
            self._busy -= 1
            try:
                if keep is not None:
                    conn.sock.setblocking(False)  # the thread wrote with a timeout
                self._after_answer(conn, keep)
            except Exception as exc:  # a bug here must not take the worker down
                self.log.warning("closing a connection after an error: %s: %s",
                                 type(exc).__name__, exc)
                self._close(conn)

    def _after_answer(self, conn: Conn, keep: bool | None) -> None:
        if keep is None:
            self._close(conn)
            return
        if not keep:
            self._linger(conn, plain_left=None, seconds=CLOSE_LINGER_SECONDS,
                         cap=CLOSE_DRAIN_BYTES)
            return
        expiry = time.monotonic() + self.cfg.keepalive
        if not self.alive:
            expiry = min(expiry, time.monotonic() + self.limits.stop_linger_seconds)
        self._hold(conn, IDLE, expiry)
        self._watch(conn, READ)
        # Bytes of a next request may already be here: kept from the last read, or
        # decrypted and buffered by TLS (the poller sees neither). The next turn reads
        # them (one request a turn, however many a client sends at once).
        if conn.buf or (isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending()):
            self._ready[conn] = None

    def _refuse(self, conn: Conn, refusal: Refuse, cut: str | None = None) -> None:
        self._send_quietly(conn, refusal_bytes(refusal))
        self._cut[cut or f"refused_{refusal.status}"] += 1
        self.log.debug("refused a request: %s %s", refusal.status, refusal.reason,
                       extra={"peer": str(conn.peer)})
        plain_left = None
        if refusal.body_left is not None and conn.framer is not None:
            plain_left = refusal.body_left - conn.framer.body_received(conn.buf)
        conn.framer = None
        self._linger(conn, plain_left=plain_left, seconds=self.limits.linger_max_seconds,
                     cap=self.limits.max_drain_bytes)

    def _send_quietly(self, conn: Conn, data: bytes) -> None:
        """A short answer from the loop: it fits the socket's buffer, so it is written
        at once; if not, the client was not reading and loses it."""
        with contextlib.suppress(OSError):
            conn.sock.send(data)

    def _linger(self, conn: Conn, *, plain_left: int | None, seconds: float,
                cap: int) -> None:
        """Close after the answer: send FIN, then read and drop what the client still
        sends (``plain_left`` body bytes, or until it closes; at most ``cap`` bytes and
        ``seconds`` in all), so closing does not reset the connection under an unread
        answer."""
        self._buffered -= len(conn.buf)
        conn.buf = bytearray()
        if plain_left is not None and plain_left <= 0:
            self._close(conn)
            return
        try:
            # socket.socket's own shutdown: SSLSocket's would drop the TLS state that
            # draining a body in plain text needs.
            socket.socket.shutdown(conn.sock, socket.SHUT_WR)
        except OSError:
            self._close(conn)
            return
        conn.drain_plain = plain_left is not None
        conn.drain_left = min(plain_left if plain_left is not None else cap, cap)
        self._hold(conn, LINGER, time.monotonic() + seconds)
        self._watch(conn, READ)
        self._drain(conn)

    def _drain(self, conn: Conn, budget: float = SLICE_BYTES) -> None:
        while conn.phase == LINGER:
            if budget <= 0:
                self._ready[conn] = None
                return
            try:
                if conn.drain_plain:
                    data = conn.sock.recv(min(RECV_BYTES, conn.drain_left))
                else:
                    data = socket.socket.recv(conn.sock, RECV_BYTES)
            except (ssl.SSLWantReadError, BlockingIOError):
                return
            except OSError:
                self._close(conn)
                return
            conn.drain_left -= len(data)
            budget -= len(data)
            if not data or conn.drain_left <= 0:
                self._close(conn)

    def _expire(self, conn: Conn) -> None:
        if conn.phase == READING and conn.framer is not None and conn.buf:
            # What already waits in the socket counts as arrived in time.
            self._receive(conn, budget=float("inf"))
            if conn.phase != READING:
                return
            seconds = self.limits.request_timeout
            self._refuse(conn, Refuse(408, f"the request did not arrive within {seconds:g} s"),
                         cut="request_timeout")
            # The client is still sending (or stalled): a short linger only.
            conn.deadline = min(conn.deadline, time.monotonic() + 1.0)
        elif conn.phase in (HANDSHAKE, READING):
            self._close(conn, "handshake_timeout" if conn.phase == HANDSHAKE
                        else "request_timeout")
        else:
            self._close(conn)  # an idle keep-alive connection, or a linger, ran out
