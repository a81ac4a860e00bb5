"""Generate the two larger retrieval sets of bench/retrieval.py (deterministic).

Usage: python bench/retrieval_sets.py [--seed 42] [--out-dir bench/data]

Writes ``retrieval_hard.json`` and ``retrieval_locomo_shaped.json`` in the layout
bench/retrieval.py reads. Both are long two-speaker chats in sessions, each turn one
memory; the facts and their questions come from :mod:`retrieval_facts`.

* **hard** (10 chats of ~330 turns, 320 questions): each question is the fact's ``hard``
  phrasing, which rarely repeats the evidence's words: synonyms ("dog" for "puppy"),
  indirect references ("{A}'s kid"), paraphrases, dates, and multi-session questions
  whose answer is in a later turn that never names the topic ("Crossed the finish line
  today!"). Categories: synonym, paraphrase, indirect, date, multi-session.
* **locomo-shaped** (10 chats of ~280 turns, 360 questions): LoCoMo's shape (long
  multi-session chats, one turn one memory, small talk between the facts) with its
  style of question: the ``plain`` phrasing, which reuses some of the evidence's words,
  often in another form ("practising" / "practicing", "adopted" / "adopt").
  Categories: single-hop, multi-hop, temporal.

Between the facts: small talk (bench/retrieval_data.py's everyday clauses, which share
the questions' common words), a reply to each fact, and each fact's ``noise`` turns,
which share its questions' words without answering. The same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from retrieval_data import CLAUSES, NAMES, OPENERS  # noqa: E402
from retrieval_facts import FACTS  # noqa: E402

REPLIES = [
    "Oh nice, tell me more!",
    "That's amazing, good for you.",
    "No way! How did that happen?",
    "Wow, I didn't know that.",
    "Haha, that sounds like you.",
    "That must have been a lot.",
    "Really? That's so cool.",
    "Oh no, I hope it gets better.",
]

SHAPES = {
    # name: (chats, sessions, small-talk turns, facts, (echoes per fact, words per echo),
    # phrasing) per chat
    "hard": (10, 20, 102, 32, (2, 1), "hard"),
    "locomo_shaped": (10, 19, 0, 36, (3, 2), "plain"),
}
# An echo: a later or earlier turn that comes back to one word of a fact, as a real chat
# keeps coming back to its topics (so the fact's words are not unique to its turn).
ECHOES = [
    "{o} I keep thinking about the {w} thing, {c}.",
    "{o} {c}, remember the {w} story?",
    "{o} speaking of {w}, {c}.",
    "{o} {c}. Also the {w} again, ugh.",
]
_STOP_WORDS = (
    "the and for with from that this have been our my his her she him was were are its "
    "just so now a an to of in on at is it i i'm i've we're we it's"
)
_STOP = set(_STOP_WORDS.split())


def _small_talk(rng: random.Random) -> str:
    first, second = rng.sample(CLAUSES, 2)
    return f"{rng.choice(OPENERS)} {first}, {second}."


def _category(fact: dict, phrasing: str) -> str:
    if phrasing == "hard":
        return fact["cat"]
    if "later" in fact:
        return "multi-hop"
    return "temporal" if fact["cat"] == "date" else "single-hop"


def _chat(rng: random.Random, c: int, shape: tuple) -> dict:
    _, sessions, talk, n_facts, echoes, phrasing = shape
    a, b = rng.sample(NAMES, 2)
    # Per session, a list of (speaker, text, tag); tags name evidence turns.
    slots: list[list[tuple[str, str, str | None]]] = [[] for _ in range(sessions)]
    questions = []
    for f, fact in enumerate(rng.sample(FACTS, n_facts)):
        who = rng.choice((a, b))
        other = b if who == a else a
        value = rng.choice(fact["vals"])
        first = rng.randrange(sessions - 2 if "later" in fact else sessions)
        slots[first] += [
            (who, fact["say"].format(v=value), f"f{f}"),
            (other, rng.choice(REPLIES), None),
        ]
        if "later" in fact:
            later = rng.randrange(first + 1, sessions)
            slots[later].append((who, fact["later"].format(v=value), f"g{f}"))
        for noise in fact["noise"]:
            slots[rng.randrange(sessions)].append((rng.choice((a, b)), noise, None))
        words = [
            w.strip(".,!?'")
            for w in fact["say"].format(v="").split()
            if w.strip(".,!?'").lower() not in _STOP and len(w) > 3
        ]
        for _ in range(echoes[0]):
            echoed = " and the ".join(rng.sample(words, min(echoes[1], len(words))))
            text = rng.choice(ECHOES).format(
                o=rng.choice(OPENERS), c=rng.choice(CLAUSES), w=echoed.lower()
            )
            slots[rng.randrange(sessions)].append((rng.choice((a, b)), text, None))
        questions.append((f, fact, who, value))
    for _ in range(talk):
        slots[rng.randrange(sessions)].append((rng.choice((a, b)), _small_talk(rng), None))
    turns, where = [], {}
    for s, session in enumerate(slots):
        rng.shuffle(session)
        for speaker, text, tag in session:
            tid = f"{c}:D{s + 1}:{len(turns) + 1}"
            turns.append({"id": tid, "speaker": speaker, "text": text})
            if tag:
                where[tag] = tid
    qs = []
    for f, fact, who, value in questions:
        evidence = [where[f"f{f}"]]
        # A multi-session question's answer: the later turn for the hard phrasing (it asks
        # about the outcome), both turns for the plain one.
        if "later" in fact:
            evidence = [where[f"g{f}"]] if phrasing == "hard" else [where[f"f{f}"], where[f"g{f}"]]
        qs.append(
            {
                "id": f"{c}:q{len(qs) + 1}",
                "question": fact[phrasing].format(A=who),
                "answer": value,
                "evidence": evidence,
                "category": _category(fact, phrasing),
            }
        )
    return {"id": str(c), "speakers": [a, b], "turns": turns, "questions": qs}


def generate(name: str, seed: int = 42) -> dict:
    """One set: ``hard`` or ``locomo_shaped``."""
    shape = SHAPES[name]
    rng = random.Random(f"{name}:{seed}")
    chats = [_chat(rng, c, shape) for c in range(1, shape[0] + 1)]
    return {"name": name, "seed": seed, "conversations": chats}


def main() -> None:
    """Write both sets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out-dir", type=Path, default=HERE / "data")
    args = parser.parse_args()
    for name in SHAPES:
        data = generate(name, args.seed)
        path = args.out_dir / f"retrieval_{name}.json"
        path.write_text(json.dumps(data, ensure_ascii=False, sort_keys=True, indent=0) + "\n")
        turns = sum(len(c["turns"]) for c in data["conversations"])
        qs = sum(len(c["questions"]) for c in data["conversations"])
        print(f"{path}: {turns} turns, {qs} questions, {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
