"""A plugin host as Argo Rollouts fetches it: its ASCII form, by UTS #46 non-transitional.

Argo Rollouts (v1.9.1) downloads a plugin with Go's ``net/http``, which dials, sends SNI
and the ``Host`` header for the ASCII form of the URL's host: the host unchanged when it
is ASCII, else ``idna.Lookup.ToASCII`` of ``golang.org/x/net/idna``, UTS #46 with
*non-transitional* processing (the default since Go 1.18), STD3 rules and the hyphen,
joiner and Bidi checks; a host that fails there is dialled as written, and resolves
nowhere. Python's own ``encodings.idna`` (what ``socket``, ``ssl`` and ``http.client``
apply to a str host) is IDNA 2003, transitional: it maps ``ß`` to ``ss``, so
``straße.de`` is ``strasse.de`` to it and ``xn--strae-oqa.de`` to Go, two different
hosts. So the ASCII form is computed here, with the ``idna`` package
(``uts46=True, transitional=False``), and is the one thing both the warnings and the
digest pre-flight use (docs/plugins.md "RolloutManager plugins", "Host names").

Stricter than Go in one respect: code points that UTS #46 still maps but IDNA 2008
forbids (symbols and emoji: ``i❤.ws``, ``xn--ls8h.la``) are refused; such names are not
registrable under most top-level domains, and they are look-alike material.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import idna

from schemas.translate import short

# A host Go's resolver may still read as an IPv4 address ("127.1", "0x7f000001").
NUMERIC_HOST = re.compile(r"[0-9a-fx.]+")
_DNS_CHARACTER = re.compile(r"[A-Za-z0-9_-]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
MAX_LABEL = 63
MAX_NAME = 253
# UTS #39 "highly restrictive": one script per label, or Latin with the scripts written
# together in Chinese, Japanese and Korean. Any other mix is the mark of a look-alike.
_USUAL_MIXES = (
    frozenset({"Latin", "Han", "Hiragana", "Katakana"}),
    frozenset({"Latin", "Han", "Bopomofo"}),
    frozenset({"Latin", "Han", "Hangul"}),
)
# The first word of a letter's Unicode name is its script, except for these.
_SCRIPT_WORDS = {"CJK": "Han", "IDEOGRAPHIC": "Han", "KATAKANA-HIRAGANA": ""}


@dataclass(frozen=True, slots=True)
class HostForm:
    """One host: as written, as fetched (``ascii``), as read (``unicode``, U-labels).

    ``problem`` (without the host) says why it cannot be fetched; then ``ascii`` and
    ``unicode`` are "". ``mixed`` is the first label that mixes scripts, with them.
    """

    written: str
    ascii: str = ""
    unicode: str = ""
    problem: str = ""
    mixed: tuple[str, tuple[str, ...]] | None = None


class HostError(ValueError):
    """A location whose host cannot be fetched; ``str()`` says why, naming the host."""


def netloc_host(netloc: str) -> str:
    """The host of a URL's authority as written (no userinfo, no port; an IPv6
    literal keeps its brackets). ``urlsplit().hostname`` would lower-case it."""
    host = netloc.rpartition("@")[2]
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.partition(":")[0]


def ip_address_of(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` names when a resolver reads it as one, else None."""
    address = host.split("%", 1)[0]  # an IPv6 zone id is not the address
    if ":" not in address and not NUMERIC_HOST.fullmatch(address):
        # Neither IPv6 (which has a colon) nor any IPv4 form: a DNS name, decided
        # without the two exceptions ip_address raises for one.
        return None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        if not NUMERIC_HOST.fullmatch(host) or not any(c.isdigit() for c in host):
            return None
        try:
            # Shorthand forms ("127.1", "2130706433") that getaddrinfo accepts; a pure
            # parse, no look-up.
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _unescape(host: str) -> str:
    """Go's url.Parse decodes percent-escapes of non-ASCII bytes in a host and refuses
    escaped ASCII; the decoded host is what it then maps."""
    if re.search(r"%(?![89a-fA-F][0-9a-fA-F])", host):
        raise ValueError("has a percent-escape of an ASCII character or a malformed one, "
                         "which Go's URL parser refuses in a host")
    try:
        return unquote(host, errors="strict")
    except UnicodeDecodeError:
        raise ValueError("has percent-escapes that are not UTF-8") from None


def _label_problem(label: str) -> str | None:
    """Why an ASCII label cannot be part of a host Go's resolver looks up (its rules
    are kept: '_' is accepted, a hyphen may not begin or end a label)."""
    if not label:
        return "has an empty label (two dots in a row, or a dot first)"
    if len(label) > MAX_LABEL:
        return (f"has a label of {len(label)} characters ({short(label, 40)}); a DNS "
                f"label has at most {MAX_LABEL}")
    for ch in label:
        if not _DNS_CHARACTER.fullmatch(ch):
            return f"contains {short(ch)}, which a host name cannot contain"
    if _is_a_label(label):
        try:
            idna.decode(label.lower())
        except (UnicodeError, ValueError) as exc:  # idna.IDNAError is a UnicodeError
            return (f"has the label {short(label)}, which is not a valid internationalised "
                    f"label (xn-- then punycode): it {_idna_words(exc)}")
    if label.startswith("-") or label.endswith("-"):
        return f"has a label that begins or ends with a hyphen ({short(label)})"
    return None


def _is_a_label(label: str) -> bool:
    return label[:4].lower() == "xn--"


def _ascii_problem(host: str) -> str | None:
    name = host[:-1] if host.endswith(".") else host
    if len(name) > MAX_NAME:
        return f"is {len(name)} characters long; a host name has at most {MAX_NAME}"
    for label in name.split("."):
        problem = _label_problem(label)
        if problem:
            return problem
    if all(c.isdigit() or c == "." for c in name):
        return "is all digits and dots but not an IP address"
    return None


_IDNA_WORDS = (
    ("Empty Label", "has an empty label (two dots in a row, or a dot first)"),
    ("Empty domain", "is empty"),
    ("Label too long", f"has a label longer than {MAX_LABEL} characters in ASCII"),
    ("Domain too long", f"is longer than {MAX_NAME} characters in ASCII"),
    ("Label must not start or end with a hyphen", "has a label that begins or ends with "
     "a hyphen"),
    ("Label has disallowed hyphens", "has a label with '--' as its 3rd and 4th "
     "characters (reserved for xn-- labels)"),
    ("Malformed A-label", "encodes nothing"),
    ("Invalid A-label", "is not valid punycode"),
    ("A-label must not end with a hyphen", "ends with a hyphen"),
    ("Label begins with an illegal combining character", "has a label that begins with a "
     "combining mark"),
)


def _idna_words(exc: Exception) -> str:
    message = str(exc)
    for prefix, words in _IDNA_WORDS:
        if message.startswith(prefix):
            return words
    code = re.search(r"U\+([0-9A-F]{4,6})", message)
    if code and isinstance(exc, idna.InvalidCodepoint | idna.InvalidCodepointContext):
        ch = chr(int(code.group(1), 16))
        name = unicodedata.name(ch, "a character without a name")
        return (f"contains U+{code.group(1)} ({name}), which IDNA 2008 does not allow "
                "in a host name")
    return message[:200]


def _script(ch: str) -> str:
    """The script of a letter ("" for anything else), from its Unicode name."""
    if not unicodedata.category(ch).startswith("L"):
        return ""
    if ch.isascii():
        return "Latin"
    word = unicodedata.name(ch, "UNKNOWN").split(" ", 1)[0]
    return _SCRIPT_WORDS.get(word, word.title())


def _mixed(unicode_host: str) -> tuple[str, tuple[str, ...]] | None:
    for label in unicode_host.split("."):
        if label.isascii():
            continue
        scripts = frozenset(_script(ch) for ch in label) - {""}
        if len(scripts) > 1 and not any(scripts <= usual for usual in _USUAL_MIXES):
            return label, tuple(sorted(scripts))
    return None


def _non_ascii_form(written: str, text: str) -> HostForm:
    try:
        ascii_host = idna.encode(text, uts46=True, std3_rules=True,
                                 transitional=False).decode("ascii")
        unicode_host = idna.decode(ascii_host)
    except (UnicodeError, ValueError) as exc:
        return HostForm(written, problem=f"is not a valid internationalised name after "
                                         f"UTS #46 mapping: it {_idna_words(exc)}")
    if ip_address_of(ascii_host) is None:
        problem = _ascii_problem(ascii_host)  # all digits, say, once mapped
        if problem:
            return HostForm(written, problem=f"is {ascii_host} after UTS #46 mapping, which "
                                             f"{problem}")
    return HostForm(written, ascii_host, unicode_host, mixed=_mixed(unicode_host))


@lru_cache(maxsize=4096)
def _ipv6_literal(written: str) -> bool:
    """``[addr]`` or ``[addr%zone]`` with an IPv6 address, as urlsplit accepts it."""
    if not (written.isascii() and written.endswith("]")):
        return False
    address = written[1:-1].split("%", 1)[0]
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def host_form(written: str) -> HostForm:
    """``written`` (a host from :func:`netloc_host`) as Argo Rollouts fetches it.

    Cached: the webhook sees the same few hosts over and over.
    """
    if written.startswith("["):
        # An IPv6 literal: urlsplit has checked what it got from a URL, but this is also
        # called on a host alone, so what is not one is a problem, never an answer.
        if _ipv6_literal(written):
            return HostForm(written, written, written)
        return HostForm(written, problem="is not a valid IPv6 literal in brackets")
    text = written
    if "%" in text:
        try:
            text = _unescape(text)
        except ValueError as exc:
            return HostForm(written, problem=str(exc))
    if not text.isascii():
        return _non_ascii_form(written, text)
    if ip_address_of(text) is None:
        problem = _ascii_problem(text)
        if problem:
            return HostForm(written, problem=problem)
    # Each xn-- label decoded once already, in _label_problem.
    unicode_host = ".".join(idna.decode(label.lower()) if _is_a_label(label) else label
                            for label in text.split("."))
    return HostForm(written, text, unicode_host, mixed=_mixed(unicode_host))


def host_problem(written: str) -> str | None:
    """The denial for a host that cannot be fetched, or None."""
    form = host_form(written)
    if not form.problem:
        return None
    return (f"host {short(written)} cannot be fetched: it {form.problem}; write a valid "
            "host name (an internationalised one as written in its script, or in its "
            "xn-- form)")


def host_warning(written: str) -> str | None:
    """The warning for a host whose ASCII form is not what it reads as, or None.

    Warned: a host whose ASCII form is another string (letter case aside, which DNS
    does not tell apart): every host written with non-ASCII characters or their
    percent-escapes. A host written in ASCII is fetched as written, so it is warned
    about only when one of its xn-- labels reads as a mix of scripts.
    """
    form = host_form(written)
    if form.problem:
        return None
    mixed = ""
    if form.mixed is not None:
        label, scripts = form.mixed
        mixed = (f"; its label {short(label)} mixes {' and '.join(scripts)} letters, the "
                 "mark of a look-alike name")
    if form.ascii.lower() != written.lower():
        return (f"host {short(written)} is not plain ASCII: Argo Rollouts fetches it from "
                f"{form.ascii} (UTS #46 non-transitional mapping, as Go applies it)"
                f"{mixed}; write {form.ascii} in the location, so that the host reviewed "
                "is the host fetched")
    if mixed:
        return (f"host {short(written)} is the internationalised name "
                f"{short(form.unicode)}{mixed}: check that this is the host meant")
    return None


def fetch_url(location: str) -> str:
    """``location`` as Go's client requests it: the host in its ASCII form, and the
    non-ASCII characters of path and query percent-encoded (UTF-8), which Go does too
    and ``http.client`` cannot do itself. Raises :class:`HostError`."""
    parts = urlsplit(location)
    written = netloc_host(parts.netloc)
    form = host_form(written)
    if form.problem:
        raise HostError(f"host {short(written)} cannot be fetched: it {form.problem}")
    if form.ascii == written and location.isascii():
        return location  # the common case, and the URL exactly as written
    at = parts.netloc.rfind("@") + 1
    netloc = (parts.netloc[:at] + form.ascii
              + parts.netloc[at + len(written):])
    return urlunsplit((parts.scheme, netloc, _percent_encoded(parts.path),
                       _percent_encoded(parts.query), _percent_encoded(parts.fragment)))


def _percent_encoded(text: str) -> str:
    return _NON_ASCII.sub(lambda m: quote(m.group(), safe=""), text)
