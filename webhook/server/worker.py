"""The gunicorn worker: gthread, except that the event loop, not a thread, does the
TLS handshake and reads each request whole before a thread serves it.

Why: the validating webhook fails closed, so a client that can tie up the webhook's
threads blocks every Stage and RolloutManager write in the cluster. gunicorn's gthread
worker hands a connection to a thread as soon as a byte arrives, and the thread then
reads with a per-read timeout, so a client sending one byte every few seconds keeps a
thread forever, and a handful of them stop the webhook. Here a connection costs a
thread only from the moment its whole request is in memory until the answer is
written; everything before that happens in the loop, without blocking, under these
rules (docs/components.md "Hostile and broken clients"):

- **One deadline per request** (``request_timeout``): a new connection's TLS handshake,
  headers and body, or a kept-alive connection's next request from its first byte,
  must arrive within it; past it the client gets a 408 and the connection is closed.
- **A cap on connections held by the loop** (``max_connections`` per worker): a new
  connection past the cap closes the one that has waited longest, lingering closes
  first, then idle keep-alive connections (the least recently used first), then
  unfinished requests, so a flood of idle connections cannot lock new clients out.
- **Framing is checked before a thread sees the request** (:mod:`webhook.server.framing`): a
  malformed chunked body is a 400, a body over the limit a 413, each sent with
  ``Connection: close``; the rest of the body the client is still sending is read and
  dropped before the close (a declared length exactly, so a client that sends the
  whole body before reading gets its 413, and the close comes right after the body,
  where a client reusing the connection sees it), for ``linger_max_seconds`` and
  ``max_drain_bytes`` at most. Closing earlier, with the client's bytes unread, makes
  the kernel reset the connection, and a client still sending its body then never
  reads the answer: a fixed 5 s from the 413, then a pause of 5 s without a byte, cut
  clients of a loaded machine, which saw a TLS EOF instead of the 413. Only the
  connection cap closes such a connection sooner.
- **Bytes held by the loop are budgeted** (``buffer_budget`` per worker): when the
  requests being received would together exceed it, the one holding the most is
  refused with a 503, so a few huge uploads cannot starve small reviews.

A request handed to a thread is parsed by gunicorn from memory (:class:`BufferUnreader`;
its socket is never read by the thread), so gunicorn's own checks and the WSGI app run
unchanged. Closing after a ``Connection: close`` answer (gunicorn's "graceful close",
which waits for the client in the loop's thread) is done without blocking here too.

gunicorn internals: this worker overrides and uses parts of gthread and of gunicorn's
HTTP parser that are not the interface of a gunicorn worker (``base.Worker``'s ``cfg``,
``log``, ``alive``, ``init_process``, ``run``). They are named in one place,
:data:`GTHREAD_INTERNALS` and the tuples after it, and tested against gunicorn 27.0.x
(the declared minimum, by ``make test-minimums``) and the version in requirements.lock.
tests/unit/webhook/test_gthread_internals.py checks that each exists in the installed
gunicorn, so a gunicorn that renamed one fails a test instead of the webhook at start
(or, for a hook, instead of an override gunicorn silently no longer calls).
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import ssl
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from typing import Any, cast

from gunicorn import http
from gunicorn import sock as gsock
from gunicorn.http.unreader import Unreader
from gunicorn.workers.gthread import TConn, ThreadWorker

from webhook.config import MAX_BODY_BYTES
from webhook.server.framing import Complete, Framer, Refuse

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE
RECV_BYTES = 256 * 1024
SWEEP_SECONDS = 0.25  # how often deadlines are checked (the loop wakes at least every 1 s)
REPORT_SECONDS = 60.0  # how often a summary of connections the worker cut is logged
GRACEFUL_DRAIN_BYTES = 64 * 1024  # what gunicorn's graceful close drains, too

# The gunicorn internals this worker relies on (see the module docstring). On
# gunicorn.workers.gthread.ThreadWorker: first the hooks overridden here, which gthread's
# event loop calls, then what is used as gthread has it.
GTHREAD_INTERNALS = (
    "accept",  # the loop's callback for a listening socket
    "handle_request",  # a thread serves one parsed request (WSGI)
    "finish_request",  # the loop gets a connection back from its thread
    "murder_keepalived",  # after each turn of the loop; force=True at exit
    "murder_pending",  # after each turn of the loop (gthread's deferred connections)
    "_cap_keepalive",  # at SIGTERM (since gunicorn 27.0.1; 27.0.0 never calls it)
    "handle",  # the thread's part: skips its wait when data_ready, init when initialized
    "enqueue_req",  # hands a connection to a thread; its result comes back through...
    "method_queue",  # ...this queue, so finish_request runs on the loop's thread
    "poller",  # the loop's selector: connections are registered with their callback
    "nr_conns",  # connections open, which gthread compares with worker_connections
)
# On gunicorn.workers.gthread.TConn (every connection here is a Conn, a TConn).
TCONN_INTERNALS = ("sock", "client", "parser", "initialized", "data_ready", "close")
# On gunicorn.http.unreader.Unreader (BufferUnreader's base; ``chunk`` is overridden).
UNREADER_INTERNALS = ("chunk", "buf", "unread", "take_buffered")
# On the parser gunicorn.http.get_parser returns: set to a BufferUnreader (``_start_http``).
PARSER_INTERNALS = ("unreader",)
# On gunicorn.http.message.Request (see ``handle_request``).
REQUEST_INTERNALS = ("_expected_100_continue",)


@dataclass(frozen=True, slots=True)
class Limits:
    """The connection rules of one worker process (see the module docstring)."""

    max_connections: int = 1000
    request_timeout: float = 10.0
    max_body_bytes: int = MAX_BODY_BYTES
    buffer_budget: int = 32 * 1024 * 1024
    # Draining what a refused client still sends: the longest drain, and the most bytes
    # read (see the module docstring).
    linger_max_seconds: float = 60.0
    max_drain_bytes: int = 64 * 1024 * 1024
    # After SIGTERM: how long a kept-alive connection stays open for the client's next
    # request, which is answered with "Connection: close" (see ``_cap_keepalive``).
    stop_linger_seconds: float = 8.0


class BufferUnreader(Unreader):
    """What gunicorn's parser reads from: the loop puts the whole request here, so the
    serving thread never waits on the client."""

    def chunk(self, size_hint: int | None = None) -> bytes:
        return b""


# Where a connection is while the loop holds it. "busy": a thread has it; "closed": gone.
HANDSHAKE, READING, IDLE, LINGER, BUSY, CLOSED = (
    "handshake", "reading", "idle", "linger", "busy", "closed")
_GROUP = {HANDSHAKE: READING, READING: READING, IDLE: IDLE, LINGER: LINGER}
_EVICTION_ORDER = (LINGER, IDLE, READING)


class Conn(TConn):
    """gunicorn's connection plus the loop's state for it."""

    unreader: BufferUnreader  # the parser's, set with it (``_start_http``)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.phase = HANDSHAKE
        self.deadline = 0.0
        self.events = 0  # what the poller watches for; 0 = not registered
        self.buf = bytearray()
        self.framer: Framer | None = None
        self.continued = False  # "100 Continue" sent for the current request
        self.drain_left = 0
        self.drain_plain = False  # drain decrypted body bytes (True) or raw bytes
        self.drain_pause = 0.0  # the longest pause between drained bytes
        self.drain_end = 0.0  # when the drain ends whatever the client still sends
        self.on_event: Any = None


def _plain_response(status: int, text: str) -> bytes:
    body = (text + "\n").encode()
    phrase = HTTPStatus(status).phrase
    head = (f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode("ascii") + body


class WebhookWorker(ThreadWorker):
    """gthread with requests read by the event loop; see the module docstring."""

    limits = Limits()

    @classmethod
    def with_limits(cls, limits: Limits) -> type[WebhookWorker]:
        """This worker class with other limits (gunicorn takes a class, not an instance)."""
        return type(cls.__name__, (cls,), {"limits": limits})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Connections the loop holds, per eviction group, oldest first (dicts keep order).
        self._held: dict[str, dict[Conn, None]] = {LINGER: {}, IDLE: {}, READING: {}}
        self._buffered = 0
        self._next_sweep = 0.0
        self._next_report = time.monotonic() + REPORT_SECONDS
        self._cut: Counter[str] = Counter()

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
            self.poller.modify(conn.sock, events, conn.on_event)
        else:
            self.poller.register(conn.sock, events, conn.on_event)
        conn.events = events

    def _release(self, conn: Conn) -> None:
        """Take ``conn`` out of the loop (poller, groups, buffer budget)."""
        group = _GROUP.get(conn.phase)
        if group is not None:
            self._held[group].pop(conn, None)
        if conn.events:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(conn.sock)
            conn.events = 0
        self._buffered -= len(conn.buf)
        conn.buf = bytearray()

    def _close(self, conn: Conn, cut: str | None = None) -> None:
        if conn.phase == CLOSED:
            return
        if cut:
            self._cut[cut] += 1
            self.log.debug("closed a connection: %s", cut, extra={"peer": str(conn.client)})
        self._release(conn)
        conn.phase = CLOSED
        conn.on_event = None  # the partial refers back to conn: free it now, not at GC
        self.nr_conns -= 1
        conn.close()

    def _evict_one(self) -> bool:
        for group in _EVICTION_ORDER:
            held = self._held[group]
            if held:
                self._close(next(iter(held)), f"evicted_{group}")
                return True
        return False

    # ------------------------------------------------------------ gthread hooks

    def accept(self, listener: Any) -> None:
        try:
            client_sock, client_addr = listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                # Out of descriptors or memory: make room for the next client.
                self._evict_one()
                return
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = Conn(self.cfg, client_sock, client_addr, listener.getsockname())
        conn.on_event = partial(self._on_event, conn)
        deadline = time.monotonic() + self.limits.request_timeout
        conn.phase = READING  # its group while it is set up
        self._held[READING][conn] = None
        if self.cfg.is_ssl:
            try:
                conn.sock = gsock.ssl_wrap_socket(client_sock, self.cfg)
            except (OSError, ValueError) as exc:
                self.log.warning("cannot set up TLS for a connection: %s", exc)
                self._close(conn)
                return
            self._hold(conn, HANDSHAKE, deadline)
        else:
            self._start_http(conn)
            self._hold(conn, READING, deadline)
        self._watch(conn, READ)
        while self._held_count() > self.limits.max_connections and self._evict_one():
            pass

    def handle_request(self, req: Any, conn: Any) -> bool:
        if getattr(conn, "continued", False):
            # The loop already sent "100 Continue" while the body was arriving.
            req._expected_100_continue = False
            conn.continued = False
        return bool(super().handle_request(req, conn))

    def finish_request(self, tconn: TConn, fs: Any) -> None:
        """A thread is done with ``conn`` (main thread): keep it alive or close it."""
        conn = cast(Conn, tconn)  # every connection of this worker is a Conn
        try:
            keep = fs.result() is True if not fs.cancelled() else False
        except Exception:
            keep = False
        try:
            if not keep:
                self._linger(conn, plain_left=None, pause=2.0, total=2.0,
                             cap=GRACEFUL_DRAIN_BYTES)
                return
            conn.sock.setblocking(False)
            now = time.monotonic()
            expiry = now + self.cfg.keepalive
            if not self.alive:
                expiry = min(expiry, now + self.limits.stop_linger_seconds)
            self._hold(conn, IDLE, expiry)
            self._watch(conn, READ)
            # Bytes of a next request may already be here: read ahead by gunicorn, or
            # decrypted and buffered by TLS (the poller cannot see either).
            unreader = conn.unreader
            if unreader.buf.getvalue() and not self._take(conn, unreader.take_buffered()):
                return
            if isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                self._receive(conn)
        except Exception as exc:  # a bug here must not take the worker down
            self.log.warning("closing a connection after an error: %s: %s",
                             type(exc).__name__, exc)
            self._close(conn)

    def murder_keepalived(self, force: bool = False) -> None:
        """Close what is past its deadline (everything, with ``force``), at most every
        :data:`SWEEP_SECONDS`; gunicorn calls this after each turn of the loop."""
        now = time.monotonic()
        if force:
            for group in _EVICTION_ORDER:
                for conn in list(self._held[group]):
                    self._close(conn)
            return
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

    def murder_pending(self) -> None:
        """gthread's pending connections are not used: the loop holds them itself."""

    def _cap_keepalive(self, deadline: float) -> None:
        """At SIGTERM: keep idle kept-alive connections for ``stop_linger_seconds``, not
        gunicorn's 2 s (``deadline``).

        The API server pools connections and reuses the most recently used first, so a
        stopping pod's connections keep getting requests; each is answered with
        ``Connection: close`` and then closed by the client's reading of it. Closing an
        idle one ourselves can cross a request the client is already writing on it, a
        failed admission call; the longer they stay, the fewer are closed that way.
        """
        del deadline
        until = time.monotonic() + self.limits.stop_linger_seconds
        for conn in self._held[IDLE]:
            conn.deadline = min(conn.deadline, until)

    # ------------------------------------------------------------ the loop's work

    def _on_event(self, conn: Conn, _fileobj: Any) -> None:
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

    def _start_http(self, conn: Conn) -> None:
        parser = http.get_parser(self.cfg, conn.sock, conn.client)
        parser.unreader = conn.unreader = BufferUnreader()
        conn.parser = parser
        conn.initialized = True

    def _handshake(self, conn: Conn) -> None:
        try:
            cast(ssl.SSLSocket, conn.sock).do_handshake()  # TLS sockets only
        except ssl.SSLWantReadError:
            self._watch(conn, READ)
            return
        except ssl.SSLWantWriteError:
            self._watch(conn, WRITE)
            return
        except OSError:  # SSLError included: a scanner, a wrong protocol, a reset
            self._close(conn, "tls_failed")
            return
        self._start_http(conn)
        conn.phase = READING
        self._watch(conn, READ)
        self._receive(conn)  # the request may have come with the handshake's last flight

    def _receive(self, conn: Conn) -> None:
        while conn.phase in (READING, IDLE):
            try:
                data = conn.sock.recv(RECV_BYTES)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
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
            if not self._take(conn, data):
                return
        if conn.phase in (READING, IDLE):
            self._watch(conn, READ)

    def _take(self, conn: Conn, data: bytes) -> bool:
        """Add received bytes; dispatch or refuse the request when that is decided.
        Returns whether the loop should keep reading this connection."""
        if conn.phase == IDLE or conn.framer is None:
            if conn.phase == IDLE:
                self._hold(conn, READING, time.monotonic() + self.limits.request_timeout)
            conn.framer = Framer(max_body_bytes=self.limits.max_body_bytes)
        if not self._reserve(conn, len(data)):
            return False
        conn.buf += data
        progress = conn.framer.feed(conn.buf)
        if isinstance(progress, Complete):
            self._dispatch(conn)
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

    def _dispatch(self, conn: Conn) -> None:
        data = bytes(conn.buf)
        self._release(conn)
        conn.framer = None
        conn.phase = BUSY
        conn.unreader.unread(data)
        conn.data_ready = True
        self.enqueue_req(conn)

    def _refuse(self, conn: Conn, refusal: Refuse, cut: str | None = None) -> None:
        self._send_quietly(conn, _plain_response(refusal.status, refusal.reason))
        self._cut[cut or f"refused_{refusal.status}"] += 1
        self.log.debug("refused a request: %s %s", refusal.status, refusal.reason,
                       extra={"peer": str(conn.client)})
        plain_left = None
        if refusal.body_left is not None and conn.framer is not None:
            plain_left = refusal.body_left - conn.framer.body_received(conn.buf)
        conn.framer = None
        self._linger(conn, plain_left=plain_left, pause=self.limits.linger_max_seconds,
                     total=self.limits.linger_max_seconds, cap=self.limits.max_drain_bytes)

    def _send_quietly(self, conn: Conn, data: bytes) -> None:
        """A short answer from the loop: it fits the socket's buffer, so it is written
        at once; if not, the client was not reading and loses it."""
        with contextlib.suppress(OSError):
            conn.sock.send(data)

    def _linger(self, conn: Conn, *, plain_left: int | None, pause: float, total: float,
                cap: int) -> None:
        """Close after the answer: send FIN, then read and drop what the client still
        sends (``plain_left`` body bytes, or until it closes; at most ``cap`` bytes, a
        pause of ``pause`` seconds and ``total`` seconds in all), so closing does not
        reset the connection under an unread answer."""
        self._buffered -= len(conn.buf)
        conn.buf = bytearray()
        if plain_left is not None and plain_left <= 0:
            self._close(conn)
            return
        try:
            # socket.socket's own shutdown: SSLSocket.shutdown would drop the TLS state
            # that draining a body in plain text needs.
            socket.socket.shutdown(conn.sock, socket.SHUT_WR)
        except OSError:
            self._close(conn)
            return
        conn.drain_plain = plain_left is not None
        conn.drain_left = min(plain_left if plain_left is not None else cap, cap)
        now = time.monotonic()
        conn.drain_pause = pause
        conn.drain_end = now + total
        self._hold(conn, LINGER, min(conn.drain_end, now + pause))
        try:
            conn.sock.setblocking(False)
            self._watch(conn, READ)
        except (OSError, ValueError):
            self._close(conn)
            return
        self._drain(conn)

    def _drain(self, conn: Conn) -> None:
        while conn.phase == LINGER:
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
            if not data or conn.drain_left <= 0:
                self._close(conn)
                return
            # Still sending: the pause is counted from these bytes.
            conn.deadline = min(conn.drain_end, time.monotonic() + conn.drain_pause)

    def _expire(self, conn: Conn) -> None:
        if conn.phase == READING and conn.framer is not None and conn.buf:
            seconds = self.limits.request_timeout
            self._refuse(conn, Refuse(408, f"the request did not arrive within {seconds:g} s"),
                         cut="request_timeout")
            # The client is still sending (or stalled): a short linger only.
            conn.drain_end = min(conn.drain_end, time.monotonic() + 1.0)
            conn.deadline = min(conn.deadline, conn.drain_end)
        elif conn.phase in (HANDSHAKE, READING):
            self._close(conn, "handshake_timeout" if conn.phase == HANDSHAKE
                        else "request_timeout")
        else:
            self._close(conn)  # an idle keep-alive connection, or a linger, ran out
