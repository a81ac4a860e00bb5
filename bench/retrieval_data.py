"""Generate the small conversational QA set of the retrieval benchmark (deterministic).

Usage: python bench/retrieval_data.py [--seed 32] [--conversations 6] [--out PATH]

Writes the JSON layout :mod:`bench.retrieval` reads (see its docstring) to
``bench/data/retrieval_small.json`` by default. Each conversation is two speakers
chatting: most turns are small talk built from common words (the words questions use
too: "really", "time", "week", "name", "favourite"...), a few state facts, and some
mention a fact's topic word without its answer (distractors). Each question asks about
one fact (or two, ``multi-hop``) and names the turn(s) that answer it as evidence.

Categories:
    single-hop: the question repeats a rare word of the answer turn.
    paraphrase: the question shares one content word with it, the rest is reworded.
    multi-hop: two evidence turns, each sharing a word with the question.
    temporal: "when" questions about a dated fact.

The same seed gives the same bytes (sorted keys, fixed RNG), so tests can rely on it.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

TALK_TURNS = 90  # small-talk turns per conversation, besides the facts and their replies
OUT = Path(__file__).resolve().parent / "data" / "retrieval_small.json"

NAMES = ["Ana", "Ben", "Chloe", "Dmitri", "Esra", "Farid", "Greta", "Hiro", "Ines", "Jonas",
         "Kaia", "Luca"]  # fmt: skip

# (fact turn, category, question, distractors, values) — {A} the speaker, {v} the answer.
# Distractors share one or two of the question's words but do not answer it.
FACTS = [
    (
        "I finally adopted a puppy from the shelter, we named her {v}.",
        "single-hop",
        "What name did {A} give the puppy?",
        [
            "The shelter down the road is looking for volunteers this week.",
            "My neighbour's puppy chewed through a shoe, I had to give him a new name: Trouble.",
            "I cannot think of a good name for my new plant, any ideas?",
        ],
        ["Biscuit", "Pepper", "Mochi", "Juniper"],
    ),
    (
        "My sister moved to {v} for her new job at the observatory.",
        "single-hop",
        "Where did {A}'s sister move?",
        [
            "I read about a new observatory opening somewhere up north.",
            "My sister keeps asking me when I will move closer to her.",
            "A new job would be nice, mine is getting boring.",
        ],
        ["Tromso", "Valparaiso", "Hobart", "Reykjavik"],
    ),
    (
        "I have been learning the {v} for about two years now, mostly jazz standards.",
        "paraphrase",
        "What jazz instrument does {A} play?",
        [
            "Two years ago I had a lot more free time for learning things.",
            "The kids play music so loud, mostly pop, never jazz.",
            "I went to a jazz bar once, the instrument solos went on forever.",
        ],
        ["saxophone", "clarinet", "trombone", "cello"],
    ),
    (
        "We spent the whole holiday hiking around {v}, the lakes were stunning.",
        "paraphrase",
        "Where did {A} go hiking?",
        [
            "The lakes near my place are still frozen, can you believe it?",
            "Hiking boots are so expensive, I will go with trainers.",
            "Where do you want to go for the next vacation?",
        ],
        ["Patagonia", "Dolomites", "Lofoten", "Tatras"],
    ),
    (
        "I signed up for the {v} marathon in the spring, training starts on Monday.",
        "single-hop",
        "Which marathon did {A} sign up for?",
        [
            "Training for anything on Monday mornings is really hard for me.",
            "My cousin ran a marathon once and could not walk for a week.",
            "I signed up for a cooking newsletter, it is mostly ads.",
        ],
        ["Lisbon", "Rotterdam", "Boston", "Kyoto"],
    ),
    (
        "My favourite book this year was {v}, I could not put it down.",
        "paraphrase",
        "Which book did {A} enjoy most?",
        [
            "I keep buying books and never finish them, it is a problem.",
            "Reading before bed is the most relaxing part of my year.",
            "Did you enjoy the book club last time?",
        ],
        ["Piranesi", "Klara", "Stoner", "Middlemarch"],
    ),
    (
        "On {v} we celebrated my grandmother's ninetieth birthday with the whole family.",
        "temporal",
        "When was the birthday party of {A}'s grandmother?",
        [
            "My grandmother still calls me every Sunday to ask about my week.",
            "The birthday party for my nephew was chaos, twenty kids.",
            "When is your birthday again? I always forget.",
        ],
        ["3 March", "14 July", "22 October", "9 December"],
    ),
    (
        "I started a pottery class on {v}, my first bowl came out lopsided.",
        "temporal",
        "When did {A} begin pottery?",
        [
            "Did you see that lopsided cake on the baking show last night?",
            "My pottery teacher says I need more patience with the wheel.",
            "The yoga class I wanted to begin is already full.",
        ],
        ["2 February", "18 April", "7 June", "30 September"],
    ),
    (
        "The allergist told me I am allergic to {v}, so no more of that for me.",
        "single-hop",
        "What is {A} allergic to?",
        [
            "I have an appointment with a new doctor next week, a bit nervous.",
            "My dog is allergic to chicken, the vet says.",
            "Spring is the worst, my allergies go crazy.",
        ],
        ["peanuts", "shellfish", "sesame", "kiwi"],
    ),
    (
        "For work I am migrating our billing service to {v}, it is a huge project.",
        "paraphrase",
        "What is the billing at {A}'s work moving to?",
        [
            "Work has been a huge time sink lately, really exhausting.",
            "The billing department sent me the wrong invoice again.",
            "Our customer service is moving to a new office.",
        ],
        ["Kubernetes", "Postgres", "Rust", "Kafka"],
    ),
]
# Multi-hop: two facts about one plan; the question needs words of both.
MULTI = [
    (
        "After the conference in {v} I am taking a ferry to the islands.",
        "I booked a tiny cabin on the islands with no internet at all.",
        "Where is the conference {A} attends before the cabin trip to the islands?",
        ["Athens", "Split", "Naples", "Valletta"],
    ),
    (
        "My brother is getting married in {v} next autumn.",
        "I was asked to give the wedding speech and I am already terrified.",
        "In which city will the wedding where {A} gives the speech take place?",
        ["Porto", "Ghent", "Krakow", "Bergen"],
    ),
]
# Small talk is two clauses drawn from these: the everyday words questions use too
# ("name", "give", "play", "go", "most", "begin", "time", "week", "new"...), so a ranking
# that weighs every shared word alike is drawn to chatter, as on real conversations.
OPENERS = ["Honestly,", "Oh wow,", "Haha,", "Yeah,", "Well,", "Ok so", "Funny,", "Hmm,"]
CLAUSES = [
    "that sounds really great",
    "how was the rest of your week",
    "I think I need more time to relax",
    "work has been a lot lately",
    "what else is new with you",
    "we should catch up more often",
    "I mostly stayed home cooking and reading",
    "the weather was terrible all week",
    "did you watch the game last night",
    "I have been sleeping badly again",
    "we should go on a trip together sometime",
    "my favourite part of the day is coffee",
    "time flies so fast this year",
    "I tried a new recipe and it was too spicy",
    "can you give me the name of that podcast",
    "tell me more about it",
    "I need to call my parents this weekend",
    "I might get a new phone soon",
    "the new cafe near the station is nice",
    "I started going to the gym again",
    "the kids want to play outside all day",
    "I did not enjoy the movie much",
    "most of my friends moved away last year",
    "I want to begin something new",
    "that was the best part of the whole thing",
    "I read an article about that",
    "the city is so busy in the summer",
    "my job keeps me busy most days",
    "we had a party for a friend last month",
    "I will take a long walk later",
    "I love that so much",
    "let me know when you are free",
]


def _small_talk(rng: random.Random) -> str:
    first, second = rng.sample(CLAUSES, 2)
    return f"{rng.choice(OPENERS)} {first}, {second}."


def _conversation(rng: random.Random, c: int) -> dict:
    a, b = rng.sample(NAMES, 2)
    turns: list[dict] = []
    questions: list[dict] = []

    def say(speaker: str, text: str) -> str:
        tid = f"c{c}:{len(turns) + 1}"
        turns.append({"id": tid, "speaker": speaker, "text": text})
        return tid

    facts = rng.sample(FACTS, len(FACTS))
    plan: list[tuple[str, object]] = [("fact", f) for f in facts]
    plan += [("multi", m) for m in MULTI]
    plan += [("distract", text) for f in facts for text in f[3]]
    plan += [("talk", None)] * TALK_TURNS
    rng.shuffle(plan)
    for kind, item in plan:
        speaker = rng.choice((a, b))
        if kind == "talk":
            say(speaker, _small_talk(rng))
        elif kind == "distract":
            say(speaker, item)  # type: ignore[arg-type]
        elif kind == "fact":
            text, category, question, _, values = item  # type: ignore[misc]
            value = rng.choice(values)
            tid = say(speaker, text.format(v=value))
            say(b if speaker == a else a, _small_talk(rng))
            questions.append(
                {
                    "id": f"c{c}:q{len(questions) + 1}",
                    "question": question.format(A=speaker),
                    "evidence": [tid],
                    "category": category,
                }
            )
        else:
            first, second, question, values = item  # type: ignore[misc]
            one = say(speaker, first.format(v=rng.choice(values)))
            say(b if speaker == a else a, _small_talk(rng))
            two = say(speaker, second)
            questions.append(
                {
                    "id": f"c{c}:q{len(questions) + 1}",
                    "question": question.format(A=speaker),
                    "evidence": [one, two],
                    "category": "multi-hop",
                }
            )
    return {"id": f"c{c}", "speakers": [a, b], "turns": turns, "questions": questions}


def generate(seed: int = 32, conversations: int = 6) -> dict:
    """The data set: ``conversations`` conversations of ~150 turns, 12 questions each."""
    rng = random.Random(seed)
    return {
        "name": f"generated small conversational QA (seed {seed})",
        "conversations": [_conversation(rng, c + 1) for c in range(conversations)],
    }


def main() -> None:
    """Write the data set as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = generate(args.seed, args.conversations)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    turns = sum(len(c["turns"]) for c in data["conversations"])
    questions = sum(len(c["questions"]) for c in data["conversations"])
    print(f"{args.out}: {turns} turns, {questions} questions")


if __name__ == "__main__":
    main()
