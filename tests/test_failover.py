"""Failover and rolling restart of three ``fate-bridge serve`` processes on one PostgreSQL database,
under load (issue 28): the bounded versions of ``python -m bench --scale --failover`` and
``--rolling`` (bench/failover.py: each world's client follows the Foundry module's reconnect rules,
behind a round-robin balancer that skips a process refusing connections). Asserted: where the
links went and the counts that must be 0 (acknowledged decisions lost, decided twice, results
fated twice, failed requests, queued clicks sent twice) and ``audit verify``; the seconds from a
link's close to its world's next decided reply are printed (``pytest -s``), never asserted.
Skipped (or failed, with FATE_BRIDGE_REQUIRE_SERVICES=1) without a PostgreSQL server."""

from __future__ import annotations

from bench.failover import BACKOFF_MIN_S, failover, rolling, summary

WORLDS = 6  # two per process: the balancer spreads the first links in turn
DECISIONS = 5  # replies per world before the first stop, and between steps
PACE = 0.1  # seconds between a world's results (a busy table, faster than any): a few hundred decisions


def assert_nothing_lost_or_doubled(outcome) -> None:
    assert outcome.acked > 0
    assert (outcome.lost, outcome.decided_twice, outcome.fated_twice, outcome.failed) == ([], [], [], [])
    assert outcome.queued_sent_twice == []
    assert outcome.verify_ok, outcome.verify_output


async def test_kill_9_of_one_of_three_processes_under_load_loses_no_acknowledged_decision(pg_server, tmp_path):
    """Each world of the killed process is decided on another once its module reconnects: the
    new hello takes the dead process's lease at once (no expiry to wait for)."""
    outcome = await failover(pg_server, tmp_path, WORLDS, DECISIONS, PACE)
    print(summary("kill -9 of one of 3 processes", outcome))

    assert len(outcome.handovers) == WORLDS // 3
    for handover in outcome.handovers:  # the module waited its first backoff, then landed elsewhere
        assert (handover.code, handover.waited) == (1006, BACKOFF_MIN_S)
        assert handover.port_to != handover.port_from
    assert outcome.queued >= WORLDS // 3  # a GM's click while its link was down: sent once, after
    assert_nothing_lost_or_doubled(outcome)


async def test_a_rolling_restart_of_all_three_under_load_fails_no_request(pg_server, tmp_path):
    """Each process in turn drained with SIGTERM (exit 0) and started again: every world's link
    is closed 1012 at least once and lands on another process; nothing fails or is decided
    twice, and a click made during each hand-over is sent once."""
    outcome = await rolling(pg_server, tmp_path, WORLDS, DECISIONS, PACE)
    print(summary("rolling restart of 3 processes", outcome))

    assert outcome.exits == [0, 0, 0]
    assert len({h.world_id for h in outcome.handovers}) == WORLDS
    assert {h.code for h in outcome.handovers} == {1012}
    assert all(h.port_to != h.port_from for h in outcome.handovers)
    assert outcome.queued >= WORLDS
    assert_nothing_lost_or_doubled(outcome)
