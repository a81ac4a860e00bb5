"""How a crystallizer match stands in its message: polarity, modality and whose words.

Keeping only the phrase after a trigger would turn "Never deploy on Fridays" into
"Constraint: deploy on Fridays", the opposite rule, which a reviewer approving in
bulk would then turn into memory. So the trigger's modal force and any negation
stay in the content and title (a negated statement keys apart from its positive
twin), and a match that is not the user's own statement (a question, a quotation,
reported speech, the rejected side of a contrast) proposes nothing. Pure: no Django.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Protocol

WS = r"[^\S\r\n]+"
OPT_WS = r"[^\S\r\n]*"


class Rule(Protocol):
    """What reading a match needs to know of its rule."""

    @property
    def type(self) -> str:
        """The proposal type the rule proposes."""

    @property
    def chinese(self) -> bool:
        """Whether the rule reads Chinese (no word boundaries, its own punctuation)."""


NEGATIVE_TRIGGERS = frozenset(
    {"never", "don't", "do not", "must not", "永远不要", "永远不", "从不", "不要", "禁止"}
)
"""Triggers that forbid: their statement keys with the ``not`` marker."""

# A negation right before a trigger ("we are *not* switching to", "we *never*
# chose", "*not* always"): at most one word may stand between ("won't *be*
# switching to"). Contractions ("haven't") count as a whole word.
_EN_NEGATION = r"(?:not|never|no[^\S\r\n]+longer|cannot|[A-Za-z]+n['\u2019]t|nor|neither)"
_EN_NEGATION_ADJACENT = re.compile(
    rf"(?<![A-Za-z0-9_])(?P<neg>{_EN_NEGATION})(?:{WS}[A-Za-z']+)?{OPT_WS}$", re.IGNORECASE
)
_EN_NEGATION_ANY = re.compile(rf"(?<![A-Za-z0-9_]){_EN_NEGATION}(?![A-Za-z])", re.IGNORECASE)
LEADING_NEGATION = re.compile(
    rf"(?:never|not|no{WS}longer){WS}(?=[A-Za-z])|(?:永远不要|永远不|从不|不要|不){OPT_WS}"
    r"(?=[\u4e00-\u9fffA-Za-z])",
    re.IGNORECASE,
)
"""A negation opening the phrase of a positive modal ("must *never* push")."""
_CN_NEGATION_ADJACENT = re.compile(
    rf"(?P<neg>不再|不会|不打算|不想|不要|没有|没|不|别|未){OPT_WS}$"
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
class Reading:
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


_NOT_OWN = Reading(own_statement=False)


class Scan:
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


def read_context(rule: Rule, scan: Scan, start: int, phrase_start: int) -> Reading:
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
        return Reading(own_statement=True)
    if rule.type in ("preference", "workflow"):
        return _NOT_OWN  # "not that I like it": nothing the user prefers
    if not rule.chinese and _EN_NEGATION_ANY.search(clause[: adjacent.start("neg")]):
        return _NOT_OWN
    return Reading(own_statement=True, negation_start=clause_start + adjacent.start("neg"))


def _is_question(scan: Scan, sentence_start: int, phrase_start: int, chinese: bool) -> bool:
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
    return first is not None and canonical(first.group(1)) in _INTERROGATIVES


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


def contrast_end(text: str, phrase_end: int, rule: Rule) -> int:
    """End of a contrast that follows the phrase (``", not spaces"``), else ``phrase_end``."""
    if rule.type == "workflow":
        return phrase_end  # a workflow phrase already runs over commas
    pattern = _CN_CONTRAST_AFTER if rule.chinese else _CONTRAST_AFTER
    contrast = pattern.match(text, phrase_end)
    if contrast is None:
        return phrase_end
    return phrase_end + len(contrast.group().rstrip())


def canonical(words: str) -> str:
    """Trigger or negation words as shown: lower case, one space, straight apostrophe."""
    return re.sub(r"\s+", " ", words).lower().replace("\u2019", "'")
