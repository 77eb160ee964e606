"""The webhook HTTP contract (docs/components.md "Webhook" and "Hostile and
broken clients"), through the in-process HTTP client (the server's own framing, request
parsing and answer writing, no sockets): what the API server sends, what it gets back."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

import schemas
from schemas.pointer import apply_patch
from testkit import objects, reviews
from testkit.reviews import review
from webhook import admission
from webhook.config import Lookups

VALIDATE_STAGES = "/validate/stages"
MUTATE_STAGES = "/mutate/stages"
VALIDATE_RMS = "/validate/rolloutmanagers"
MUTATE_RMS = "/mutate/rolloutmanagers"
ENDPOINTS = (VALIDATE_STAGES, MUTATE_STAGES, VALIDATE_RMS, MUTATE_RMS)


def causes(response: dict[str, Any]) -> dict[str, str]:
    """The field errors of a denial (the cause naming the webhook has no field)."""
    return {c["field"]: c["message"] for c in response["status"]["details"]["causes"]
            if c["field"]}


def denial_status(response: dict[str, Any], subject: str) -> dict[str, Any]:
    """The ``status`` of a denial, checked against the contract: 422 Invalid and a
    message that starts ``<Kind> "<name>" is invalid: `` (``subject`` is the first part)."""
    assert response["allowed"] is False
    status: dict[str, Any] = response["status"]
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["message"].startswith(f"{subject} is invalid: ")
    return status


def field_causes(response: dict[str, Any]) -> list[dict[str, str]]:
    return [c for c in response["status"]["details"]["causes"] if c["field"]]


@pytest.mark.parametrize(
    ("path", "obj", "webhook"),
    [
        (VALIDATE_STAGES, reviews.invalid_stage(), "validate-stages.rollgate.dev"),
        (VALIDATE_RMS, reviews.invalid_rollout_manager(), "validate-rolloutmanagers.rollgate.dev"),
    ],
)
def test_denial_names_the_webhook_in_its_first_cause(post, path, obj, webhook):
    # kubectl prints only the causes of an Invalid denial, so this is how a user
    # learns who denied the request.
    first = post(path, review(obj))["status"]["details"]["causes"][0]
    assert first == {"reason": "FieldValueInvalid", "field": "",
                     "message": f'admission webhook "{webhook}" denied the request'}


# --------------------------------------------------------------------- happy path


@pytest.mark.parametrize(
    ("path", "obj"),
    [
        (VALIDATE_STAGES, reviews.valid_stage()),
        (MUTATE_STAGES, reviews.valid_stage()),
        (VALIDATE_RMS, reviews.valid_rollout_manager()),
        (MUTATE_RMS, reviews.valid_rollout_manager()),
    ],
)
def test_valid_object_is_allowed_and_uid_echoed(post, path, obj):
    response = post(path, review(obj, uid="7f0c2a2e-1b4e-4c1e-9a55-0b5f3a1d2c3e"))
    assert response["uid"] == "7f0c2a2e-1b4e-4c1e-9a55-0b5f3a1d2c3e"
    assert response["allowed"] is True
    assert "status" not in response
    assert "patch" not in response  # already defaulted: nothing to add


def test_stage_without_analysis_is_allowed(post):
    obj = objects.stage(namespace="guestbook", freight=False, spec={"subscriptions": {}})
    response = post(VALIDATE_STAGES, review(obj))
    assert response["allowed"] is True
    assert not response.get("warnings")


# ------------------------------------------------------------------------ denials


def test_invalid_stage_is_denied_with_every_field_path(post):
    response = post(VALIDATE_STAGES, review(reviews.invalid_stage(name="prod"), uid="u-2"))
    assert response["uid"] == "u-2"
    status = denial_status(response, 'Stage "prod"')
    found = causes(response)
    assert set(found) == {"spec.analysis.args[0].value", "spec.analysis.args[1].name"}
    assert "quote" in found["spec.analysis.args[0].value"]
    assert status["details"]["kind"] == "Stage" and status["details"]["name"] == "prod"
    for cause in field_causes(response):
        assert cause["reason"] == "FieldValueInvalid"
        assert f'{cause["field"]}: {cause["message"]}' in status["message"]


def test_both_stage_spellings_at_once_are_denied(post):
    obj = reviews.valid_stage()
    obj["spec"]["verification"] = {"analysisTemplates": [{"name": "success-rate"}]}
    response = post(VALIDATE_STAGES, review(obj))
    assert response["allowed"] is False
    assert any(f.startswith("spec.") for f in causes(response))
    # exactly one field error, on the second spelling, next to the webhook's own cause
    status = denial_status(response, 'Stage "prod"')
    assert {c["field"] for c in status["details"]["causes"]} == {"", "spec.verification"}
    assert len(status["details"]["causes"]) == 2
    assert status["details"]["causes"][0]["message"] == \
        'admission webhook "validate-stages.rollgate.dev" denied the request'
    assert "spec.analysis" in causes(response)["spec.verification"]  # names the clash


def test_invalid_rollout_manager_is_denied_with_every_field_path(post):
    response = post(VALIDATE_RMS, review(reviews.invalid_rollout_manager(name="rm")))
    status = denial_status(response, 'RolloutManager "rm"')
    found = causes(response)
    assert {
        "spec.plugins.trafficManagement[0].name",
        "spec.plugins.metric[0].location",
        "spec.plugins.metric[0].sha256",
    } <= set(found)
    assert "SHA-1" in found["spec.plugins.metric[0].sha256"]
    # every error in one message, as "<path>: <message>" joined by "; "
    expected = 'RolloutManager "rm" is invalid: ' + "; ".join(
        f'{c["field"]}: {c["message"]}' for c in field_causes(response))
    assert status["message"] == expected


def test_http_plugins_allowed_when_configured(make_client, post):
    obj = reviews.valid_rollout_manager()
    obj["spec"]["plugins"]["metric"][0]["location"] = "http://plugins.internal/metric"
    assert post(VALIDATE_RMS, review(obj))["allowed"] is False
    permissive = make_client(allow_http_plugins=True)
    assert post(VALIDATE_RMS, review(obj), using=permissive)["allowed"] is True


def test_dry_run_request_gets_the_same_answer(post):
    denied = post(VALIDATE_RMS, review(reviews.invalid_rollout_manager(), dry_run=True))
    assert denied["allowed"] is False and denied["status"]["code"] == 422


# ----------------------------------------------------------------------- warnings


def test_remote_plugin_without_sha256_is_allowed_with_a_warning(post):
    obj = reviews.valid_rollout_manager()
    del obj["spec"]["plugins"]["trafficManagement"][0]["sha256"]
    response = post(VALIDATE_RMS, review(obj))
    assert response["allowed"] is True
    assert any(w.startswith("spec.plugins.trafficManagement[0]") for w in response["warnings"])


def test_missing_template_gives_a_warning_from_the_lookup(make_client, post):
    asked: list[tuple[str, str, str]] = []

    def template(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        asked.append((kind, namespace, name))
        return None

    client = make_client(lookups=Lookups(template=template))
    response = post(VALIDATE_STAGES, review(reviews.valid_stage()), using=client)
    assert response["allowed"] is True
    assert ("AnalysisTemplate", "guestbook", "success-rate") in asked
    assert ("ClusterAnalysisTemplate", "", "latency") in asked
    text = " ".join(response["warnings"])
    assert "success-rate" in text and "latency" in text


def test_namespace_comes_from_the_request_when_the_object_has_none(make_client, post):
    asked: list[str] = []

    def template(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        asked.append(namespace)
        return None

    obj = reviews.valid_stage()
    body = review(obj)
    del body["request"]["object"]["metadata"]["namespace"]
    post(VALIDATE_STAGES, body, using=make_client(lookups=Lookups(template=template)))
    assert "guestbook" in asked


def test_a_template_changed_between_two_applies_changes_the_warnings(make_client, post):
    # The app keeps a stanza's findings (schemas.verdicts); a template the look-up
    # answers anew (as the cache after a refresh) must be read anew.
    def declaring(*names: str) -> dict[str, Any]:
        return objects.analysis_template("t", namespace="guestbook",
                                         args=[{"name": n} for n in names])

    held = {"AnalysisTemplate": declaring(), "ClusterAnalysisTemplate": declaring()}
    client = make_client(lookups=Lookups(template=lambda kind, _ns, _name: held[kind]))
    before = post(VALIDATE_STAGES, review(reviews.valid_stage(name="test")), using=client)
    assert [w.split(":")[0] for w in before["warnings"]] == [
        "spec.analysis.args[0].name", "spec.analysis.args[1].name"]
    held["AnalysisTemplate"] = declaring("service-name", "api-token")
    after = post(VALIDATE_STAGES, review(reviews.valid_stage(name="prod")), using=client)
    assert after["allowed"] is True and not after.get("warnings")


def test_lookup_unavailable_answers_without_lookup_warnings(make_client, post):
    def template(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        raise schemas.LookupUnavailable("API server unreachable")

    def managers(namespace: str) -> list[dict[str, Any]]:
        raise schemas.LookupUnavailable("API server unreachable")

    client = make_client(lookups=Lookups(template=template, rollout_managers=managers))
    stage = post(VALIDATE_STAGES, review(reviews.valid_stage()), using=client)
    assert stage["allowed"] is True
    assert not stage.get("warnings")
    rm = post(VALIDATE_RMS, review(reviews.valid_rollout_manager()), using=client)
    assert rm["allowed"] is True
    assert not rm.get("warnings")


def test_second_rollout_manager_in_namespace_warns(make_client, post):
    other = reviews.valid_rollout_manager(name="older")

    def managers(namespace: str) -> list[dict[str, Any]]:
        return [other] if namespace == "argo-rollouts" else []

    client = make_client(lookups=Lookups(rollout_managers=managers))
    response = post(VALIDATE_RMS, review(reviews.valid_rollout_manager()), using=client)
    assert response["allowed"] is True
    assert response.get("warnings")


def test_warnings_are_kept_next_to_a_denial(post):
    obj = reviews.invalid_rollout_manager()
    obj["spec"]["plugins"]["trafficManagement"].append(
        {"name": "argoproj-labs/other", "location": "https://example.com/plugin"})
    response = post(VALIDATE_RMS, review(obj))
    assert response["allowed"] is False
    assert any(w.startswith("spec.plugins.trafficManagement[1]") for w in response["warnings"])


# ------------------------------------------------------------------------ patches


def test_patch_is_applied_once_and_is_idempotent(post):
    obj = objects.rollout_manager(namespace="argo-rollouts", plugins={"metric": [{
        "name": "argoproj-labs/m", "location": "file:///plugins/m",
        "sha256": "  " + reviews.SHA256.upper() + "\n"}]})
    first = post(MUTATE_RMS, review(obj))
    assert first["allowed"] is True
    # One warning, with the value stored: the manifest should say so (docs/comparison.md "GitOps:
    # re-applying a manifest").
    assert first["warnings"] == [
        f'spec.plugins.metric[0].sha256: stored as "{reviews.SHA256}" (trimmed and '
        "lower-cased, as Argo Rollouts compares it); write it so in the manifest, or every "
        "apply and sync sees a change"]
    ops = reviews.decode_patch(first)
    assert ops
    patched = apply_patch(obj, ops, strict=True)
    assert patched["spec"]["plugins"]["metric"][0]["sha256"] == reviews.SHA256
    # the defaulted object validates and a second mutation has nothing left to do
    again = post(MUTATE_RMS, review(patched))
    assert again["allowed"] is True
    assert "patch" not in again and "patchType" not in again
    assert not again.get("warnings")
    assert post(VALIDATE_RMS, review(patched))["allowed"] is True


@pytest.mark.parametrize("spec", [
    {"analysis": {"templates": [{"templateName": "success-rate"}]}},
    {"verification": {"analysisTemplates": [{"name": "success-rate"}]}},
], ids=["analysis", "verification"])
def test_stage_mutation_answers_without_a_patch(post, spec):
    # docs/components.md "What calls the webhook": no mutating registration for Stages; the endpoint
    # stays for a registration left from an earlier release and answers an allow,
    # unchanged.
    obj = objects.stage(namespace="guestbook", freight=False, spec=spec)
    response = post(MUTATE_STAGES, review(obj))
    assert response["allowed"] is True
    assert "patch" not in response and "patchType" not in response


def test_mutation_of_an_invalid_object_does_not_deny(post):
    response = post(MUTATE_RMS, review(reviews.invalid_rollout_manager()))
    assert response["allowed"] is True
    assert "status" not in response


# --------------------------------------------------------------------- ratcheting


def test_update_with_unchanged_invalid_field_is_allowed_with_a_warning(post):
    old = reviews.invalid_rollout_manager()
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "platform"}  # an unrelated edit
    response = post(VALIDATE_RMS, review(new, operation="UPDATE", old=old))
    assert response["allowed"] is True
    warned = " ".join(response["warnings"])
    assert "spec.plugins.metric[0].sha256" in warned
    assert "unchanged" in warned


def test_update_that_changes_an_invalid_field_is_denied(post):
    old = reviews.invalid_rollout_manager()
    new = copy.deepcopy(old)
    new["spec"]["plugins"]["metric"][0]["sha256"] = "abc"  # still wrong, and changed
    response = post(VALIDATE_RMS, review(new, operation="UPDATE", old=old))
    assert response["allowed"] is False
    assert "spec.plugins.metric[0].sha256" in causes(response)
    # the other, unchanged errors are only warnings now
    assert "spec.plugins.trafficManagement[0].name" not in causes(response)


def test_create_is_never_ratcheted(post):
    obj = reviews.invalid_stage()
    assert post(VALIDATE_STAGES, review(obj, operation="CREATE", old=obj))["allowed"] is False


def test_stage_update_ratchets_too(post):
    old = reviews.invalid_stage()
    new = copy.deepcopy(old)
    new["spec"]["subscriptions"] = {"upstreamStages": [{"name": "qa"}]}
    assert post(VALIDATE_STAGES, review(new, operation="UPDATE", old=old))["allowed"] is True


class CountingLookups:
    """Fake look-up callables that count how often the webhook asks."""

    def __init__(self) -> None:
        self.calls = 0

    def template(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls += 1
        return None

    def rollout_managers(self, namespace: str) -> list[dict[str, Any]]:
        self.calls += 1
        return []

    def as_lookups(self) -> Lookups:
        return Lookups(template=self.template, rollout_managers=self.rollout_managers)


def _relabelled(obj: dict[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["metadata"]["labels"] = {"team": "platform"}
    new["metadata"]["annotations"] = {"rollgate.dev/note": "x"}
    return new


@pytest.mark.parametrize(
    ("path", "obj"),
    [(VALIDATE_STAGES, reviews.valid_stage()),
     (VALIDATE_STAGES, objects.stage(namespace="guestbook", freight=False,
                                     verification=objects.verification("success-rate"))),
     (VALIDATE_RMS, reviews.valid_rollout_manager())],
    ids=["stage-analysis", "stage-verification", "rolloutmanager"],
)
def test_update_with_unchanged_stanza_does_no_lookups(make_client, post, path, obj):
    # kubectl label, Kargo's own updates, rollgate's annotation patches: nothing the
    # look-ups warn about has changed, so the Fail-policy webhook asks the API nothing.
    counting = CountingLookups()
    client = make_client(lookups=counting.as_lookups())
    assert post(path, review(obj), using=client)["allowed"] is True
    assert counting.calls > 0  # the same object on CREATE does ask
    counting.calls = 0
    body = review(_relabelled(obj), operation="UPDATE", old=obj)
    assert post(path, body, using=client)["allowed"] is True
    assert counting.calls == 0


@pytest.mark.parametrize(
    ("path", "obj", "change"),
    [(VALIDATE_STAGES, reviews.valid_stage(),
      lambda o: o["spec"]["analysis"]["templates"].append(
          {"templateName": "errors", "clusterScope": False})),
     (VALIDATE_STAGES, reviews.valid_stage(),  # analysis respelled as verification
      lambda o: o.update(spec={"verification": {
          "analysisTemplates": [{"name": "success-rate", "kind": "AnalysisTemplate"}]}})),
     (VALIDATE_RMS, reviews.valid_rollout_manager(),
      lambda o: o["spec"]["plugins"]["metric"][0].update(location="file:///plugins/other"))],
    ids=["stage-template-added", "stage-respelled", "rolloutmanager-plugin-moved"],
)
def test_update_that_changes_the_stanza_does_lookups(make_client, post, path, obj, change):
    counting = CountingLookups()
    new = _relabelled(obj)
    change(new)
    response = post(path, review(new, operation="UPDATE", old=obj),
                    using=make_client(lookups=counting.as_lookups()))
    assert counting.calls > 0
    assert response["uid"] == "uid-1"


def test_update_with_unchanged_stanza_still_validates_it(make_client, post):
    # Only the look-ups are skipped: the stanza is still checked and ratcheted.
    counting = CountingLookups()
    old = reviews.invalid_stage()
    response = post(VALIDATE_STAGES, review(_relabelled(old), operation="UPDATE", old=old),
                    using=make_client(lookups=counting.as_lookups()))
    assert response["allowed"] is True
    assert "unchanged" in " ".join(response["warnings"])
    assert counting.calls == 0


# --------------------------------------------------------- passed through untouched


@pytest.mark.parametrize("path", ENDPOINTS)
def test_delete_is_allowed_untouched(post, path):
    obj = reviews.invalid_stage() if "stages" in path else reviews.invalid_rollout_manager()
    response = post(path, review(None, operation="DELETE", old=obj))
    assert response == {"uid": "uid-1", "allowed": True}


@pytest.mark.parametrize("path", ENDPOINTS)
def test_connect_is_allowed_untouched(post, path):
    obj = reviews.invalid_stage() if "stages" in path else reviews.invalid_rollout_manager()
    assert post(path, review(obj, operation="CONNECT")) == {"uid": "uid-1", "allowed": True}


@pytest.mark.parametrize("path", ENDPOINTS)
def test_status_subresource_is_allowed_untouched(post, path):
    obj = reviews.invalid_stage() if "stages" in path else reviews.invalid_rollout_manager()
    body = review(obj, operation="UPDATE", old=obj, sub_resource="status")
    assert post(path, body) == {"uid": "uid-1", "allowed": True}


@pytest.mark.parametrize("path", ENDPOINTS)
def test_other_kinds_are_allowed_untouched(post, path):
    freight = objects.k8s_object("Freight", name="abc", namespace="guestbook",
                                 spec={"analysis": {"templates": []}})
    assert post(path, review(freight, kind="Freight")) == {"uid": "uid-1", "allowed": True}


def test_a_rollout_manager_sent_to_the_stage_endpoint_is_not_judged(post):
    response = post(VALIDATE_STAGES, review(reviews.invalid_rollout_manager()))
    assert response == {"uid": "uid-1", "allowed": True}


def test_create_without_object_is_refused_by_validation_only(post):
    body = review(reviews.valid_stage())
    body["request"]["object"] = None
    denied = post(VALIDATE_STAGES, body)
    assert denied["allowed"] is False and denied["status"]["code"] == 400
    assert post(MUTATE_STAGES, body) == {"uid": "uid-1", "allowed": True}


# --------------------------------------------------------------- bad requests


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"this is not json", "not valid JSON"),
        (b"[1, 2, 3]", "JSON object"),
        (b'"AdmissionReview"', "JSON object"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                     "request": {"uid": "x"}}).encode(), "admission.k8s.io/v1"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Pod",
                     "request": {"uid": "x"}}).encode(), "AdmissionReview"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
         "no request"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                     "request": {"operation": "CREATE"}}).encode(), "no uid"),
        (json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                     "request": {"uid": 42}}).encode(), "no uid"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, ""),
        (b"", "not valid JSON"),
    ],
    ids=["not-json", "list", "string", "v1beta1", "wrong-kind", "no-request", "no-uid",
         "uid-not-string", "bad-encoding", "deeply-nested", "empty"],
)
@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_body_that_is_not_an_admission_review_gets_400(client, path, body, reason):
    resp = client.post(path, data=body, content_type="application/json")
    assert resp.status_code == 400
    assert resp.mimetype == "text/plain"
    text = resp.get_data(as_text=True)
    assert reason in text
    assert "Traceback" not in text


def test_body_over_8_mib_gets_413(client):
    body = b'{"x": "' + b"a" * (8 * 1024 * 1024) + b'"}'
    resp = client.post(VALIDATE_STAGES, data=body, content_type="application/json")
    assert resp.status_code == 413
    assert "larger than" in resp.get_data(as_text=True)


def test_chunked_body_over_8_mib_gets_413(client):
    # No Content-Length (chunked transfer): the limit must still be a 413, not a
    # truncated body that then fails to parse.
    body = b'{"x": "' + b"a" * (8 * 1024 * 1024) + b'"}'
    resp = client.post(VALIDATE_STAGES, data=body, chunked=True)
    assert resp.status_code == 413
    assert "larger than" in resp.get_data(as_text=True)


def test_chunked_body_under_the_limit_is_read(client):
    body = json.dumps(review(reviews.valid_stage(), uid="chunked")).encode()
    resp = client.post(VALIDATE_STAGES, data=body, chunked=True)
    assert resp.status_code == 200
    assert resp.get_json()["response"]["uid"] == "chunked"


def test_body_just_under_the_limit_is_read(client):
    obj = reviews.valid_stage()
    obj["metadata"]["annotations"] = {"example.com/blob": "a" * (8 * 1024 * 1024 - 4096)}
    resp = client.post(VALIDATE_STAGES, json=review(obj))
    assert resp.status_code == 200


def test_wrong_method_and_unknown_path_are_plain_errors(client):
    assert client.get(VALIDATE_STAGES).status_code == 405
    resp = client.post("/validate/pods", json={})
    assert resp.status_code == 404
    assert resp.mimetype == "text/plain"


# -------------------------------------------------------------- internal faults


def test_internal_fault_on_validate_is_a_500_denial(post, monkeypatch, caplog):
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated bug in a check")

    monkeypatch.setattr(schemas, "check", broken)
    response = post(VALIDATE_STAGES, review(reviews.valid_stage(), uid="u-fault"))
    assert response["uid"] == "u-fault"
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert "simulated bug" not in json.dumps(response)  # no internals leak to users
    assert any("internal fault" in r.getMessage() and r.exc_info for r in caplog.records)


def test_internal_fault_on_mutate_allows_without_patch(post, monkeypatch):
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated bug in defaulting")

    monkeypatch.setattr(schemas, "default_patch", broken)
    # A RolloutManager: Stages have nothing to default, so defaulting never runs for them.
    obj = objects.rollout_manager(namespace="argo-rollouts", plugins={"metric": [{
        "name": "argoproj-labs/m", "location": "file:///plugins/m", "sha256": " AB "}]})
    assert post(MUTATE_RMS, review(obj, uid="u-m")) == {"uid": "u-m", "allowed": True}


@pytest.mark.parametrize("path", ENDPOINTS)
def test_the_app_answers_through_the_benchmarked_entry_point(post, monkeypatch, path):
    # bench/admission.py times admission.review; the app must run that same code.
    seen: list[str] = []
    real = admission.review

    def spy(body: Any, **kwargs: Any) -> admission.Outcome:
        seen.append(body["request"]["uid"])
        return real(body, **kwargs)

    monkeypatch.setattr(admission, "review", spy)
    obj = reviews.valid_stage() if "stages" in path else reviews.valid_rollout_manager()
    assert post(path, review(obj, uid="u-same"))["allowed"] is True
    assert seen == ["u-same"]


def test_a_lookup_that_crashes_does_not_crash_the_webhook(make_client):
    def template(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        raise KeyError("bug in a look-up")

    client = make_client(lookups=Lookups(template=template))
    resp = client.post(VALIDATE_STAGES, json=review(reviews.valid_stage()))
    assert resp.status_code == 200
    assert resp.get_json()["response"]["uid"] == "uid-1"


# ------------------------------------------------------------- health & metrics


def test_health_endpoints(client):
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_metrics_count_requests_by_endpoint_and_result(client, post):
    post(VALIDATE_RMS, review(reviews.invalid_rollout_manager()), using=client)
    client.post(VALIDATE_RMS, data=b"nope")
    text = client.get("/metrics").get_data(as_text=True)
    assert 'rollgate_webhook_requests_total{endpoint="/validate/rolloutmanagers",' \
           'result="denied"}' in text
    assert 'endpoint="/validate/rolloutmanagers",result="bad_request"' in text
    assert "rollgate_webhook_request_duration_seconds_bucket" in text


def test_a_requests_metrics_are_recorded_after_its_answer_and_before_any_scrape(client):
    """What the API server waits for ends with the answer: the metrics are recorded when
    the server says the answers are written (App.after_answers), and /metrics records
    what is still queued before it renders, so a scrape sees every answer its worker
    has given."""
    app = client.app
    body = json.dumps(review(reviews.valid_stage())).encode()
    series = {"endpoint": VALIDATE_STAGES, "result": "allowed"}

    def scraped() -> float:
        answer = app.respond("GET", "/metrics", b"")
        assert answer is not None
        return sum(sample.value
                   for family in text_string_to_metric_families(answer.body.decode())
                   for sample in family.samples
                   if sample.name == "rollgate_webhook_requests_total"
                   and sample.labels == series)

    def recorded() -> float:  # the registry as it is, nothing queued recorded first
        value = REGISTRY.get_sample_value("rollgate_webhook_requests_total", series)
        return value or 0.0

    before = scraped()
    assert app.respond("POST", VALIDATE_STAGES, body) is not None
    assert recorded() == before  # answered, not yet recorded
    assert scraped() == before + 1  # recorded by the scrape
    assert app.respond("POST", VALIDATE_STAGES, body) is not None
    app.after_answers()
    assert recorded() == before + 2


def test_a_huge_denial_is_capped(post):
    stage = reviews.valid_stage()
    stage["spec"]["analysis"]["args"] = [{"name": "a", "value": "x"} for _ in range(1000)]
    stage["spec"]["analysis"]["analysisRunMetadata"]["annotations"] = {
        f"rollgate.dev/a{i}": "x" for i in range(120)
    }
    answer = post("/validate/stages", reviews.review(stage))
    assert answer["allowed"] is False
    causes = answer["status"]["details"]["causes"]
    # the webhook's own cause, the first 100 errors, then how many were left out
    assert len(causes) == 1 + 100 + 1
    assert causes[-1] == {"reason": "FieldValueInvalid", "field": "",
                          "message": "... and 899 more errors"}
    assert answer["status"]["message"].endswith("; ... and 899 more errors")
    assert len(answer["warnings"]) == 50
    assert answer["warnings"][-1] == "... and 71 more warnings"
    assert len(json.dumps(answer)) < 100_000


def test_a_huge_field_name_is_clipped(post):
    """An unknown field is a newer upstream's (the API server accepted it): allowed with
    a warning, which is clipped like every text of the answer; a denial beside it too."""
    stage = reviews.valid_stage()
    stage["spec"]["analysis"]["x" * 100_000] = 1
    answer = post("/validate/stages", reviews.review(stage))
    assert answer["allowed"] is True
    [warning] = [w for w in answer["warnings"] if w.startswith("spec.analysis.xxx")]
    assert len(warning) <= 512
    stage["spec"]["analysis"]["templates"] = []
    denied = post("/validate/stages", reviews.review(stage))
    assert denied["allowed"] is False
    assert all(len(w) <= 512 for w in denied["warnings"])
    assert len(denied["status"]["message"]) < 5_000


# ------------------------------------------------------------------- hostile input


def test_a_value_deeper_than_the_checks_can_follow_is_a_denial_naming_it(post, client):
    """Parsing accepts nesting up to the recursion limit; the checks, which recurse,
    then run out of stack first. That is a denial naming the field, not the fault."""
    import sys

    obj = reviews.valid_stage()
    body = json.dumps(review(obj, uid="u-deep"))
    deep = "[" * 300 + '"x"' + "]" * 300
    body = body.replace('"guestbook-svc.default.svc.cluster.local"', deep, 1)
    parsed = json.loads(body)
    limit = sys.getrecursionlimit()
    # Parsed above with the normal limit; the checks get less stack than 300 levels need.
    sys.setrecursionlimit(len(__import__("inspect").stack(0)) + 150)
    try:
        outcome = admission.review(parsed, action="validate", resource="stages")
    finally:
        sys.setrecursionlimit(limit)
    response = outcome.body["response"]
    assert outcome.result == "denied" and response["status"]["code"] == 422
    cause = response["status"]["details"]["causes"][1]
    assert cause["field"] == "spec.analysis.args[0].value[0][0][0]"
    assert "nested 305 levels deep" in cause["message"]
    assert "deeper than rollgate's checks can follow" in response["status"]["message"]


def test_deepest_finds_the_path_to_the_deepest_value():
    obj = {"a": [1, {"b": {"c": [[0]]}}], "d": {"e": 1}}
    assert admission.deepest(obj) == (("a", 1, "b", "c", 0, 0), 6)
    assert admission.deepest("leaf") == ((), 0)


def test_non_ascii_is_sent_as_utf8_not_escaped(client):
    obj = reviews.invalid_stage(name="prød-è")
    resp = client.post(VALIDATE_STAGES, json=review(obj))
    raw = resp.get_data()
    assert "prød-è".encode() in raw and b"\\u00f8" not in raw
    assert json.loads(raw)["response"]["status"]["message"].startswith('Stage "prød-è"')


def test_a_dry_run_denial_is_logged_as_debug(post, caplog):
    caplog.set_level("DEBUG", logger="rollgate.webhook")
    post(VALIDATE_RMS, review(reviews.invalid_rollout_manager(), dry_run=True))
    post(VALIDATE_RMS, review(reviews.invalid_rollout_manager()))
    levels = [(r.levelname, r.dry_run) for r in caplog.records if r.getMessage() == "denied"]
    assert levels == [("DEBUG", True), ("INFO", False)]


def test_a_lone_surrogate_in_the_request_is_answered_as_escaped_json(client):
    """JSON may carry "\\ud800" (found by bench/fuzz.py); UTF-8 cannot encode it, so
    that answer is escaped ASCII instead of a 500."""
    body = json.dumps(review(reviews.valid_stage(), uid="u-\ud800"))
    resp = client.post(VALIDATE_STAGES, data=body, content_type="application/json")
    assert resp.status_code == 200
    assert b'"uid":"u-\\ud800"' in resp.get_data()
    assert json.loads(resp.get_data())["response"]["uid"] == "u-\ud800"


def test_an_answer_is_encoded_as_the_standard_library_encodes_it():
    """The app builds its JSON encoder once (webhook.server.app): every kind of value an
    answer holds comes out as json.dumps writes it, UTF-8 as is."""
    from webhook.server.app import encode_json

    answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
        "uid": "é-1", "allowed": False, "warnings": ["spec.x: \"q\" \\ \n\u2028 succès"],
        "status": {"code": 400, "ratio": 0.1 + 0.2, "big": 2**70, "none": None,
                   "nested": [[1, 2.5, True], {}], "nan": float("nan")}}}
    assert encode_json(answer) == json.dumps(answer, separators=(",", ":"),
                                             ensure_ascii=False).encode()
