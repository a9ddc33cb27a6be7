"""``GET /metrics`` (issue 27): a real served bridge, on both backends, counts its decisions and
refusals by ruleset and code, their latency, its batches, connections, worlds in memory and
world loads, in the Prometheus text format under the same names; it answers this machine or a
world's token, as ``/status`` does."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge import server as bridge_server
from bridge.dice import ScriptedDice
from bridge.metrics import Metrics
from bridge.startup import lan_addresses

from .test_server import archery_test_rolled, ask, fate_spend
from .test_status import gm_link, two_worlds  # noqa: F401 (a fixture)

NAMES = {"fate_bridge_decisions", "fate_bridge_refusals", "fate_bridge_decision_seconds",
         "fate_bridge_batch_decisions", "fate_bridge_connections", "fate_bridge_worlds_in_memory",
         "fate_bridge_world_loads", "fate_bridge_world_load_seconds", "fate_bridge_lease_takeovers",
         "fate_bridge_storage_available"}


def scrape(url: str, token: str | None = None) -> tuple[int, str, str]:
    """(status code, Content-Type, body) of ``GET url``."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, refused.headers["Content-Type"], refused.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition: (sample name, sorted labels) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


class TestMetrics:
    async def test_a_served_bridge_counts_decisions_refusals_batches_and_connections(self, store, two_worlds):
        server = await bridge_server.start(store, "127.0.0.1", 0, dice=ScriptedDice([]))
        port = server.sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            ws = await gm_link(f"ws://127.0.0.1:{port}", "table-a", two_worlds["table-a"])
            assert (await ask(ws, archery_test_rolled("ev-1", "msgArchery0001")))["type"] == "test_graded"
            assert (await ask(ws, archery_test_rolled("ev-2", "msgArchery0002")))["type"] == "test_graded"
            refused = await ask(ws, fate_spend("ev-3", "msgUnknown00001"))  # no such test: not_found
            assert (refused["type"], refused["code"]) == ("error", "not_found")
            again = await ask(ws, archery_test_rolled("ev-1", "msgArchery0001"))  # a replay
            assert again["type"] == "test_graded"

            code, kind, text = await asyncio.to_thread(scrape, url)
            assert code == 200 and kind.startswith("text/plain; version=")
            got = samples(text)
            families = {f.name for f in text_string_to_metric_families(text)}
            assert {name for name in families if not name.endswith("_created")} == NAMES
            decisions = {labels: value for (name, labels), value in got.items() if name == "fate_bridge_decisions_total"}
            assert decisions == {(("result", "ok"), ("ruleset", "sohl")): 2.0,
                                 (("result", "refused"), ("ruleset", "sohl")): 1.0,
                                 (("result", "replayed"), ("ruleset", "sohl")): 1.0}
            refusals = {labels: value for (name, labels), value in got.items() if name == "fate_bridge_refusals_total"}
            assert refusals == {(("code", "not_found"), ("ruleset", "sohl")): 1.0}
            assert got[("fate_bridge_decision_seconds_count", ())] == 4.0
            assert got[("fate_bridge_decision_seconds_sum", ())] > 0
            assert got[("fate_bridge_batch_decisions_count", ())] > 0
            assert got[("fate_bridge_batch_decisions_sum", ())] == 4.0  # every decision, replays too, in a batch
            assert got[("fate_bridge_world_loads_total", ())] == 1.0  # table-a, once
            assert got[("fate_bridge_world_load_seconds_count", ())] == 1.0
            assert got[("fate_bridge_worlds_in_memory", ())] == 1.0
            assert got[("fate_bridge_connections", ())] == 2.0  # the GM's link and this scrape's own
            assert got[("fate_bridge_storage_available", ())] == 1.0
            assert got[("fate_bridge_lease_takeovers_total", ())] == 0.0
            await ws.close()
        finally:
            server.close()
            await server.wait_closed()

    async def test_from_another_machine_only_with_a_token(self, store, two_worlds):
        addresses = lan_addresses()
        if not addresses:
            pytest.skip("this machine has no non-loopback address to ask /metrics from")
        server = await bridge_server.start(store, "0.0.0.0", 0)
        port = server.sockets[0].getsockname()[1]
        url = f"http://{addresses[0]}:{port}/metrics"
        try:
            code, _, text = await asyncio.to_thread(scrape, url)
            assert code == 401 and "/metrics answers this machine" in text and "fate_bridge_" not in text
            code, _, text = await asyncio.to_thread(scrape, url, "not-a-token")
            assert code == 401 and "no registered world's token" in text
            code, _, text = await asyncio.to_thread(scrape, url, two_worlds["table-b"])
            assert code == 200 and "fate_bridge_decisions_total" in text
        finally:
            server.close()
            await server.wait_closed()

    async def test_through_a_proxy_on_this_machine_needs_a_token(self, store, two_worlds):
        server = await bridge_server.start(store, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                         headers={"X-Forwarded-For": "203.0.113.9"})
        try:
            def fetch() -> int:
                try:
                    with urllib.request.urlopen(request, timeout=30) as resp:
                        return resp.status
                except urllib.error.HTTPError as refused:
                    with refused:
                        return refused.code
            assert await asyncio.to_thread(fetch) == 401
        finally:
            server.close()
            await server.wait_closed()

    def test_two_servers_in_one_process_keep_their_own_counts(self):
        first, second = Metrics(lambda: 0.0, lambda: 3), Metrics(lambda: 0.0)
        first.decided("sohl", None, False, 0.002)
        first.decided("hmtw", "not_eligible", False, 0.001)
        first.failed(None)  # a shared message failed: its error reply's code is internal
        first.lease_taken()
        one, two = samples(first.exposition().decode()), samples(second.exposition().decode())
        assert one[("fate_bridge_decisions_total", (("result", "ok"), ("ruleset", "sohl")))] == 1.0
        assert one[("fate_bridge_refusals_total", (("code", "not_eligible"), ("ruleset", "hmtw")))] == 1.0
        assert one[("fate_bridge_refusals_total", (("code", "internal"), ("ruleset", "shared")))] == 1.0
        assert one[("fate_bridge_decisions_total", (("result", "refused"), ("ruleset", "hmtw")))] == 1.0
        assert one[("fate_bridge_decision_seconds_count", ())] == 2.0
        assert one[("fate_bridge_lease_takeovers_total", ())] == 1.0
        assert one[("fate_bridge_connections", ())] == 3.0
        assert two[("fate_bridge_decision_seconds_count", ())] == 0.0
        assert two[("fate_bridge_lease_takeovers_total", ())] == 0.0
        assert not [key for key in two if key[0] == "fate_bridge_decisions_total"]
