"""Rule-based crystallizer: review-queue proposals from raw user messages (docs/behaviour.md §6)."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

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
_WS = r"[^\S\r\n]+"
_OPT_WS = r"[^\S\r\n]*"
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
    return re.compile(_START + "(?P<trigger>" + triggers + ")" + _WS + phrase, re.IGNORECASE)


def _chinese(triggers: str, max_len: int = 40) -> re.Pattern[str]:
    return re.compile("(?P<trigger>" + triggers + ")" + _OPT_WS + _PHRASE % max_len)


# The order is the tie-break between candidates starting at the same offset.
_RULES: tuple[_Rule, ...] = (
    _Rule(
        "preference",
        _english(f"I{_WS}(?:prefer|like|use|want)"),
        3,
        80,
    ),
    # "我" belongs to every trigger (as "I" does in English); "倾向于" is how
    # "倾向" is normally written, so the "于" is not left in the phrase.
    _Rule("preference", _chinese("我(?:喜欢|偏好|倾向于?|想用)"), 2, 40, chinese=True),
    # Longer alternatives first, so "must not X" captures "X", not "not X".
    _Rule(
        "constraint",
        _english(f"always|never|don{_APOS}t|do{_WS}not|must{_WS}not|must"),
        3,
        80,
    ),
    # "永远不要" is 永远 + 不要 ("never"): the "要" is part of the negation, so
    # "永远不要用 tabs" keys like "不要用 tabs".
    _Rule("constraint", _chinese("永远不要|永远不|从不|不要|必须|禁止"), 2, 40, chinese=True),
    _Rule(
        "decision",
        _english(
            f"we{_WS}decided{_WS}to|let{_APOS}s{_WS}use|switching{_WS}to|going{_WS}to{_WS}use|chose"
        ),
        3,
        80,
    ),
    _Rule("decision", _chinese("决定|选择|改用|采用"), 2, 40, chinese=True),
    _Rule(
        "workflow",
        re.compile(
            _START
            + rf"(?:workflow|process|pipeline)(?:{_WS}is)?{_OPT_WS}:{_OPT_WS}"
            + _WORKFLOW_PHRASE % 120,
            re.IGNORECASE,
        ),
        5,
        120,
    ),
    _Rule(
        "workflow",
        re.compile(
            rf"(?:工作流|流程)(?:是|为)?{_OPT_WS}[:\uff1a]{_OPT_WS}" + _WORKFLOW_PHRASE % 80
        ),
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
    scan = _Scan(text)
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


def _candidate(rule: _Rule, scan: _Scan, match: re.Match[str]) -> Proposal | None:
    """Build the candidate of one match, or ``None`` when it must not be proposed.

    ``None`` when the phrase is out of bounds, or when the match is not a
    statement of the user's own (:func:`_read_context`): a question, a quotation,
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
    trigger = _canonical(match.groupdict().get("trigger") or "")
    reading = _read_context(rule, scan, match.start(), phrase_start)
    if not reading.own_statement:
        return None
    negated_at = reading.negation_start
    marker: list[str] = []
    start = match.start()
    if negated_at is not None:
        start = negated_at
        marker.append("not")
        if rule.type == "constraint" and trigger not in _NEGATIVE_TRIGGERS:
            # "not always" is not "never": the positive modal stays in the key.
            marker.extend(_WORD_TOKEN.findall(trigger))
    key_phrase = phrase
    if trigger in _NEGATIVE_TRIGGERS:
        marker.append("not")
    elif rule.type == "constraint" and (leading := _LEADING_NEGATION.match(phrase)):
        # "must never X" forbids X as "never X" does: one key for both.
        marker.append("not")
        key_phrase = phrase[leading.end() :]
    # The constraint family's trigger is modal force ("never", "must"); a negation
    # before any trigger is polarity: both stay in the content, as written.
    keeps_prefix = rule.type == "constraint" or start != match.start()
    prefix = _canonical(text[start:phrase_start]) if keeps_prefix else ""
    if prefix and not rule.chinese:
        prefix = prefix.rstrip() + " "
    tail_end = _contrast_end(text, phrase_end, rule)
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


# ------------------------------------------------------------ polarity and modality
#
# Agentao's rules (and ours until issue #29) kept only the phrase after the
# trigger, so "Never deploy on Fridays" became "Constraint: deploy on Fridays":
# the opposite rule, which a reviewer approving in bulk then turned into memory.
# Now the trigger's modal force and any negation stay in the content and title,
# and a negated statement keys apart from its positive twin.

_NEGATIVE_TRIGGERS = frozenset(
    {"never", "don't", "do not", "must not", "永远不要", "永远不", "从不", "不要", "禁止"}
)
"""Triggers that forbid: their statement keys with the ``not`` marker."""

# A negation right before a trigger ("we are *not* switching to", "we *never*
# chose", "*not* always"): at most one word may stand between ("won't *be*
# switching to"). Contractions ("haven't") count as a whole word.
_EN_NEGATION = r"(?:not|never|no[^\S\r\n]+longer|cannot|[A-Za-z]+n['\u2019]t|nor|neither)"
_EN_NEGATION_ADJACENT = re.compile(
    rf"(?<![A-Za-z0-9_])(?P<neg>{_EN_NEGATION})(?:{_WS}[A-Za-z']+)?{_OPT_WS}$", re.IGNORECASE
)
_EN_NEGATION_ANY = re.compile(rf"(?<![A-Za-z0-9_]){_EN_NEGATION}(?![A-Za-z])", re.IGNORECASE)
_LEADING_NEGATION = re.compile(
    rf"(?:never|not|no{_WS}longer){_WS}(?=[A-Za-z])|(?:永远不要|永远不|从不|不要|不){_OPT_WS}"
    r"(?=[\u4e00-\u9fffA-Za-z])",
    re.IGNORECASE,
)
"""A negation opening the phrase of a positive modal ("must *never* push")."""
_CN_NEGATION_ADJACENT = re.compile(
    rf"(?P<neg>不再|不会|不打算|不想|不要|没有|没|不|别|未){_OPT_WS}$"
)
# The rejected side of a contrast: "instead of always running the suite, …".
_CONTRAST_BEFORE = re.compile(
    r"(?<![A-Za-z])(?:instead[^\S\r\n]+of|rather[^\S\r\n]+than|other[^\S\r\n]+than)(?![A-Za-z])"
    r"|而不是|而非|代替",
    re.IGNORECASE,
)
# "X, not Y": the contrast completes the statement, so it joins the content (the
# key stays that of X). "never" is not listed: it is a trigger of its own.
_CONTRAST_AFTER = re.compile(
    r"[^\S\r\n]*,[^\S\r\n]*(?:not|rather[^\S\r\n]+than|instead[^\S\r\n]+of|but[^\S\r\n]+not)"
    r"(?![A-Za-z])[^.,;\r\n]{1,60}",
    re.IGNORECASE,
)
_CN_CONTRAST_AFTER = re.compile(
    r"[^\S\r\n]*[，,][^\S\r\n]*(?:而不是|而非|不是)[^。，；.,;\r\n]{1,30}"
)
# A clause ends at punctuation or a coordinating conjunction: a negation across
# one ("we don't use tabs and we must use spaces") does not govern the trigger.
_CLAUSE_BREAK = re.compile(
    r"[,;:\u3002\uff0c\uff1b\uff1a\uff01\uff1f!?\r\n]"
    r"|(?<![A-Za-z])(?:but|and|or|so|because|although|though|while|whereas|however|then|yet)"
    r"(?![A-Za-z])"
    r"|但是|但|而且|所以|因为|然后",
    re.IGNORECASE,
)
# A sentence ends at ! ? a line break, the full-width stops, or a "." that is
# followed by whitespace or the end ("node.js" goes on).
_SENTENCE_END = re.compile(r"[!?\r\n\u3002\uff01\uff1f]|\.(?=\s|$)")
_CLAUSE_END = re.compile(r"[,;\uff0c\uff1b]")
_FIRST_WORD = re.compile(r"[\s\"'\u201c\u2018(\[]*([A-Za-z'\u2019]+)")
LOOK_BACK = 240
"""Characters before a trigger read for its context (negation, reported speech)."""
_INTERROGATIVES = frozenset(
    {
        *("what", "why", "how", "when", "where", "who", "whom", "which", "whose"),
        *("should", "shall", "can", "could", "would", "will", "may", "might", "must"),
        *("do", "does", "did", "is", "are", "was", "were", "am", "have", "has", "had"),
        *("isn't", "aren't", "don't", "doesn't", "didn't", "won't", "wouldn't"),
        *("shouldn't", "can't", "couldn't"),
    }
)
"""Words that open a question ("Should we always run tests, or not?")."""
# Someone else's words: "Bob said …", "the docs say …", "according to …". The
# user's own ("I said", "as we always say") is theirs to propose.
_REPORTING = re.compile(
    r"(?<![A-Za-z])(?:said|says|say|told|tells|tell|wrote|writes|thinks|think|believes|"
    r"believe|claims|claimed|claim|asked|asks|insists|insisted|mentioned|suggested|suggests|"
    r"according[^\S\r\n]+to)(?![A-Za-z])",
    re.IGNORECASE,
)
_OWN_SPEAKER = re.compile(
    r"(?<![A-Za-z])(?:I|we|I['\u2019](?:ve|d)|we['\u2019](?:ve|d))(?:[^\S\r\n]+[A-Za-z]+)?"
    r"[^\S\r\n]+$",
    re.IGNORECASE,
)
_SPEAKER_RESET = re.compile(
    r"[;\uff1b]|(?<![A-Za-z])(?:but|however|whereas|although|though|while)(?![A-Za-z])|但是|不过",
    re.IGNORECASE,
)
_CN_REPORTING = re.compile(
    r"(?:他|她|他们|她们|别人|老板|同事|经理|领导|客户)(?:说|认为|觉得|表示|告诉)|听说|据说"
)
# Opening and closing marks of a quotation (straight double quotes pair up).
_QUOTE_PAIRS = (("\u201c", "\u201d"), ("\u300c", "\u300d"), ("\u300e", "\u300f"))
_STRAIGHT_DOUBLE = re.compile(r'(?<![0-9])"')  # 12" is a size, not a quotation
_SINGLE_OPEN = re.compile(r"(?:^|(?<=[\s:(\[]))'(?=\S)")
_SINGLE_CLOSE = re.compile(r"(?<=\S)'(?=[\s.,;:!?)\]]|$)")
_CURLY_OPEN = re.compile("\u2018")
_CURLY_CLOSE = re.compile("\u2019(?![A-Za-z])")


@dataclass(frozen=True)
class _Reading:
    """How a match stands in its message.

    Attributes:
        own_statement: False for a question, a quotation, reported speech, a
            negation governing the trigger from afar, or the rejected side of a
            contrast: no candidate then.
        negation_start: Offset of a negation right before the trigger, whose
            words then open the content; ``None`` when there is none.
    """

    own_statement: bool
    negation_start: int | None = None


_NOT_OWN = _Reading(own_statement=False)


class _Scan:
    """One message's sentence, clause and quotation marks, found once.

    Every match then reads its context by bisection, and looks back at most
    :data:`LOOK_BACK` characters: a message with thousands of triggers costs
    linear time, not quadratic.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        ends = list(_SENTENCE_END.finditer(text))
        self.sentence_mark_at = [m.start() for m in ends]
        self.sentence_marks = [m.group() for m in ends]
        self.sentence_starts = [m.end() for m in ends]
        self.clause_ends = [m.start() for m in _CLAUSE_END.finditer(text)]
        self.clause_starts = [m.end() for m in _CLAUSE_BREAK.finditer(text)]
        self.straight = [m.start() for m in _STRAIGHT_DOUBLE.finditer(text)]
        self.pairs = [
            (_positions(text, opening), _positions(text, closing))
            for opening, closing in (
                *_QUOTE_PAIRS,
                (_SINGLE_OPEN, _SINGLE_CLOSE),
                (_CURLY_OPEN, _CURLY_CLOSE),
            )
        ]

    def sentence_start(self, pos: int) -> int:
        """Where the sentence holding ``pos`` starts."""
        i = bisect_right(self.sentence_starts, pos)
        return self.sentence_starts[i - 1] if i else 0

    def sentence_end(self, pos: int) -> tuple[int, str] | None:
        """Offset and mark of the first sentence end at or after ``pos``."""
        i = bisect_left(self.sentence_mark_at, pos)
        if i == len(self.sentence_mark_at):
            return None
        return self.sentence_mark_at[i], self.sentence_marks[i]

    def clause_start(self, pos: int, floor: int) -> int:
        """Where the clause holding ``pos`` starts (not before ``floor``)."""
        i = bisect_right(self.clause_starts, pos)
        return max(floor, self.clause_starts[i - 1] if i else 0)

    def clause_ends_between(self, start: int, end: int) -> bool:
        """Whether a ``,`` or ``;`` lies in ``[start, end)``."""
        i = bisect_left(self.clause_ends, start)
        return i < len(self.clause_ends) and self.clause_ends[i] < end

    def inside_quotation(self, pos: int) -> bool:
        """Whether ``pos`` lies inside quotation marks (someone's words, not the user's)."""
        if bisect_left(self.straight, pos) % 2 == 1:
            return True
        for opens, closes in self.pairs:
            i = bisect_left(opens, pos)
            if i and opens[i - 1] > _last_before(closes, pos):
                return True
        return False


def _positions(text: str, mark: str | re.Pattern[str]) -> list[int]:
    pattern = re.compile(re.escape(mark)) if isinstance(mark, str) else mark
    return [m.start() for m in pattern.finditer(text)]


def _last_before(positions: list[int], pos: int) -> int:
    i = bisect_left(positions, pos)
    return positions[i - 1] if i else -1


def _read_context(rule: _Rule, scan: _Scan, start: int, phrase_start: int) -> _Reading:
    """Whether the match at ``start`` is the user's own statement, and its negation."""
    text = scan.text
    sentence_start = max(scan.sentence_start(start), start - LOOK_BACK)
    if _is_question(scan, sentence_start, phrase_start, rule.chinese):
        return _NOT_OWN
    if scan.inside_quotation(start) or _reported(text[sentence_start:start]):
        return _NOT_OWN
    clause_start = scan.clause_start(start, sentence_start)
    clause = text[clause_start:start]
    if _CONTRAST_BEFORE.search(clause):
        return _NOT_OWN
    adjacent = (_CN_NEGATION_ADJACENT if rule.chinese else _EN_NEGATION_ADJACENT).search(clause)
    if adjacent is None:
        # A negation farther back governs the trigger in ways a rule cannot read
        # ("it is not true that we must …"): better no proposal than a wrong one.
        if not rule.chinese and _EN_NEGATION_ANY.search(clause):
            return _NOT_OWN
        return _Reading(own_statement=True)
    if rule.type in ("preference", "workflow"):
        return _NOT_OWN  # "not that I like it": nothing the user prefers
    if not rule.chinese and _EN_NEGATION_ANY.search(clause[: adjacent.start("neg")]):
        return _NOT_OWN
    return _Reading(own_statement=True, negation_start=clause_start + adjacent.start("neg"))


def _is_question(scan: _Scan, sentence_start: int, phrase_start: int, chinese: bool) -> bool:
    """A question proposes nothing: "Should we always run tests?", "Never deploy on Fridays?".

    The trigger's clause ending in ``?`` is a question; so is a sentence ending in
    ``?`` that opens with an interrogative ("Should we always run tests, or not?"),
    and any Chinese sentence ending in ``？``. A tag ("I prefer tabs, do you?") is not.
    """
    end = scan.sentence_end(phrase_start)
    if end is None or end[1] not in ("?", "\uff1f"):
        return False
    if chinese or not scan.clause_ends_between(phrase_start, end[0]):
        return True
    first = _FIRST_WORD.match(scan.text, sentence_start)
    return first is not None and _canonical(first.group(1)) in _INTERROGATIVES


def _reported(sentence_before: str) -> bool:
    """Whether the sentence reports someone else's words before the trigger.

    A ``;`` or a contrasting conjunction hands the word back to the user ("Alice
    says Vim; I prefer Emacs", "… but I prefer Emacs").
    """
    resets = list(_SPEAKER_RESET.finditer(sentence_before))
    if resets:
        sentence_before = sentence_before[resets[-1].end() :]
    if _CN_REPORTING.search(sentence_before):
        return True
    for verb in _REPORTING.finditer(sentence_before):
        if not _OWN_SPEAKER.search(sentence_before[: verb.start()]):
            return True
    return False


def _contrast_end(text: str, phrase_end: int, rule: _Rule) -> int:
    """End of a contrast that follows the phrase (``", not spaces"``), else ``phrase_end``."""
    if rule.type == "workflow":
        return phrase_end  # a workflow phrase already runs over commas
    pattern = _CN_CONTRAST_AFTER if rule.chinese else _CONTRAST_AFTER
    contrast = pattern.match(text, phrase_end)
    if contrast is None:
        return phrase_end
    return phrase_end + len(contrast.group().rstrip())


def _canonical(words: str) -> str:
    """Trigger or negation words as shown: lower case, one space, straight apostrophe."""
    return re.sub(r"\s+", " ", words).lower().replace("\u2019", "'")


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
