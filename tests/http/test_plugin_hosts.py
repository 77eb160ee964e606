"""Look-alike and unfetchable plugin hosts through the webhook: the
warning and the denial reach the client with their field path, and say the same as
``python -m schemas validate`` on the same object (docs/plugins.md "RolloutManager plugins",
"Host names")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from testkit import objects, reviews
from testkit.reviews import review

VALIDATE_RMS = "/validate/rolloutmanagers"
LOCATION = "spec.plugins.metric[0].location"


def manager(location: str) -> dict[str, Any]:
    return objects.rollout_manager("rm", namespace="argo-rollouts", metric=[
        {"name": "a/m", "location": location, "sha256": reviews.SHA256}])


def cli_findings(obj: dict[str, Any], tmp_path: Path) -> list[tuple[str, str, str]]:
    (tmp_path / "rm.yaml").write_text(yaml.safe_dump(obj, allow_unicode=True),
                                      encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "schemas", "validate", "-o", "json", "rm.yaml"],
        cwd=tmp_path, capture_output=True, text=True, encoding="utf-8", timeout=120,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return [(f["field"], f["severity"], f["message"])
            for f in json.loads(result.stdout)["findings"]]


def test_a_look_alike_host_is_allowed_with_a_warning_naming_its_ascii_form(post, client,
                                                                          tmp_path):
    obj = manager("https://g\u0456thub.com/argoproj-labs/plugin")  # a Cyrillic і
    response = post(VALIDATE_RMS, review(obj))
    assert response["allowed"] is True
    expected = (
        f'{LOCATION}: host "g\u0456thub.com" is not plain ASCII: Argo Rollouts fetches it '
        "from xn--gthub-n2e.com (UTS #46 non-transitional mapping, as Go applies it); its "
        'label "g\u0456thub" mixes Cyrillic and Latin letters, the mark of a look-alike '
        "name; write xn--gthub-n2e.com in the location, so that the host reviewed is the "
        "host fetched"
    )
    assert response["warnings"] == [expected]
    # On the wire as UTF-8, as the API server passes it on to kubectl.
    raw = client.post(VALIDATE_RMS, json=review(obj)).get_data()
    assert "g\u0456thub.com".encode() in raw
    field, message = expected.split(": ", 1)
    assert cli_findings(obj, tmp_path) == [(field, "warning", message)]


def test_a_full_width_host_warns_and_a_plain_one_does_not(post):
    warned = post(VALIDATE_RMS, review(manager("https://ｇｉｔｈｕｂ.com/o/p")))
    assert [w for w in warned["warnings"] if "github.com" in w] == [
        f'{LOCATION}: host "ｇｉｔｈｕｂ.com" is not plain ASCII: Argo Rollouts fetches it '
        "from github.com (UTS #46 non-transitional mapping, as Go applies it); write "
        "github.com in the location, so that the host reviewed is the host fetched"]
    plain = post(VALIDATE_RMS, review(manager("https://github.com/o/p")))
    assert plain["allowed"] is True and "warnings" not in plain


def test_a_host_that_cannot_be_fetched_is_denied_on_its_field(post, tmp_path):
    obj = manager("https://plugins..example.com/p")
    response = post(VALIDATE_RMS, review(obj))
    assert response["allowed"] is False and response["status"]["code"] == 422
    message = ('host "plugins..example.com" cannot be fetched: it has an empty label (two '
               "dots in a row, or a dot first); write a valid host name (an "
               "internationalised one as written in its script, or in its xn-- form)")
    causes = [c for c in response["status"]["details"]["causes"] if c["field"]]
    assert causes == [{"field": LOCATION, "message": message, "reason": "FieldValueInvalid"}]
    assert f"{LOCATION}: {message}" in response["status"]["message"]
    assert cli_findings(obj, tmp_path) == [(LOCATION, "error", message)]
