"""Rule-based crystallizer: review-queue proposals from raw user messages (docs/behaviour.md §6)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from memoryapp.rules.reading import (
    LEADING_NEGATION,
    NEGATIVE_TRIGGERS,
    OPT_WS,
    WS,
    Scan,
    canonical,
    contrast_end,
    read_context,
)

__all__ = ["Proposal", "propose", "user_texts"]

PIN_MARKER = "[PIN]"
"""Marker a host puts at the start of a pinned message; never part of a phrase."""

TITLE_MAX = 60
"""A title phrase longer than this is cut (docs/behaviour.md §6)."""

TITLE_CUT = 57
"""Characters of the phrase kept before ``…`` when the title is cut."""

EVIDENCE_CONTEXT = 40
"""Characters of the message kept on each side of the match as evidence."""

EVIDENCE_MAX = 240
"""Upper bound on the evidence length."""

_TITLE_PREFIX = {
    "preference": "Preference: ",
    "constraint": "Constraint: ",
    "decision": "Decision: ",
    "workflow": "Workflow: ",
}

_SCOPE = {
    "preference": "user",
    "constraint": "project",
    "decision": "project",
    "workflow": "project",
}

# Horizontal whitespace only: a newline ends a phrase, so it may not sit inside
# a trigger or between a trigger and its phrase either.
# English triggers must not touch an ASCII letter, digit or underscore ("unlike",
# "usefully"); a CJK neighbour is fine so that mixed-language text still matches.
_START = r"(?<![A-Za-z0-9_])"
_APOS = "['\u2019]"
# A phrase stops at . , ; or a line break; the full-width forms 。，； stop it
# too, because Chinese sentences use them where English uses the ASCII ones.
# A phrase is read up to its rule's maximum length: a longer one is cut there
# (the rest of the message is still searched for further triggers), as Agentao's
# bounded phrase patterns do.
_PHRASE = r"(?P<phrase>[^.,;\u3002\uff0c\uff1b\r\n]{0,%d})"
# Workflow phrases are lists ("lint, test, deploy"): only a full stop or a line
# break ends them.
_WORKFLOW_PHRASE = r"(?P<phrase>[^.\u3002\r\n]{0,%d})"

_WORD_TOKEN = re.compile(r"[A-Za-z]+|[\u4e00-\u9fff]+")
_KEY_TOKENS = 4


@dataclass(frozen=True)
class Proposal:
    """One crystallizer candidate, to be queued for review (never written to memories).

    Attributes:
        scope: ``"user"`` for a preference, ``"project"`` for a constraint,
            decision or workflow.
        type: ``preference``, ``constraint``, ``decision`` or ``workflow``.
        key_normalized: ``"<type>_"``, then ``not_`` when the statement is
            negated (``not_always_`` for "not always"), then the first 4 word
            tokens of the phrase after the trigger joined by ``_`` (``unknown``
            when it has none). A positive statement keys as it always did.
        title: ``"<Type>: "`` plus the content with whitespace collapsed, cut to
            57 characters plus ``…`` when longer than 60.
        content: What the user asked for, with its polarity: a constraint's
            trigger ("never", "must not", "always", 不要 …) and a negation right
            before any trigger ("not switching to"), lower-cased with one space,
            then the captured phrase stripped of surrounding whitespace (inner
            whitespace kept as written), then a contrast that follows it
            (", not spaces").
        evidence: The match (from a negation before the trigger, if any, to the
            end of the content) with up to 40 characters of the message either
            side, stripped, at most 240 characters.
        occurrences: Number of distinct user messages of the call that produced
            this ``(scope, key_normalized)``.
        confidence: ``"inferred"`` from 2 occurrences on, else ``"auto_summary"``.
        tags: Always ``(type,)``: the type is the one label a rule can vouch
            for, and it lets the guard re-derive the type from the tags.
    """

    scope: str
    type: str
    key_normalized: str
    title: str
    content: str
    evidence: str
    occurrences: int
    confidence: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class _Rule:
    """One phrase family in one language, with the phrase length bounds."""

    type: str
    pattern: re.Pattern[str]
    min_len: int
    max_len: int
    chinese: bool = False


def _english(triggers: str, max_len: int = 80) -> re.Pattern[str]:
    phrase = _PHRASE % max_len
    return re.compile(_START + "(?P<trigger>" + triggers + ")" + WS + phrase, re.IGNORECASE)


def _chinese(triggers: str, max_len: int = 40) -> re.Pattern[str]:
    return re.compile("(?P<trigger>" + triggers + ")" + OPT_WS + _PHRASE % max_len)


# The order is the tie-break between candidates starting at the same offset.
_RULES: tuple[_Rule, ...] = (
    _Rule(
        "preference",
        _english(f"I{WS}(?:prefer|like|use|want)"),
        3,
        80,
    ),
    # "我" belongs to every trigger (as "I" does in English); "倾向于" is how
    # "倾向" is normally written, so the "于" is not left in the phrase.
    _Rule("preference", _chinese("我(?:喜欢|偏好|倾向于?|想用)"), 2, 40, chinese=True),
    # Longer alternatives first, so "must not X" captures "X", not "not X".
    _Rule(
        "constraint",
        _english(f"always|never|don{_APOS}t|do{WS}not|must{WS}not|must"),
        3,
        80,
    ),
    # "永远不要" is 永远 + 不要 ("never"): the "要" is part of the negation, so
    # "永远不要用 tabs" keys like "不要用 tabs".
    _Rule("constraint", _chinese("永远不要|永远不|从不|不要|必须|禁止"), 2, 40, chinese=True),
    _Rule(
        "decision",
        _english(
            f"we{WS}decided{WS}to|let{_APOS}s{WS}use|switching{WS}to|going{WS}to{WS}use|chose"
        ),
        3,
        80,
    ),
    _Rule("decision", _chinese("决定|选择|改用|采用"), 2, 40, chinese=True),
    _Rule(
        "workflow",
        re.compile(
            _START
            + rf"(?:workflow|process|pipeline)(?:{WS}is)?{OPT_WS}:{OPT_WS}"
            + _WORKFLOW_PHRASE % 120,
            re.IGNORECASE,
        ),
        5,
        120,
    ),
    _Rule(
        "workflow",
        re.compile(rf"(?:工作流|流程)(?:是|为)?{OPT_WS}[:\uff1a]{OPT_WS}" + _WORKFLOW_PHRASE % 80),
        2,
        80,
        chinese=True,
    ),
)


def user_texts(messages: Iterable[Any]) -> list[str]:
    """Return the text of each ``role: "user"`` message, in order.

    Only mappings whose ``role`` is exactly ``"user"`` are read; assistant, tool
    and system messages never reach the rules. A string ``content`` is used as
    is; a list ``content`` contributes its ``{"type": "text", "text": str}``
    blocks, joined with a newline so that a phrase never runs from one block
    into the next; other blocks are ignored. One leading ``[PIN]`` marker
    (after any leading whitespace, case-sensitive, as hosts write it) is removed
    together with the whitespace following it.

    Anything malformed (a non-iterable ``messages``, a message that is not a
    mapping, a missing or non-string role, content of another type, blocks that
    are not text mappings) is skipped, and so is a message left with no
    non-whitespace text.

    Args:
        messages: Chat messages, normally a list of ``{"role", "content"}`` dicts.

    Returns:
        One string per usable user message; never raises.
    """
    try:
        iterator = iter(messages)
    except TypeError:
        return []
    texts: list[str] = []
    for message in iterator:
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        text = _content_text(message.get("content"))
        stripped = text.lstrip()
        if stripped.startswith(PIN_MARKER):
            text = stripped[len(PIN_MARKER) :].lstrip()
        if text.strip():
            texts.append(text)
    return texts


def propose(messages: Iterable[Any]) -> list[Proposal]:
    """Run the phrase rules over the user messages and fold the candidates.

    Every rule is matched against every user message (see :func:`user_texts`);
    a match proposes only when it is the user's own statement: not inside a
    question, a quotation or reported speech ("Bob said never …"), not under a
    negation farther back in its clause, not on the rejected side of a contrast
    ("instead of always …") (docs/behaviour.md §6, "Meaning is kept");
    within one rule matches do not overlap, so a trigger inside an already
    captured phrase of the same family is not matched again, while different
    families are matched independently (``"必须采用 Docker"`` yields a constraint
    and a decision). A captured phrase shorter than its bounds yields no
    candidate; a longer one is cut at the maximum (as Agentao's patterns cut it).
    The bounds follow the language of the trigger: English 3–80 (workflow
    5–120), Chinese 2–40 (workflow 2–80), whatever the language of the phrase.

    Candidates are folded by ``(scope, key_normalized)``: a message counts once
    however often it repeats the phrase (its last occurrence supplies the text),
    ``occurrences`` counts the messages, and the latest message's title, content
    and evidence win. Proposals come in order of first appearance: by message,
    then by offset in the message, then by family (preference, constraint,
    decision, workflow).

    Args:
        messages: Chat messages, normally a list of ``{"role", "content"}`` dicts.

    Returns:
        The folded proposals; an empty list when nothing matched.
    """
    folded: dict[tuple[str, str], Proposal] = {}
    for text in user_texts(messages):
        for candidate in _message_candidates(text):
            ident = (candidate.scope, candidate.key_normalized)
            previous = folded.get(ident)
            occurrences = 1 if previous is None else previous.occurrences + 1
            # Re-assigning an existing dict key keeps its first-appearance slot.
            folded[ident] = replace(
                candidate, occurrences=occurrences, confidence=_confidence(occurrences)
            )
    return list(folded.values())


def _content_text(content: object) -> str:
    """Flatten a message ``content`` to text; ``""`` for unsupported shapes."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(part for part in parts if part)


def _message_candidates(text: str) -> list[Proposal]:
    """All candidates of one message, one per ``(scope, key)``, in first-appearance order."""
    found: list[tuple[int, int, Proposal]] = []
    scan = Scan(text)
    for rank, rule in enumerate(_RULES):
        for match in rule.pattern.finditer(text):
            proposal = _candidate(rule, scan, match)
            if proposal is not None:
                found.append((match.start(), rank, proposal))
    found.sort(key=lambda item: (item[0], item[1]))
    per_key: dict[tuple[str, str], Proposal] = {}
    for _, _, proposal in found:
        # The later occurrence replaces the text but keeps the first slot.
        per_key[(proposal.scope, proposal.key_normalized)] = proposal
    return list(per_key.values())


def _candidate(rule: _Rule, scan: Scan, match: re.Match[str]) -> Proposal | None:
    """Build the candidate of one match, or ``None`` when it must not be proposed.

    ``None`` when the phrase is out of bounds, or when the match is not a
    statement of the user's own (:func:`read_context`): a question, a quotation,
    reported speech, a negation that governs the trigger from afar, or the
    rejected side of a contrast ("instead of always …").
    """
    text = scan.text
    raw = match.group("phrase")
    phrase = raw.strip()
    if not rule.min_len <= len(phrase) <= rule.max_len:
        return None
    phrase_start = match.start("phrase") + (len(raw) - len(raw.lstrip()))
    phrase_end = match.start("phrase") + len(raw.rstrip())
    trigger = canonical(match.groupdict().get("trigger") or "")
    reading = read_context(rule, scan, match.start(), phrase_start)
    if not reading.own_statement:
        return None
    negated_at = reading.negation_start
    marker: list[str] = []
    start = match.start()
    if negated_at is not None:
        start = negated_at
        marker.append("not")
        if rule.type == "constraint" and trigger not in NEGATIVE_TRIGGERS:
            # "not always" is not "never": the positive modal stays in the key.
            marker.extend(_WORD_TOKEN.findall(trigger))
    key_phrase = phrase
    if trigger in NEGATIVE_TRIGGERS:
        marker.append("not")
    elif rule.type == "constraint" and (leading := LEADING_NEGATION.match(phrase)):
        # "must never X" forbids X as "never X" does: one key for both.
        marker.append("not")
        key_phrase = phrase[leading.end() :]
    # The constraint family's trigger is modal force ("never", "must"); a negation
    # before any trigger is polarity: both stay in the content, as written.
    keeps_prefix = rule.type == "constraint" or start != match.start()
    prefix = canonical(text[start:phrase_start]) if keeps_prefix else ""
    if prefix and not rule.chinese:
        prefix = prefix.rstrip() + " "
    tail_end = contrast_end(text, phrase_end, rule)
    content = prefix + phrase + text[phrase_end:tail_end]
    return Proposal(
        scope=_SCOPE[rule.type],
        type=rule.type,
        key_normalized=_key(rule.type, key_phrase, marker),
        title=_title(rule.type, content),
        content=content,
        evidence=_evidence(text, start, tail_end),
        occurrences=1,
        confidence=_confidence(1),
        tags=(rule.type,),
    )


def _key(type_: str, phrase: str, marker: Iterable[str] = ()) -> str:
    """``<type>_`` plus the polarity marker and the phrase's first 4 word tokens.

    The marker is empty for a plain (positive) statement, so its key is the one
    it always had; a negated statement's key starts with ``not`` (``"Never X"``
    and ``"Always X"`` must never fold into one item). A phrase without word
    tokens keys as ``unknown``.
    """
    tokens = [token.lower() for token in _WORD_TOKEN.findall(phrase)[:_KEY_TOKENS]]
    return f"{type_}_{'_'.join([*marker, *(tokens or ['unknown'])])}"


def _title(type_: str, content: str) -> str:
    """Prefix plus the whitespace-collapsed phrase, cut to 57 + ``…`` past 60 characters."""
    phrase = " ".join(content.split())
    if len(phrase) > TITLE_MAX:
        phrase = phrase[:TITLE_CUT] + "…"
    return _TITLE_PREFIX[type_] + phrase


def _evidence(text: str, start: int, end: int) -> str:
    """The match ``text[start:end]`` with 40 characters either side, stripped.

    Longer than 240 characters: its first 237 and ``…`` (Agentao's cut).
    """
    window = text[max(0, start - EVIDENCE_CONTEXT) : end + EVIDENCE_CONTEXT].strip()
    if len(window) > EVIDENCE_MAX:
        return window[: EVIDENCE_MAX - 3] + "…"
    return window


def _confidence(occurrences: int) -> str:
    """``inferred`` once a candidate was seen in 2 messages, else ``auto_summary``."""
    return "inferred" if occurrences >= 2 else "auto_summary"
