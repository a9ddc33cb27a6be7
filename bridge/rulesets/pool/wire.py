"""pool: dice-pool checks, Fate and Destiny (seed 004; docs/rules.md P1-P16).

The game has no Foundry system. The bridge keeps every character's ledger: session Fate, earned
Fate, Destiny, stamina, level. It rolls checks, saves and d20 rerolls with its own dice. GM
requests carry ``user_is_gm``: Foundry's ``user.isGM``, filled by the GM's module. A character's
rolls may be asked for by its owners or a GM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from msgspec import Meta

from . import rules as _pool_rules
from .rules import MAX_LEVEL, MAX_TIER
from ...wire.base import BridgeMessage, Card, Id, Name, OutPart, Part, UserRequest, Visibility

__all__ = [
    "PoolGmRequest", "PoolStatRow", "PoolConfig", "PoolConfigure", "PoolConfigured", "PoolCharacter",
    "PoolSessionStart", "PoolSessionEnd", "PoolRest", "PoolAward", "PoolLevelGained", "PoolSetStamina",
    "PoolLedgerQuery", "PoolLedgerEntry", "PoolLedger", "PoolRoller", "PoolCheck", "PoolFateSpent",
    "PoolDie", "PoolCheckRolled", "PoolSave", "PoolSaveRolled", "PoolD20Roll", "PoolReroll",
    "PoolRerolled",
]  # the aliases below (Mode, Tier, ...) stay here: other rulesets may use the same words

# A Literal built from a rules table: msgspec and the schemas read it at run time; to a type
# checker, which cannot evaluate it, the value is a str.
if TYPE_CHECKING:
    CharacterKind = str
    SaveName = str
    D20RollKind = str
else:
    CharacterKind = Literal[_pool_rules.CHARACTER_KINDS]
    SaveName = Literal[_pool_rules.SAVES]
    D20RollKind = Literal[_pool_rules.D20_ROLL_KINDS]
Mode = Literal["normal", "advantage", "disadvantage"]
LedgerAction = Literal["character", "session_start", "session_end", "rest", "award", "level_gained",
                       "stamina", "query"]

# Wire limits (not rules): keep one frame from asking for absurd pools or tables.
Level = Annotated[int, Meta(ge=1, le=MAX_LEVEL, description="A level, 1..10 (the seed's Tiers 1-5).")]
Tier = Annotated[int, Meta(ge=1, le=MAX_TIER, description="A task or effect tier, 1 (Basic) .. 5 (Legendary).")]
Count = Annotated[int, Meta(ge=0, le=99, description="A small count: dice, Fate, stamina, sources.")]
StatValue = Annotated[int, Meta(ge=-99, le=99, description="A stat score, modifier or bonus.")]
D20 = Annotated[int, Meta(ge=1, le=20, description="A d20 result, 1..20.")]
Sources = Annotated[int, Meta(ge=0, le=9, description="How many sources (P13: any number counts once).")]

RollVisibility = Annotated[Visibility, Meta(description=(
    "Who sees the result: the roll mode of the ChatMessage that shows it (a check or save: the mode "
    "typed, else the asker's; a reroll: the rolled message's). Only `public` reaches the stream "
    "overlay; absent or null (a module older than this field) is not public."))]
CharacterIds = Annotated[list[Id], Meta(max_length=64)]


class PoolGmRequest(UserRequest, kw_only=True, frozen=True):
    """Base of the GM's ledger requests: refused with ``forbidden`` unless ``user_is_gm``."""

    user_name: Name | None = None
    user_is_gm: bool = False


class PoolStatRow(Part, kw_only=True, frozen=True):
    """One row of the world's stat table (P11).

    Scores from ``min_score`` up to the next row's have the signed stat ``die`` and the flat
    ``modifier``. ``die``: 6 = d6, -4 = a negative d4, 0 = no die.
    """

    min_score: StatValue
    die: Annotated[int, Meta(ge=-12, le=12)]
    modifier: StatValue


class PoolConfig(Part, kw_only=True, frozen=True):
    """The tables the seed lacks, as the GM gives them (P11); null = not configured.

    Nothing is invented in place of a null.

    - ``task_tier_names``: the names of task tiers 2, 3, 4. 1 is Basic, 5 Legendary.
    - ``dc_by_effect_tier``: the DCs of effect tiers 1..5.
    - ``stat_table``: score -> die and modifier, rows in rising ``min_score``.
    - ``narrative_consequences``: the GM option P10.
    """

    task_tier_names: Annotated[list[Name], Meta(min_length=3, max_length=3)] | None = None
    dc_by_effect_tier: Annotated[list[Annotated[int, Meta(ge=1, le=99)]], Meta(min_length=5, max_length=5)] | None = None
    stat_table: Annotated[list[PoolStatRow], Meta(min_length=1, max_length=64)] | None = None
    narrative_consequences: bool = False


class PoolConfigure(PoolGmRequest, tag="pool_configure", kw_only=True, frozen=True):
    """The GM sets the world's pool configuration (replacing the whole of it). Answered with
    ``pool_configured``; a table that fails validation is refused ``bad_message`` naming it."""

    config: PoolConfig


class PoolConfigured(BridgeMessage, tag="pool_configured", kw_only=True, frozen=True):
    """The world's pool configuration after a ``pool_configure``."""

    event_id: str
    config: PoolConfig


class PoolCharacter(PoolGmRequest, tag="pool_character", kw_only=True, frozen=True):
    """The GM enters a character in the ledger, or updates it.

    It gives the ``kind`` (only ``pc`` holds Fate, P5/P12), ``level``, ``stamina`` and the Foundry
    users who own it. Fate and Destiny are kept. A new player character entered while a session is
    open gets its 3 session Fate.
    """

    character_id: Id
    name: Name
    kind: CharacterKind
    level: Level
    stamina: Count
    owner_user_ids: Annotated[list[Id], Meta(max_length=64)] = []


class PoolSessionStart(PoolGmRequest, tag="pool_session_start", kw_only=True, frozen=True):
    """A session starts (P5): every player character's session Fate becomes 3; the old is gone."""


class PoolSessionEnd(PoolGmRequest, tag="pool_session_end", kw_only=True, frozen=True):
    """The session ends (P5): what is left of every player character's session Fate is gone."""


class PoolRest(PoolGmRequest, tag="pool_rest", kw_only=True, frozen=True):
    """A Rest (P8): the listed player characters' earned Fate becomes Destiny.

    An empty list means every player character. Session Fate is not converted.
    """

    character_ids: CharacterIds = []


class PoolAward(PoolGmRequest, tag="pool_award", kw_only=True, frozen=True):
    """The GM awards ``amount`` earned Fate to each listed player character (P5)."""

    character_ids: Annotated[list[Id], Meta(min_length=1, max_length=64)]
    amount: Annotated[int, Meta(ge=1, le=99)] = 1


class PoolLevelGained(PoolGmRequest, tag="pool_level_gained", kw_only=True, frozen=True):
    """The character gains a level (P8): level + 1, Destiny reset to 0.

    Refused ``not_eligible`` at level 10, or with no Destiny: the seed says a level costs at least 1.
    """

    character_id: Id


class PoolSetStamina(PoolGmRequest, tag="pool_set_stamina", kw_only=True, frozen=True):
    """The GM sets a character's stamina (e.g. after a Recovery)."""

    character_id: Id
    stamina: Count


class PoolLedgerQuery(UserRequest, tag="pool_ledger_query", kw_only=True, frozen=True):
    """Read ledger entries. Changes nothing. Answered with ``pool_ledger``.

    The listed characters; or, with an empty list, every character the user may see. That is all
    for a GM, the owned ones for a player.
    """

    user_is_gm: bool = False
    character_ids: CharacterIds = []


class PoolLedgerEntry(OutPart, kw_only=True, frozen=True):
    """A character's ledger after a decision.

    ``fate`` is what it may spend: session + earned. ``destiny`` is never spendable as Fate (P8).
    ``tier`` is half the level, rounded up.
    """

    character_id: str
    name: str
    kind: CharacterKind
    owner_user_ids: list[str]
    level: int
    tier: int
    stamina: int
    session_fate: int
    earned_fate: int
    destiny: int
    fate: int


class PoolLedger(BridgeMessage, tag="pool_ledger", kw_only=True, frozen=True):
    """The ledger entries a GM request changed, or a query read; ``action`` names it.

    ``session_open``: whether a session runs. ``card``: a chat card for GM changes; null for
    ``query``.
    """

    event_id: str
    action: LedgerAction
    session_open: bool
    characters: list[PoolLedgerEntry]
    card: Card | None = None


class PoolRoller(UserRequest, kw_only=True, frozen=True):
    """Base of a roll asked for a character: allowed to its owners and GMs, ``forbidden`` otherwise.

    ``user_id`` is Foundry's sender id. ``visibility``: who sees the result
    (:data:`RollVisibility`). Absent: not public, so not on the overlay.
    """

    character_id: Id
    user_name: Name | None = None
    user_is_gm: bool = False
    label: Name | None = None
    """What is rolled, for the card (e.g. "Climb the wall")."""
    visibility: RollVisibility | None = None


class PoolCheck(PoolRoller, tag="pool_check", kw_only=True, frozen=True):
    """A dice-pool check (P1-P4, P6, P10). Answered ``pool_check_rolled``.

    Give the stat as exactly one of ``stat_modifier`` or ``stat_score``. A score is looked up in the
    world's stat table (P11). ``task_tier`` is the task's tier, 1..5. ``successes_needed`` overrides
    it when a rule gives its own number (P4). ``fate``: dice bought, 1 Fate each, session Fate first
    (P5, P6).
    """

    stat_modifier: StatValue | None = None
    stat_score: StatValue | None = None
    task_tier: Tier
    successes_needed: Annotated[int, Meta(ge=1, le=99)] | None = None
    advantage_sources: Sources = 0
    disadvantage_sources: Sources = 0
    fate: Count = 0


class PoolFateSpent(OutPart, kw_only=True, frozen=True):
    """Fate taken by a decision (P5): session Fate first, then earned Fate."""

    from_session: int
    from_earned: int


class PoolDie(OutPart, kw_only=True, frozen=True):
    """One d6 of a check (P2).

    Its ``face``; whether it was an ``explosion`` (rolled for a 6); whether a ``success``. For a 1,
    ``paid`` says whether it cost stamina or paid Fate; null for other faces.
    """

    face: int
    explosion: bool
    success: bool
    paid: bool | None = None


class PoolCheckRolled(BridgeMessage, tag="pool_check_rolled", kw_only=True, frozen=True):
    """A check's result.

    - ``pool_size`` = stat modifier (0 if negative) + Tier + ``fate_spent`` dice.
    - ``threshold``: the lowest succeeding face.
    - ``pass_chance``: the exact chance the pool had (0..1).
    - ``stamina_lost``, ``fate_gained``: what the 1s did (P2, P10, P12).
    - ``character``: the ledger after.
    """

    event_id: str
    character_id: str
    label: str | None
    stat_modifier: int
    tier: int
    bought: int
    pool_size: int
    mode: Mode
    threshold: int
    dice: list[PoolDie]
    successes: int
    task_tier: int
    task_name: str | None
    needed: int
    passed: bool
    pass_chance: float
    fate_spent: PoolFateSpent
    stamina_lost: int
    fate_gained: int
    character: PoolLedgerEntry
    card: Card


class PoolSave(PoolRoller, tag="pool_save", kw_only=True, frozen=True):
    """A save (P9): d20 + the save stat's die + the Fate die + Tier + ``bonus``, vs the DC.

    The dice come from the world's stat table (P11), by ``stat_score`` and ``fate_score``. A Fate
    save needs no ``stat_score``: its Fate die is rolled once. The DC is exactly one of ``dc`` or
    the world's DC of ``effect_tier``. Answered ``pool_save_rolled``. Its ``roll_id`` (= this
    ``event_id``) lets ``pool_reroll`` reroll the d20.
    """

    save: SaveName
    stat_score: StatValue | None = None
    fate_score: StatValue
    bonus: StatValue = 0
    dc: Annotated[int, Meta(ge=1, le=99)] | None = None
    effect_tier: Tier | None = None
    advantage_sources: Sources = 0
    disadvantage_sources: Sources = 0


class PoolSaveRolled(BridgeMessage, tag="pool_save_rolled", kw_only=True, frozen=True):
    """A save's result (P9): the d20s and the kept one, the stat die, the Fate die, the total vs ``dc``.

    Each die is ``[signed faces, rolled value]``. ``fate_die`` is null on a Fate save: it is rolled
    once, as its stat die.
    """

    event_id: str
    roll_id: str
    character_id: str
    label: str | None
    save: SaveName
    mode: Mode
    d20s: list[int]
    kept: int
    stat_die: list[int]
    fate_die: list[int] | None
    tier: int
    bonus: int
    total: int
    dc: int
    passed: bool
    character: PoolLedgerEntry
    card: Card


class PoolD20Roll(Part, kw_only=True, frozen=True):
    """A d20 roll seen in chat, read from the ChatMessage's Roll JSON.

    Who rolled it, the ``kind`` (P7), and the d20 results: one, or two at advantage/disadvantage.
    Also the roll's ``total`` and, when known, the ``dc`` it was against.
    """

    character_id: Id
    kind: D20RollKind
    mode: Mode = "normal"
    d20s: Annotated[list[D20], Meta(min_length=1, max_length=2)]
    total: Annotated[int, Meta(ge=-999, le=999)]
    dc: Annotated[int, Meta(ge=1, le=99)] | None = None
    label: Name | None = None


class PoolReroll(UserRequest, tag="pool_reroll", kw_only=True, frozen=True):
    """Pay 1 Fate to reroll a d20 roll (P7), session Fate first.

    ``roll_id`` is the ChatMessage id of a d20 roll; ``roll`` gives that roll, the first time. Or it
    is the ``roll_id`` of a bridge save or an earlier reroll. Once the bridge holds a roll, it
    rerolls its own latest roll and ignores ``roll``. ``visibility``: who sees the result
    (:data:`RollVisibility`). Absent: not public, so not on the overlay.

    Answered ``pool_rerolled``. Refused:

    - ``not_eligible`` for a retainer or follower;
    - ``no_charges`` with no Fate;
    - ``not_found`` for an unknown roll;
    - ``forbidden`` for a user who does not own the character.
    """

    roll_id: Id
    user_name: Name | None = None
    user_is_gm: bool = False
    roll: PoolD20Roll | None = None
    visibility: RollVisibility | None = None


class PoolRerolled(BridgeMessage, tag="pool_rerolled", kw_only=True, frozen=True):
    """A d20 reroll (P7): the new d20s replace the old.

    The kept one is chosen by the same mode; only it changes the total. ``passed`` when the roll's
    DC is known. ``rerolls`` counts this roll's rerolls so far.
    """

    event_id: str
    roll_id: str
    character_id: str
    kind: D20RollKind
    label: str | None
    mode: Mode
    d20s_before: list[int]
    kept_before: int
    total_before: int
    d20s: list[int]
    kept: int
    total: int
    dc: int | None
    passed: bool | None
    rerolls: int
    fate_spent: PoolFateSpent
    character: PoolLedgerEntry
    card: Card


CLIENT = (PoolConfigure, PoolCharacter, PoolSessionStart, PoolSessionEnd, PoolRest, PoolAward,
          PoolLevelGained, PoolSetStamina, PoolLedgerQuery, PoolCheck, PoolSave, PoolReroll)
BRIDGE = (PoolConfigured, PoolLedger, PoolCheckRolled, PoolSaveRolled, PoolRerolled)
