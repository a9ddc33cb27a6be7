"""The refusal of a ``physical`` list that runs out, as the Foundry module reads it (issue 19).

The module (foundry-module/scripts/logic/dice-trust.js ``nextPhysicalDie``) asks the roller for the
next die from this refusal alone: code ``bad_message``, field ``physical``, and the text ending in
the die's range ``(1..F)``; then it sends the request again with one more die under a new
``event_id``, because the refused ``event_id`` is answered from its stored refusal. These tests pin
both, so a change of either on the bridge side breaks here and not in a player's browser.
"""

from __future__ import annotations

import re

from .test_fair_dice import fair, frames, ok, settings  # noqa: F401  (fair is a fixture)
from . import pool_messages as pool

# The module's reading of the refusal (dice-trust.js nextPhysicalDie).
NEXT_DIE = re.compile(r"\(1\.\.(\d+)\)$")


async def test_an_exploding_six_names_the_next_d6_and_a_new_event_id_takes_the_longer_list(fair):
    await ok(fair, settings(physical_rulesets=["pool"]))
    await ok(fair, pool.configure())
    await ok(fair, pool.character())
    await ok(fair, pool.gm("pool_session_start", "ev-pool-start"))
    # Aldric's pool: stat modifier +1 and his Tier (level 3: Tier 2, P6): 3d6; the 6 explodes: a fourth d6.
    refused = await frames(fair, pool.check("ev-p1", stat_modifier=1, physical=[6, 3]))
    assert (refused["code"], refused["field"]) == ("bad_message", "physical")
    assert "die 3 is a d6" in refused["message"]
    assert NEXT_DIE.search(refused["message"]).group(1) == "6"
    again = await frames(fair, pool.check("ev-p1", stat_modifier=1, physical=[6, 3, 2]))
    assert again == refused, "a refused event_id is answered from its stored refusal, whatever it carries now"
    explosion = await frames(fair, pool.check("ev-p2", stat_modifier=1, physical=[6, 3, 2]))
    assert ("die 4 is a d6" in explosion["message"], NEXT_DIE.search(explosion["message"]).group(1)) == (True, "6")
    rolled = await ok(fair, pool.check("ev-p3", stat_modifier=1, physical=[6, 3, 2, 5]))
    assert [(d["face"], d["explosion"]) for d in rolled["dice"]] == [(6, False), (3, False), (2, False), (5, True)]
    assert [r["source"] for r in rolled["rolls"]] == ["physical"] * 4

async def test_an_impossible_value_is_not_read_as_a_die_that_runs_out(fair):
    await ok(fair, settings(physical_rulesets=["pool"]))
    await ok(fair, pool.configure())
    await ok(fair, pool.character())
    refused = await frames(fair, pool.check("ev-p3", stat_modifier=1, physical=[7, 3]))
    assert refused["field"] == "physical[0]"
