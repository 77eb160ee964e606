"""Values nested about as deep as the JSON parser accepts, in a checked field: the
answer is a denial naming the field or a 400, never the internal-fault denial (issue
11: a value nested about 970 deep parsed, then the checks ran out of stack)."""

from __future__ import annotations

import json

from harness.kits.chaos import probing, until_probed
from schemas.kinds import GROUP_KARGO, VERSION_KARGO
from testkit import objects

STAGE = objects.stage("deep", namespace="default", freight=False, spec={
    "analysis": {"templates": [{"templateName": "t"}],
                 "args": [{"name": "a", "value": "PLACEHOLDER"}]}})


def _review(depth: int) -> bytes:
    # Built as text: the object is deeper than json.dumps itself would follow.
    nested = "[" * depth + '"x"' + "]" * depth
    obj = json.dumps(STAGE).replace('"PLACEHOLDER"', nested)
    return (
        '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
        f'{{"uid":"deep","kind":{{"group":"{GROUP_KARGO}","version":"{VERSION_KARGO}",'
        '"kind":"Stage"},"operation":"CREATE","namespace":"default","name":"deep",'
        f'"object":{obj}}}}}'
    ).encode()


def _answer(conn, depth: int) -> str:
    """"400", or the denial's message after checking it names the field."""
    conn.request("POST", "/validate/stages", body=_review(depth),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    body = resp.read()
    if resp.status == 400:
        return "400"
    assert resp.status == 200, (depth, resp.status, body[:200])
    response = json.loads(body)["response"]
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 422, (depth, status)  # never the 500 fault
    fields = [c["field"] for c in status["details"]["causes"] if c["field"]]
    assert fields and fields[0].startswith("spec.analysis.args[0].value"), fields
    message: str = status["message"]
    return message


def test_deep_values_are_denied_or_refused_never_a_fault(webhook):
    answers: dict[int, str] = {}
    with probing(webhook, "deeply nested values") as probes:
        conn = webhook.https()
        try:
            for _ in until_probed(probes):
                # Around the depth where parsing succeeds but the checks run out of
                # stack (it depends on the stack in use), and well past it.
                for depth in [*range(880, 1000, 4), 5000, 100_000]:
                    answers[depth] = _answer(conn, depth)
        finally:
            conn.close()
    # Both outcomes occur: deep values that parse are checked (and denied as a type
    # error or as too deep), deeper ones are refused as JSON.
    assert answers[880] != "400" and answers[100_000] == "400"
    print({d: a[:90] for d, a in answers.items() if a != "400"})
