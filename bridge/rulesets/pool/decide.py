"""pool decisions: the Fate ledger, dice-pool checks, saves and d20 rerolls (DECISIONS.md P1-P16).

Pure: the world's state comes in as a :class:`~bridge.state.WorldState`, dice as an injected
:class:`~bridge.dice.Dice`. Every refusal is raised as a :class:`~bridge.errors.Refusal` before
anything is written. Dice are rolled before the writes too. So a refused request changes
nothing.

Records (kinds, each under one key):

- ``pool.world`` (key ``world``): whether a session is open, how many sessions started, and the
  roster of character ids.
- ``pool.config`` (key ``world``): the world's tables (P11), as ``pool_configure`` gave them.
- ``pool.character`` (by character id): the ledger. Session Fate, earned Fate, Destiny,
  stamina, level, kind and owners.
- ``pool.roll`` (by roll id): the latest state of a d20 roll the bridge rolled or rerolled. That
  is a bridge save, or a chat roll after its first reroll. So a reroll rerolls the roll that
  stands.
"""

from __future__ import annotations

import msgspec

from . import cards, wire
from ... import wire as shared
from ...ruleset import Decider, Handler, handler, rolling
from ...dice import Dice
from ...errors import BadMessage, Forbidden, Joined, NoCharges, NotEligible, NotFound, Text
from ...i18n import N_, _, rule_text
from . import rules as pool
from ...state import WorldState

RULESET = pool.RULESET
# The audit ``outcome`` values of pool's decisions in words (Ruleset.outcome_names): a check's or
# save's result, a reroll, the world's tables, and each ledger action (wire.LedgerAction).
OUTCOME_NAMES = {
    "passed": N_("Passed"), "failed": N_("Failed"), "rerolled": N_("rerolled"), "configured": N_("settings"),
    "character": N_("character entered"), "session_start": N_("session started"), "session_end": N_("session ended"),
    "rest": N_("rest"), "award": N_("Fate awarded"), "level_gained": N_("level gained"), "stamina": N_("stamina set"),
    "query": N_("ledger read"),
}
WORLD, CONFIG, CHARACTER, ROLL = "pool.world", "pool.config", "pool.character", "pool.roll"
WORLD_KEY = "world"

# The ledger card's heading per GM action.
LEDGER_TITLES = {
    "character": N_("Ledger entry"),
    "session_start": N_("Session start: 3 session Fate each"),
    "session_end": N_("Session end: session Fate is gone"),
    "rest": N_("Rest: earned Fate becomes Destiny"),
    "award": N_("Fate awarded"),
    "level_gained": N_("Level gained: Destiny resets"),
    "stamina": N_("Stamina set"),
}


class WorldRecord(msgspec.Struct, kw_only=True, frozen=True):
    """The world's session state and roster (character ids in the order they were entered)."""

    session_open: bool = False
    sessions: int = 0
    character_ids: list[str] = []


class CharacterRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One character's ledger. Only a ``pc`` ever holds Fate or Destiny (P5, P12)."""

    character_id: str
    name: str
    kind: wire.CharacterKind
    owner_user_ids: list[str]
    level: int
    stamina: int
    session_fate: int = 0
    earned_fate: int = 0
    destiny: int = 0


class RollRecord(msgspec.Struct, kw_only=True, frozen=True):
    """The d20 roll that stands for ``roll_id`` (P7).

    Its d20s by ``mode``, total and DC, and how many times it was rerolled.
    """

    roll_id: str
    character_id: str
    kind: wire.D20RollKind
    label: str | None
    mode: wire.Mode
    d20s: list[int]
    total: int
    dc: int | None
    rerolls: int = 0


# --- reading and writing records ---------------------------------------------------------------


def _world(state: WorldState) -> WorldRecord:
    return state.get(WORLD, WORLD_KEY, WorldRecord) or WorldRecord()


def _config(state: WorldState) -> wire.PoolConfig:
    return state.get(CONFIG, WORLD_KEY, wire.PoolConfig) or wire.PoolConfig()


def _character(state: WorldState, character_id: str, field: str) -> CharacterRecord:
    record = state.get(CHARACTER, character_id, CharacterRecord)
    if record is None:
        raise NotFound(N_("character %(character)s is not in the ledger: the GM enters it first"),
                       {"character": character_id}, field=field)
    return record


def _roster(state: WorldState, world: WorldRecord) -> list[CharacterRecord]:
    return [_character(state, cid, "character_ids") for cid in world.character_ids]


def _put(state: WorldState, records: list[CharacterRecord]) -> None:
    for record in records:
        state.put(CHARACTER, record.character_id, record)


def _entry(record: CharacterRecord) -> wire.PoolLedgerEntry:
    return wire.PoolLedgerEntry(
        character_id=record.character_id, name=record.name, kind=record.kind,
        owner_user_ids=record.owner_user_ids, level=record.level, tier=pool.tier_for_level(record.level),
        stamina=record.stamina, session_fate=record.session_fate, earned_fate=record.earned_fate,
        destiny=record.destiny, fate=record.session_fate + record.earned_fate,
    )


def _holds_fate(record: CharacterRecord) -> bool:
    return record.kind in pool.FATE_HOLDERS


# --- who may act -------------------------------------------------------------------------------


def _require_gm(message: wire.PoolGmRequest) -> None:
    if not message.user_is_gm:
        raise Forbidden(N_("only a GM may change the Fate ledger"), field="user_is_gm")


def _require_owner(record: CharacterRecord, user_id: str, user_is_gm: bool) -> None:
    if not user_is_gm and user_id not in record.owner_user_ids:
        raise Forbidden(N_("user %(user)s does not own %(name)r"), {"user": user_id, "name": record.name},
                        field="user_id")


def _require_fate_holder(record: CharacterRecord, field: str) -> None:
    """P5/P12: only player characters hold Fate."""
    if not _holds_fate(record):
        raise NotEligible(N_("%(name)r is a %(kind)s: only player characters have Fate (P5, P12)"),
                          {"name": record.name, "kind": Text(cards.KIND_NAMES[record.kind])}, field=field)


def _spend(record: CharacterRecord, cost: int, field: str) -> tuple[CharacterRecord, wire.PoolFateSpent]:
    """P5-P7: take ``cost`` Fate, session Fate first; ``no_charges`` when not enough is held."""
    held = record.session_fate + record.earned_fate
    if cost > held:
        raise NoCharges(N_("%(name)r holds %(held)s Fate, %(cost)s needed (Destiny is not Fate, P8)"),
                        {"name": record.name, "held": held, "cost": cost}, field=field)
    spent = pool.spend_fate(record.session_fate, record.earned_fate, cost)
    after = msgspec.structs.replace(record, session_fate=record.session_fate - spent.from_session,
                                    earned_fate=record.earned_fate - spent.from_earned)
    return after, wire.PoolFateSpent(from_session=spent.from_session, from_earned=spent.from_earned)


# --- GM: configuration and ledger --------------------------------------------------------------


def _configure(message: wire.PoolConfigure, state: WorldState, dice: Dice) -> wire.PoolConfigured:
    """P11: validate and store the world's tables."""
    _require_gm(message)
    config = message.config
    if config.stat_table is not None and (problems := pool.stat_table_problems(config.stat_table)):
        raise BadMessage(Joined(tuple(map(rule_text, problems)), "; "), field="config.stat_table")
    if config.dc_by_effect_tier is not None and (problems := pool.dc_table_problems(config.dc_by_effect_tier)):
        raise BadMessage(Joined(tuple(map(rule_text, problems)), "; "), field="config.dc_by_effect_tier")
    state.put(CONFIG, WORLD_KEY, config)
    return wire.PoolConfigured(event_id=message.event_id, config=config)


def _ledger_reply(message: wire.PoolGmRequest, action: wire.LedgerAction, world: WorldRecord,
                  records: list[CharacterRecord]) -> wire.PoolLedger:
    title = _(LEDGER_TITLES[action])
    card = cards.render_card("pool_ledger.html.j2", title=title, ruleset=RULESET, action=action,
                             characters=[_entry(r) for r in records], user_name=message.user_name)
    return wire.PoolLedger(event_id=message.event_id, action=action, session_open=world.session_open,
                           characters=[_entry(r) for r in records], card=card)


def _enter_character(message: wire.PoolCharacter, state: WorldState, dice: Dice) -> wire.PoolLedger:
    """Enter or update a character.

    Fate and Destiny are kept for a player character, and zero for a retainer or follower (P12). A
    player character entered during an open session gets that session's 3 session Fate at once (P5,
    P16). That holds for a new one, and for a retainer or follower entered again as a player
    character. A player character entered again keeps its ledger.
    """
    _require_gm(message)
    world = _world(state)
    known = state.get(CHARACTER, message.character_id, CharacterRecord)
    is_pc = message.kind in pool.FATE_HOLDERS
    if known is None:
        session_fate = pool.SESSION_FATE if is_pc and world.session_open else 0
        earned_fate = destiny = 0
        world = msgspec.structs.replace(world, character_ids=[*world.character_ids, message.character_id])
        state.put(WORLD, WORLD_KEY, world)
    elif is_pc and known.kind not in pool.FATE_HOLDERS:
        session_fate = pool.SESSION_FATE if world.session_open else 0
        earned_fate = destiny = 0
    else:
        session_fate, earned_fate, destiny = (known.session_fate, known.earned_fate, known.destiny) if is_pc else (0, 0, 0)
    record = CharacterRecord(
        character_id=message.character_id, name=message.name, kind=message.kind,
        owner_user_ids=list(message.owner_user_ids), level=message.level, stamina=message.stamina,
        session_fate=session_fate, earned_fate=earned_fate, destiny=destiny,
    )
    _put(state, [record])
    return _ledger_reply(message, "character", world, [record])


def _session_start(message: wire.PoolSessionStart, state: WorldState, dice: Dice) -> wire.PoolLedger:
    """P5: every player character's session Fate becomes 3; what was left of the old is gone."""
    _require_gm(message)
    world = _world(state)
    world = msgspec.structs.replace(world, session_open=True, sessions=world.sessions + 1)
    pcs = [msgspec.structs.replace(r, session_fate=pool.SESSION_FATE)
           for r in _roster(state, world) if _holds_fate(r)]
    state.put(WORLD, WORLD_KEY, world)
    _put(state, pcs)
    return _ledger_reply(message, "session_start", world, pcs)


def _session_end(message: wire.PoolSessionEnd, state: WorldState, dice: Dice) -> wire.PoolLedger:
    """P5: the session's leftover session Fate is gone; earned Fate stays."""
    _require_gm(message)
    world = msgspec.structs.replace(_world(state), session_open=False)
    pcs = [msgspec.structs.replace(r, session_fate=0) for r in _roster(state, world) if _holds_fate(r)]
    state.put(WORLD, WORLD_KEY, world)
    _put(state, pcs)
    return _ledger_reply(message, "session_end", world, pcs)


def _listed_pcs(state: WorldState, world: WorldRecord, character_ids: list[str]) -> list[CharacterRecord]:
    """The listed characters, each a player character; ``not_eligible`` otherwise (P12).

    When none is listed: every player character.
    """
    if not character_ids:
        return [r for r in _roster(state, world) if _holds_fate(r)]
    records = [_character(state, cid, "character_ids") for cid in dict.fromkeys(character_ids)]
    for record in records:
        _require_fate_holder(record, "character_ids")
    return records


def _rest(message: wire.PoolRest, state: WorldState, dice: Dice) -> wire.PoolLedger:
    """P8: earned Fate becomes Destiny; session Fate is not converted."""
    _require_gm(message)
    world = _world(state)
    rested = []
    for record in _listed_pcs(state, world, message.character_ids):
        earned, destiny = pool.rest(record.earned_fate, record.destiny)
        rested.append(msgspec.structs.replace(record, earned_fate=earned, destiny=destiny))
    _put(state, rested)
    return _ledger_reply(message, "rest", world, rested)


def _award(message: wire.PoolAward, state: WorldState, dice: Dice) -> wire.PoolLedger:
    """P5: a GM award is earned Fate.

    An award to a retainer or follower is refused whole (P12, P16).
    """
    _require_gm(message)
    world = _world(state)
    awarded = [msgspec.structs.replace(r, earned_fate=r.earned_fate + message.amount)
               for r in _listed_pcs(state, world, message.character_ids)]
    _put(state, awarded)
    return _ledger_reply(message, "award", world, awarded)


def _level_gained(message: wire.PoolLevelGained, state: WorldState, dice: Dice) -> wire.PoolLedger:
    """P8/P16: level + 1, and Destiny back to 0.

    A level costs at least 1 Destiny. Refused at 0 Destiny, at the top level (10), and for a
    retainer or follower, who holds none.
    """
    _require_gm(message)
    record = _character(state, message.character_id, "character_id")
    _require_fate_holder(record, "character_id")
    if record.level >= pool.MAX_LEVEL:
        raise NotEligible(N_("%(name)r is at level %(level)s, the last of Tier %(tier)s"),
                          {"name": record.name, "level": pool.MAX_LEVEL, "tier": pool.MAX_TIER},
                          field="character_id")
    try:
        level, destiny = pool.gain_level(record.level, record.destiny)
    except ValueError as exc:
        raise NotEligible(rule_text(exc), field="character_id") from None
    record = msgspec.structs.replace(record, level=level, destiny=destiny)
    _put(state, [record])
    return _ledger_reply(message, "level_gained", _world(state), [record])


def _set_stamina(message: wire.PoolSetStamina, state: WorldState, dice: Dice) -> wire.PoolLedger:
    """The GM sets a character's stamina."""
    _require_gm(message)
    record = msgspec.structs.replace(_character(state, message.character_id, "character_id"),
                                     stamina=message.stamina)
    _put(state, [record])
    return _ledger_reply(message, "stamina", _world(state), [record])


def _query(message: wire.PoolLedgerQuery, state: WorldState, dice: Dice) -> wire.PoolLedger:
    """Read ledger entries: a GM any, a player its own characters. Writes nothing."""
    world = _world(state)
    if message.character_ids:
        records = [_character(state, cid, "character_ids") for cid in dict.fromkeys(message.character_ids)]
        for record in records:
            _require_owner(record, message.user_id, message.user_is_gm)
    else:
        records = [r for r in _roster(state, world) if message.user_is_gm or message.user_id in r.owner_user_ids]
    return wire.PoolLedger(event_id=message.event_id, action="query", session_open=world.session_open,
                           characters=[_entry(r) for r in records])


# --- checks: P1-P4, P6, P10, P12 ---------------------------------------------------------------


def _stat_row(config: wire.PoolConfig, score: int, field: str) -> wire.PoolStatRow:
    """P11: the configured row of a stat score; ``not_found`` when the world has none for it."""
    row = pool.stat_row(score, config.stat_table or [])
    if row is None:
        raise NotFound(N_("the world's stat table has no row for score %(score)s (P11: the GM configures it)"),
                       {"score": score}, field=field)
    return row


def _stat_modifier(message: wire.PoolCheck, config: wire.PoolConfig) -> int:
    if (message.stat_modifier is None) == (message.stat_score is None):
        raise BadMessage(N_("give exactly one of stat_modifier and stat_score"), field="stat_modifier")
    if message.stat_modifier is not None:
        return message.stat_modifier
    assert message.stat_score is not None  # exactly one of the two, checked above
    return _stat_row(config, message.stat_score, "stat_score").modifier


def _check(message: wire.PoolCheck, state: WorldState, dice: Dice) -> wire.PoolCheckRolled:
    """P1-P4, P6, P10, P12: buy dice, roll the pool with explosions, settle the 1s, grade."""
    record = _character(state, message.character_id, "character_id")
    _require_owner(record, message.user_id, message.user_is_gm)
    config = _config(state)
    stat_modifier = _stat_modifier(message, config)
    if message.fate:
        _require_fate_holder(record, "fate")
    record, fate_spent = _spend(record, message.fate, "fate")
    tier = pool.tier_for_level(record.level)
    mode = pool.roll_mode(message.advantage_sources, message.disadvantage_sources)
    threshold = pool.success_threshold(stat_modifier, mode)
    size = pool.pool_size(stat_modifier, tier, message.fate)
    if size > pool.MAX_POOL:
        raise BadMessage(N_("a pool of %(size)s dice is more than the %(most)s the bridge rolls: "
                            "check the stat and the Fate dice bought"), {"size": size, "most": pool.MAX_POOL},
                         field="fate" if message.fate else "stat_modifier" if message.stat_modifier is not None else "stat_score")
    faces = rolling(lambda: pool.roll_pool(size, dice))

    ones = pool.pay_ones(faces.count(pool.STAMINA_FACE), record.stamina, _holds_fate(record),
                         config.narrative_consequences)
    paid = iter(ones.paid)
    rolled = [wire.PoolDie(face=face, explosion=index >= size, success=face >= threshold,
                           paid=next(paid) if face == pool.STAMINA_FACE else None)
              for index, face in enumerate(faces)]
    record = msgspec.structs.replace(record, stamina=record.stamina - ones.stamina_lost,
                                     earned_fate=record.earned_fate + ones.fate_gained)
    successes = pool.count_successes(faces, threshold)
    needed = message.successes_needed or message.task_tier
    task_name = pool.task_tier_name(message.task_tier, config.task_tier_names)
    passed = pool.passes(successes, needed)
    entry = _entry(record)
    card = cards.render_card(
        "pool_check.html.j2", ruleset=RULESET,
        title=_("%(name)s: %(roll)s") % {"name": record.name, "roll": message.label or _("Check")},
        speaker_actor_id=record.character_id, speaker_alias=record.name,
        stat_modifier=stat_modifier, tier=tier, bought=message.fate, size=size, mode=mode,
        threshold=threshold, dice=rolled, successes=successes, task_tier=message.task_tier,
        task_name=task_name and _(task_name), needed=needed, passed=passed, fate_spent=fate_spent,
        stamina_lost=ones.stamina_lost, fate_gained=ones.fate_gained,
        narrative=config.narrative_consequences and _holds_fate(record), character=entry,
        user_name=message.user_name,
    )
    _put(state, [record])
    return wire.PoolCheckRolled(
        event_id=message.event_id, character_id=record.character_id, label=message.label,
        stat_modifier=stat_modifier, tier=tier, bought=message.fate, pool_size=size, mode=mode,
        threshold=threshold, dice=rolled, successes=successes, task_tier=message.task_tier,
        task_name=task_name, needed=needed, passed=passed,
        pass_chance=pool.chance_to_pass(size, threshold, needed), fate_spent=fate_spent,
        stamina_lost=ones.stamina_lost, fate_gained=ones.fate_gained, character=entry, card=card,
    )


# --- saves: P9 ---------------------------------------------------------------------------------


def _save_dc(message: wire.PoolSave, config: wire.PoolConfig) -> int:
    if (message.dc is None) == (message.effect_tier is None):
        raise BadMessage(N_("give exactly one of dc and effect_tier"), field="dc")
    if message.dc is not None:
        return message.dc
    if config.dc_by_effect_tier is None:
        raise NotFound(N_("the world has no DC-by-effect-tier table (P11: the GM configures it)"),
                       field="effect_tier")
    assert message.effect_tier is not None  # exactly one of the two, checked above
    return config.dc_by_effect_tier[message.effect_tier - 1]


def _save(message: wire.PoolSave, state: WorldState, dice: Dice) -> wire.PoolSaveRolled:
    """P9: d20 + the save stat's die + the Fate die + Tier + bonus, vs DC.

    The d20 is 2d20 keep higher/lower at advantage/disadvantage. On a Fate save the Fate die is
    rolled once. Rolled in this order: d20s, stat die, Fate die. Every roller adds its Tier,
    retainers and followers included (P15).
    """
    record = _character(state, message.character_id, "character_id")
    _require_owner(record, message.user_id, message.user_is_gm)
    config = _config(state)
    fate_die = _stat_row(config, message.fate_score, "fate_score").die
    if message.save == pool.FATE_SAVE:
        stat_die, other_die = fate_die, None
    elif message.stat_score is None:
        raise BadMessage(N_("a %(save)s needs stat_score"), {"save": Text(cards.SAVE_LABELS[message.save])},
                         field="stat_score")
    else:
        stat_die, other_die = _stat_row(config, message.stat_score, "stat_score").die, fate_die
    dc = _save_dc(message, config)
    mode = pool.roll_mode(message.advantage_sources, message.disadvantage_sources)

    def roll() -> tuple[list[int], int, int | None]:
        d20s = pool.roll_d20s(mode, dice)
        stat_value = pool.roll_stat_die(stat_die, dice)
        return d20s, stat_value, None if other_die is None else pool.roll_stat_die(other_die, dice)

    d20s, stat_value, fate_value = rolling(roll)
    kept = pool.kept_d20(d20s, mode)
    tier = pool.tier_for_level(record.level)
    total = pool.save_total(kept, stat_value, fate_value or 0, tier, message.bonus)
    passed = pool.save_passes(total, dc)
    label = message.label or cards.SAVE_LABELS[message.save]
    state.put(ROLL, message.event_id, RollRecord(
        roll_id=message.event_id, character_id=record.character_id, kind="save", label=label,
        mode=mode, d20s=d20s, total=total, dc=dc))
    entry = _entry(record)
    card = cards.render_card(
        "pool_save.html.j2", title=cards.roll_title(record.name, label, "save"), ruleset=RULESET,
        speaker_actor_id=record.character_id, speaker_alias=record.name, roll_id=message.event_id,
        mode=mode, d20s=d20s, kept=kept, stat_die=stat_die, stat_value=stat_value, fate_die=other_die,
        fate_value=fate_value, tier=tier, bonus=message.bonus, total=total, dc=dc, passed=passed,
        can_reroll=_holds_fate(record), character=entry, user_name=message.user_name,
    )
    return wire.PoolSaveRolled(
        event_id=message.event_id, roll_id=message.event_id, character_id=record.character_id,
        label=label, save=message.save, mode=mode, d20s=d20s, kept=kept,
        stat_die=[stat_die, stat_value], fate_die=None if other_die is None or fate_value is None else [other_die, fate_value],
        tier=tier, bonus=message.bonus, total=total, dc=dc, passed=passed, character=entry, card=card,
    )


# --- rerolls: P7 -------------------------------------------------------------------------------


def _standing_roll(message: wire.PoolReroll, state: WorldState) -> RollRecord:
    """The roll that stands for ``roll_id``: the bridge's own, or the chat roll's snapshot."""
    stored = state.get(ROLL, message.roll_id, RollRecord)
    if stored is not None:
        return stored
    snapshot = message.roll
    if snapshot is None:
        raise NotFound(N_("no d20 roll %(roll)s is known: send the roll with it"), {"roll": message.roll_id},
                       field="roll_id")
    try:
        pool.kept_d20(snapshot.d20s, snapshot.mode)
    except ValueError as exc:
        raise BadMessage(rule_text(exc), field="roll.d20s") from None
    return RollRecord(roll_id=message.roll_id, character_id=snapshot.character_id, kind=snapshot.kind,
                      label=snapshot.label, mode=snapshot.mode, d20s=list(snapshot.d20s),
                      total=snapshot.total, dc=snapshot.dc)


def _reroll(message: wire.PoolReroll, state: WorldState, dice: Dice) -> wire.PoolRerolled:
    """P7: 1 Fate (session first) rerolls the d20s of the roll that stands, keeping its mode.

    Only the kept d20 changes the total. The new roll stands, and may be rerolled again.
    """
    before = _standing_roll(message, state)
    field = "roll_id" if message.roll is None else "roll.character_id"
    record = _character(state, before.character_id, field)
    _require_owner(record, message.user_id, message.user_is_gm)
    _require_fate_holder(record, "roll_id")
    record, fate_spent = _spend(record, pool.FATE_PER_REROLL, "roll_id")
    d20s = rolling(lambda: pool.roll_d20s(before.mode, dice))
    kept_before, kept = pool.kept_d20(before.d20s, before.mode), pool.kept_d20(d20s, before.mode)
    total = pool.rerolled_total(before.total, kept_before, kept)
    passed = None if before.dc is None else pool.save_passes(total, before.dc)
    after = msgspec.structs.replace(before, d20s=d20s, total=total, rerolls=before.rerolls + 1)
    state.put(ROLL, message.roll_id, after)
    _put(state, [record])
    entry = _entry(record)
    card = cards.render_card(
        "pool_reroll.html.j2", title=_("%(roll)s rerolled") % {"roll": cards.roll_title(record.name, before.label, before.kind)},
        ruleset=RULESET, speaker_actor_id=record.character_id, speaker_alias=record.name,
        roll_id=message.roll_id, mode=before.mode, d20s_before=before.d20s, kept_before=kept_before,
        total_before=before.total, d20s=d20s, kept=kept, total=total, dc=before.dc, passed=passed,
        rerolls=after.rerolls, fate_spent=fate_spent, character=entry, user_name=message.user_name,
    )
    return wire.PoolRerolled(
        event_id=message.event_id, roll_id=message.roll_id, character_id=record.character_id,
        kind=before.kind, label=before.label, mode=before.mode, d20s_before=before.d20s,
        kept_before=kept_before, total_before=before.total, d20s=d20s, kept=kept, total=total,
        dc=before.dc, passed=passed, rerolls=after.rerolls, fate_spent=fate_spent, character=entry,
        card=card,
    )


# Wrapped below the summarizer (every decision's Outcome: reply, columns, public card, log).
_DECIDERS: dict[type, Decider] = {
    wire.PoolConfigure: _configure,
    wire.PoolCharacter: _enter_character,
    wire.PoolSessionStart: _session_start,
    wire.PoolSessionEnd: _session_end,
    wire.PoolRest: _rest,
    wire.PoolAward: _award,
    wire.PoolLevelGained: _level_gained,
    wire.PoolSetStamina: _set_stamina,
    wire.PoolLedgerQuery: _query,
    wire.PoolCheck: _check,
    wire.PoolSave: _save,
    wire.PoolReroll: _reroll,
}


def _fate_line(entry: wire.PoolLedgerEntry) -> str:
    return (f"{entry.name}: Fate {entry.session_fate}+{entry.earned_fate}, Destiny {entry.destiny}, "
            f"stamina {entry.stamina}, level {entry.level}")


def summarize(message: shared.ClientMessage, reply: wire.BridgeMessage) -> shared.AuditColumns:
    """The audit columns of a pool decision, read after it from the same transaction.

    The character, what was rolled, the outcome word, and one line of the ledger after.
    """
    match reply:
        case wire.PoolCheckRolled():
            return shared.AuditColumns(
                ruleset=RULESET, actor_id=reply.character_id, actor_name=reply.character.name,
                test_name=reply.label or "Check", outcome="passed" if reply.passed else "failed",
                detail=(f"{reply.pool_size}d6 on {reply.threshold}+: {reply.successes} vs {reply.needed}; "
                        f"{_fate_line(reply.character)}"),
            )
        case wire.PoolSaveRolled():
            return shared.AuditColumns(
                ruleset=RULESET, message_id=reply.roll_id, actor_id=reply.character_id,
                actor_name=reply.character.name, test_name=reply.label,
                outcome="passed" if reply.passed else "failed", fate_roll=reply.kept,
                detail=f"total {reply.total} vs DC {reply.dc}",
            )
        case wire.PoolRerolled():
            return shared.AuditColumns(
                ruleset=RULESET, message_id=reply.roll_id, actor_id=reply.character_id,
                actor_name=reply.character.name, test_name=reply.label or reply.kind, outcome="rerolled",
                fate_roll=reply.kept, point_name="session Fate" if reply.fate_spent.from_session else "earned Fate",
                detail=f"d20 {reply.kept_before} -> {reply.kept}, total {reply.total_before} -> {reply.total}; "
                       f"{_fate_line(reply.character)}",
            )
        case wire.PoolLedger():
            one = reply.characters[0] if len(reply.characters) == 1 else None
            return shared.AuditColumns(
                ruleset=RULESET, actor_id=None if one is None else one.character_id,
                actor_name=None if one is None else one.name,
                outcome=reply.action, detail="; ".join(_fate_line(e) for e in reply.characters) or None,
            )
        case wire.PoolConfigured():
            return shared.AuditColumns(ruleset=RULESET, outcome="configured")
        case shared.Error():
            return shared.AuditColumns(
                ruleset=RULESET, message_id=getattr(message, "roll_id", None),
                actor_id=getattr(message, "character_id", None), outcome=reply.code,
            )
    raise TypeError(f"not a pool reply: {type(reply).__name__}")


HANDLERS: dict[type, Handler] = {kind: handler(decide, summarize) for kind, decide in _DECIDERS.items()}


def refused(message: shared.ClientMessage, error: shared.Error, state: WorldState) -> shared.AuditColumns:
    """The audit columns of a refused pool request (from the request alone)."""
    return summarize(message, error)
