"""URL rules of spec.plugins that a static corpus case cannot state well.

The corpus (tests/unit/corpus/rolloutmanager-plugins.yaml) holds one case per rule with
its exact field path; these add the length boundary (a 2 KiB string in YAML would hide
the case) and every invisible character class, not only the samples the corpus shows.
"""

from __future__ import annotations

import sys
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import schemas
from schemas.plugins import MAX_LOCATION
from testkit import objects

SHA = "ab" * 32


def rm(location: str, **entry: Any) -> dict[str, Any]:
    return objects.rollout_manager("r", namespace="ns",
                                   metric=[{"name": "a/x", "location": location, **entry}])


def located(findings: list[schemas.Finding], field: str) -> list[schemas.Finding]:
    return [f for f in findings if f.field == field]


def test_a_location_of_2048_characters_is_accepted_and_2049_is_not() -> None:
    base = "https://example.com/"
    at_limit = base + "p" * (MAX_LOCATION - len(base))
    assert len(at_limit) == 2048
    assert schemas.errors(schemas.check(rm(at_limit, sha256=SHA))) == []

    over = at_limit + "p"
    errors = schemas.errors(schemas.check(rm(over, sha256=SHA)))
    assert [(f.field, f.message) for f in errors] == [(
        "spec.plugins.metric[0].location",
        "is 2049 characters long; at most 2048 are accepted",
    )]


def test_length_counts_characters_and_comes_before_other_rules() -> None:
    """A huge hostile value gets the length finding, not a scan of its content."""
    over = "ftp://" + "\u202e" * 5000
    errors = schemas.errors(schemas.check(rm(over)))
    assert [f.message for f in errors] == [
        f"is {len(over)} characters long; at most 2048 are accepted"]


def _format_characters() -> list[str]:
    return [chr(c) for c in range(sys.maxunicode + 1)
            if unicodedata.category(chr(c)) == "Cf"]


@pytest.mark.parametrize("where", ["host", "path", "end"])
def test_every_format_character_is_denied_with_its_code_point(where: str) -> None:
    for ch in _format_characters():
        location = {
            "host": f"https://exa{ch}mple.com/p",
            "path": f"file:///plugins/{ch}x",
            "end": f"https://example.com/p{ch}",
        }[where]
        errors = located(schemas.errors(schemas.check(rm(location, sha256=SHA))),
                         "spec.plugins.metric[0].location")
        assert len(errors) == 1, (hex(ord(ch)), errors)
        assert f"U+{ord(ch):04X}" in errors[0].message
        # The message names the character; it never carries it (a warning or cause with
        # an invisible character would hide the very problem it reports).
        assert ch not in errors[0].message


def test_plain_non_ascii_is_not_invisible() -> None:
    """An internationalised path is not a formatting trick."""
    findings = schemas.check(rm("https://example.com/plugins/größe", sha256=SHA))
    assert schemas.errors(findings) == []


def test_prefix_hint_comes_after_normalisation() -> None:
    """The webhook may see a value the mutating webhook missed: trimmed, lower-cased."""
    errors = schemas.errors(schemas.check(rm("https://example.com/p", sha256=" SHA256:" + SHA)))
    assert [f.field for f in errors] == ["spec.plugins.metric[0].sha256"]
    assert errors[0].message.startswith("drop the prefix")


def test_warnings_of_one_location_are_each_reported() -> None:
    """An IP host and a query string are two findings on the same field."""
    findings = schemas.check(rm("https://10.1.2.3/p?token=x", sha256=SHA))
    warnings = located(schemas.warnings(findings), "spec.plugins.metric[0].location")
    assert len(warnings) == 2
    assert "IP address" in warnings[0].message
    assert "query string" in warnings[1].message


def test_http_location_gets_the_same_host_warnings_when_allowed() -> None:
    findings = schemas.check(rm("http://127.0.0.1:8080/p", sha256=SHA), allow_http_plugins=True)
    assert schemas.errors(findings) == []
    assert [f.field for f in schemas.warnings(findings)] == ["spec.plugins.metric[0].location"]


def test_no_ascii_character_is_an_invisible_formatting_character():
    # invisible_problem skips ASCII strings outright; that must lose nothing.
    from schemas.plugins import _invisible

    assert not [c for c in map(chr, range(128)) if _invisible(c)]


HOST_CHARACTERS = "0123456789abcdefx.:%gz-"


@settings(max_examples=3000, deadline=None)
@given(st.text(HOST_CHARACTERS, max_size=24)
       | st.ip_addresses().map(str)
       | st.sampled_from(["127.1", "0x7f000001", "2130706433", "::ffff:127.0.0.1",
                          "fe80::1%eth0", "1.2.3.4%25x", "github.com", "a.svc", "localhost"]))
def test_the_ip_short_cut_skips_only_hosts_no_parser_reads_as_an_address(host: str) -> None:
    """ip_address_of answers None without parsing a host that has no colon and is not in the
    IPv4 shorthand alphabet; for every such host both parsers it used to try refuse it."""
    import ipaddress

    from schemas.hosts import NUMERIC_HOST, ip_address_of

    address = host.split("%", 1)[0]
    if ":" in address or NUMERIC_HOST.fullmatch(address):
        return  # parsed as before
    with pytest.raises(ValueError):
        ipaddress.ip_address(address)
    assert not NUMERIC_HOST.fullmatch(host)  # so the shorthand parse is not tried either
    assert ip_address_of(host) is None
