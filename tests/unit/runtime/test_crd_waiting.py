"""A controller whose CRD is not served waits for it without holding the others.

The manager runs over the fake API at the HTTP level (``FakeApi.rest()``); discovery is
a set of served resources the test changes, as creating a CRD does on a real server
(the e2e counterpart, on a real kube-apiserver: tests/e2e/plugins/test_missing_crds.py).

The expected paths, selectors and messages are spelled out, not built from
schemas.kinds: they state what the API server and users see, apart from the code under
test.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kubekit.discovery import crd_name, missing_crds
from kubekit.kinds import ROLLOUT_MANAGER, STAGE, Resource
from reconciler.runtime.manager import Manager
from reconciler.runtime.options import RuntimeOptions
from reconciler.runtime.types import Context, Controller, Key, Watch
from reconciler.runtime.watches import enqueue_self
from schemas.kinds import GROUP_ARGO, GROUP_KARGO, VERSION_ARGO, VERSION_KARGO
from testkit.fakeapi import FakeApi, api_error
from testkit.waits import wait_for


class Served:
    """Discovery answered from a set of resources; ``fail`` makes it raise once."""

    def __init__(self, *resources: Resource) -> None:
        self.resources = set(resources)
        self.asked: list[tuple[str, str]] = []
        self.fail = 0

    def served(self, group: str, version: str) -> frozenset[str]:
        self.asked.append((group, version))
        if self.fail:
            self.fail -= 1
            raise api_error(503, "ServiceUnavailable")
        return frozenset(r.plural for r in self.resources
                         if (r.group, r.version) == (group, version))


class Recording(Controller):
    """Records the keys it reconciles."""

    def __init__(self, name: str, primary: Resource) -> None:
        self.name = name
        self.primary = primary
        self.watches = (Watch(primary, enqueue_self),)
        self.seen: list[Key] = []

    def reconcile(self, key: Key, ctx: Context) -> None:
        self.seen.append(key)


def obj(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {}}


@pytest.fixture
def parts() -> Iterator[tuple[Manager, Served, FakeApi, Recording, Recording]]:
    api = FakeApi()
    api.put(STAGE, obj("s"))
    api.put(ROLLOUT_MANAGER, obj("rm"))
    stages, plugins = Recording("stages", STAGE), Recording("plugins", ROLLOUT_MANAGER)
    served = Served(STAGE)
    manager = Manager(api=None, rest=api.rest(), discovery=served,
                      controllers=[stages, plugins],
                      options=RuntimeOptions(leader_elect=False, workers=1,
                                             crd_poll_interval=0.05))
    yield manager, served, api, stages, plugins
    manager.stop.set()


def running(manager: Manager) -> str:
    """Start the manager as a leader does; return its readiness message once ready."""
    threading.Thread(target=manager._start_controllers, daemon=True).start()

    def ready() -> str | None:
        ok, why = manager.ready()
        return why if ok else None

    return wait_for("the manager to be ready", ready, timeout=10)


def waiting(manager: Manager, controller: str, crd: str) -> float | None:
    return manager.metrics.registry.get_sample_value(
        "rollgate_reconciler_crd_waiting", {"controller": controller, "crd": crd})


def test_the_served_controller_runs_and_is_ready_while_the_other_waits(parts: Any) -> None:
    manager, _, _, stages, plugins = parts
    why = running(manager)
    assert why == "ok; waiting for CRDs: plugins (rolloutmanagers.argoproj.io)"
    wait_for("the Stage to be reconciled", lambda: Key("ns", "s") in stages.seen)
    assert set(stages.seen) == {Key("ns", "s")}
    assert plugins.seen == []
    assert waiting(manager, "plugins", "rolloutmanagers.argoproj.io") == 1
    # Nothing of the waiting controller was listed or watched.
    assert not any(i.started for i in manager.informers if i.resource == ROLLOUT_MANAGER)


def test_a_waiting_controller_starts_once_its_crd_is_served(parts: Any) -> None:
    manager, served, api, _, plugins = parts
    running(manager)
    served.resources.add(ROLLOUT_MANAGER)
    # Once or twice: the informer's first list and the start's resync may each queue it
    # (the queue merges a key only while it is pending).
    wait_for("the RolloutManager to be reconciled", lambda: Key("ns", "rm") in plugins.seen)
    assert set(plugins.seen) == {Key("ns", "rm")}
    assert manager.ready() == (True, "ok")
    assert waiting(manager, "plugins", "rolloutmanagers.argoproj.io") == 0
    # It runs like any other from then on: a new object is reconciled.
    api.put(ROLLOUT_MANAGER, obj("rm2"))
    wait_for("the new RolloutManager", lambda: Key("ns", "rm2") in plugins.seen)


def test_not_ready_until_discovery_answers(parts: Any) -> None:
    manager, served, _, stages, _ = parts
    served.fail = 3
    assert manager.ready() == (False, "looking up the CRDs of: stages, plugins")
    running(manager)  # ready once discovery answered, after its failures
    assert served.fail == 0
    wait_for("the Stage to be reconciled", lambda: Key("ns", "s") in stages.seen)
    assert set(stages.seen) == {Key("ns", "s")}


def test_missing_crds_asks_once_per_group_version_and_skips_built_in_kinds() -> None:
    from kubekit.kinds import ANALYSIS_RUN, CONFIG_MAP, DEPLOYMENT, FREIGHT
    served = Served(ANALYSIS_RUN)
    missing = missing_crds(served, [STAGE, FREIGHT, ANALYSIS_RUN, CONFIG_MAP, DEPLOYMENT,
                                    STAGE.labelled("a=b")])
    assert missing == [crd_name(STAGE), crd_name(FREIGHT)]
    assert sorted(served.asked) == [(GROUP_ARGO, VERSION_ARGO),
                                    (GROUP_KARGO, VERSION_KARGO)]


def test_once_ready_a_replica_stays_ready_while_caches_fill_again(parts: Any) -> None:
    """A standby that takes the lease fills its caches behind a 200 saying so."""
    manager, _, _, _, _ = parts
    running(manager)
    [stages] = [i for i in manager.informers if i.resource == STAGE]
    stages.synced.clear()
    assert manager.ready() == (True, "ok (ready before; now caches not synced: "
                                     "stages.kargo.akuity.io/*)")
