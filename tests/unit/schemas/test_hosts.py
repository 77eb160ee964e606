"""Plugin hosts as Argo Rollouts fetches them (schemas/hosts.py, docs/plugins.md "RolloutManager
plugins", "Host names"): the ASCII form by UTS #46 non-transitional processing, the
warning when it is not what the location reads as, the denial when there is none.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from schemas.hosts import HostError, fetch_url, host_form, host_problem, host_warning

# (as written, its ASCII form, a piece of the warning or None for no warning)
FETCHED = [
    ("github.com", "github.com", None),
    ("GitHub.COM", "GitHub.COM", None),  # letter case: the same host to DNS
    ("plugins.example.com.", "plugins.example.com.", None),
    ("my_host.example.com", "my_host.example.com", None),  # Go's resolver takes '_'
    ("r3---sn-abc.googlevideo.com", "r3---sn-abc.googlevideo.com", None),
    ("xn--strae-oqa.de", "xn--strae-oqa.de", None),  # punycode already, one script
    ("xn--80ak6aa92e.com", "xn--80ak6aa92e.com", None),  # all Cyrillic: one script
    # Non-transitional: ß stays ß (IDNA 2003 and transitional UTS #46: strasse.de).
    ("straße.de", "xn--strae-oqa.de", "fetches it from xn--strae-oqa.de"),
    ("faß.de", "xn--fa-hia.de", "fetches it from xn--fa-hia.de"),
    ("bücher.example", "xn--bcher-kva.example", "fetches it from xn--bcher-kva.example"),
    # A Cyrillic і among Latin letters.
    ("g\u0456thub.com", "xn--gthub-n2e.com",
     'its label "g\u0456thub" mixes Cyrillic and Latin letters'),
    ("xn--gthub-n2e.com", "xn--gthub-n2e.com",
     'is the internationalised name "g\u0456thub.com"; its label "g\u0456thub" mixes '
     "Cyrillic and Latin letters"),
    # Full-width letters, full-width and ideographic full stops.
    ("ｇｉｔｈｕｂ.com", "github.com", "fetches it from github.com"),
    ("github.com。io", "github.com.io", "fetches it from github.com.io"),
    ("plugins．example．com", "plugins.example.com", "fetches it from plugins.example.com"),
    ("ｌｏｃａｌｈｏｓｔ", "localhost", "fetches it from localhost"),
    ("１２７.０.０.１", "127.0.0.1", "fetches it from 127.0.0.1"),
    # Percent-escapes of UTF-8, which Go's URL parser decodes in a host.
    ("g%D1%96thub.com", "xn--gthub-n2e.com", "mixes Cyrillic and Latin letters"),
    # Scripts written together: no look-alike note.
    ("例え.テスト", "xn--r8jz45g.xn--zckzah", "fetches it from xn--r8jz45g.xn--zckzah"),
    ("παράδειγμα.δοκιμή", "xn--hxajbheg2az3al.xn--jxalpdlp", "fetches it from"),
    ("[::1]", "[::1]", None),
]


@pytest.mark.parametrize(("written", "fetched", "warning"), FETCHED,
                         ids=[w for w, _, _ in FETCHED])
def test_the_ascii_form_and_the_warning(written: str, fetched: str, warning: str | None
                                        ) -> None:
    form = host_form(written)
    assert (form.ascii, form.problem) == (fetched, "")
    assert host_problem(written) is None
    said = host_warning(written)
    if warning is None:
        assert said is None
        return
    assert said is not None and warning in said
    assert said.startswith(f'host "{written}" ')  # quoted only when it warns
    if written.isascii() and "%" not in written:
        return  # punycode as written: nothing else to write
    assert said.endswith(f"write {fetched} in the location, so that the host reviewed is "
                         "the host fetched")
    mixed = "mixes" in warning
    assert ("look-alike" in said) is mixed


def test_non_transitional_is_not_what_python_s_own_codec_does() -> None:
    """Python's encodings.idna (IDNA 2003), which socket and http.client use for a str
    host, maps ß to ss: the host the pre-flight would have fetched was another one."""
    assert "straße.de".encode("idna") == b"strasse.de"
    assert host_form("straße.de").ascii == "xn--strae-oqa.de"


# What golang.org/x/net/idna's Lookup.ToASCII (v0.61.0, built with Go 1.26) answers for
# these, recorded by running it: the profile net/http applies to a non-ASCII host.
GO_LOOKUP = {
    "straße.de": "xn--strae-oqa.de",
    "g\u0456thub.com": "xn--gthub-n2e.com",
    "ｇｉｔｈｕｂ.com": "github.com",
    "github.com。io": "github.com.io",
    "bücher.example": "xn--bcher-kva.example",
    "İstanbul.tr": "xn--istanbul-o0e.tr",
    "ｌｏｃａｌｈｏｓｔ": "localhost",
    "１２７.０.０.１": "127.0.0.1",
    "例え.テスト": "xn--r8jz45g.xn--zckzah",
    "ΑΒΓ.gr": "xn--mxacd.gr",
    "faß.de": "xn--fa-hia.de",
    "foo．bar.com": "foo.bar.com",
    "ǅ.com": "xn--d-toa.com",
}


@pytest.mark.parametrize(("written", "go"), GO_LOOKUP.items(), ids=list(GO_LOOKUP))
def test_the_ascii_form_is_go_s(written: str, go: str) -> None:
    assert host_form(written).ascii == go


# (as written, a piece of the reason)
DENIED = [
    ("plugins..example.com", "has an empty label"),
    (".example.com", "has an empty label"),
    ("xn--", 'the label "xn--", which is not a valid internationalised label'),
    ("xn--zz.example.com", "it is not valid punycode"),
    ("xn--abc-.example.com", "it ends with a hyphen"),
    ("xn--a.com", "not a valid internationalised label"),  # decodes to a control character
    ("xn--ls8h.la", "IDNA 2008 does not allow"),  # an emoji: Go would map it (README)
    ("a" * 64 + ".com", "has a label of 64 characters"),
    (".".join(["a" * 63] * 4) + ".com", "is 259 characters long; a host name has at most 253"),
    ("-plugins.example.com", "begins or ends with a hyphen"),
    ("plugins-.example.com", "begins or ends with a hyphen"),
    ("plug$ins.example.com", 'contains "$", which a host name cannot contain'),
    ("999.999.1.1", "is all digits and dots but not an IP address"),
    ("i❤.ws", "contains U+2764 (HEAVY BLACK HEART), which IDNA 2008 does not allow"),
    ("a_b.bücher.de", "contains U+005F (LOW LINE)"),  # STD3 rules once not ASCII, as in Go
    ("ab--cd.bücher.de", "'--' as its 3rd and 4th characters"),
    ("\u0300a.example", "begins with a combining mark"),
    ("ｇｉｔｈｕｂ..com", "has an empty label"),
    ("９９９.９９９.１.１", "is 999.999.1.1 after UTS #46 mapping, which is all digits"),
    ("g%41thub.com", "percent-escape of an ASCII character"),
    ("g%ZZthub.com", "or a malformed one"),
    ("g%FFthub.com", "percent-escapes that are not UTF-8"),
    ("\ud800.example", "U+D800"),
]


@pytest.mark.parametrize(("written", "reason"), DENIED, ids=[w[:40] for w, _ in DENIED])
def test_a_host_that_cannot_be_fetched_is_denied_with_what_to_do(written: str, reason: str
                                                                 ) -> None:
    problem = host_problem(written)
    assert problem is not None and reason in problem, problem
    assert problem.startswith('host "') and " cannot be fetched: it " in problem
    assert problem.endswith("; write a valid host name (an internationalised one as "
                            "written in its script, or in its xn-- form)")
    assert host_warning(written) is None
    with pytest.raises(HostError):
        fetch_url(f"https://{written}/plugin")


FETCH_URLS = [
    ("https://github.com/a/b", "https://github.com/a/b"),
    ("HTTPS://GitHub.com:443/a?b=c", "HTTPS://GitHub.com:443/a?b=c"),  # as written
    ("https://straße.de:8443/p", "https://xn--strae-oqa.de:8443/p"),
    ("https://ｇｉｔｈｕｂ.com/p", "https://github.com/p"),
    ("https://github.com。io/p", "https://github.com.io/p"),
    ("https://g%D1%96thub.com/p", "https://xn--gthub-n2e.com/p"),
    ("https://example.com/plugins/größe?v=ü", "https://example.com/plugins/gr%C3%B6%C3%9Fe?v=%C3%BC"),
    ("https://example.com/a%20b", "https://example.com/a%20b"),  # escapes stay as written
    ("https://[::1]:8443/p", "https://[::1]:8443/p"),
]


@pytest.mark.parametrize(("location", "url"), FETCH_URLS, ids=[u for u, _ in FETCH_URLS])
def test_the_url_the_pre_flight_fetches(location: str, url: str) -> None:
    assert fetch_url(location) == url


@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=40)
       | st.text("aｇі.。．%-_xn0129DF", max_size=30)
       | st.lists(st.sampled_from(["xn--", "a", "ß", "і", "-", ".", "。", "%D1", "%96", "1"]),
                  max_size=12).map("".join))
@example("[\x80")  # not an IPv6 literal: once answered as a non-ASCII fetch form
@example("[::1]")
def test_any_host_gets_an_answer_never_an_exception(written: str) -> None:
    """The webhook fails closed: whatever a location's host holds, the checks answer."""
    form = host_form(written)
    assert bool(form.problem) != bool(form.ascii) or written == ""
    host_problem(written)
    host_warning(written)
    if not form.problem:
        assert form.ascii.isascii()
