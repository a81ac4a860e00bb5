"""Deterministic synthetic corpus of agent memories, for benchmarks.

``make_corpus(n, seed)`` returns ``(corpus, extras, queries)``:
  corpus  -- n (key, value, tags) triples with unique normalised keys
  extras  -- 200 more triples with fresh keys (for write phases)
  queries -- 260 (query, path_hints) pairs: 200 for warm recall, 60 for write+recall
The corpus for a smaller n is a prefix of the corpus for a larger n. English word
forms drawn Zipf-like, ~2 tags per memory from ~216 (including the type tags), values
50-400 characters, about a fifth of them mentioning a file path.
Use the same seed (1234) as the published figures so results are comparable.
"""

from __future__ import annotations

import random

# ---------------------------------------------------------------------------
# Deterministic synthetic corpus
# ---------------------------------------------------------------------------

_FUNCTION_WORDS = """
the a an to of and in for on with is are be it this that we our when after
before if then so but not only also all each every any some more most less
than because while until via per from into over under by at as should must
can will always never usually often instead which where there here same other
""".split()

_NOUNS = """
account action adapter address admin agent alert algorithm alias allocation
analysis annotation answer app application approach archive argument array
article artifact asset assignment attachment attempt attribute audit author
backend backlog backup badge balance bandwidth banner baseline batch behavior
benchmark binary block blog board body book boolean boundary branch breakpoint
browser bucket budget buffer bug build bundle button byte cache calendar
callback campaign candidate capacity card case catalog category certificate
change channel chapter character chart check checkout checksum child choice
chunk class clause client clock cluster code codebase collection column command
comment commit community company comparison compiler component computer concept
condition config configuration conflict connection console constant constraint
consumer container content context contract contributor control controller
convention cookie copy core cost counter country coverage cron cursor customer
cycle daemon dashboard data database dataset date deadline debt debugger
decision default defect delay delta demo dependency deployment description
design detail developer device diagram dialog dictionary diff directory disk
display document documentation domain draft driver duration editor effect
element email encoding endpoint engine engineer entity entry environment error
estimate event example exception experiment export expression extension factor
failure feature feedback field file filter fixture flag flow folder font footer
form format formula framework frontend function gateway generator goal grammar
graph grid group guide handler hash header heap helper history hook host hour
icon identifier image impact implementation import incident index input
instance integration interface interval inventory invoice issue item iteration
job journal kernel label language latency layer layout lead library license
limit line link list listener load locale lock log logic loop machine manager
manifest map market marker matrix measure meeting member memory menu merge
message metadata method metric middleware migration milestone minute mode model
module monitor month mutex name namespace network node note notification number
object offset option order origin outage output owner package page pagination
panel parameter parent parser partition patch path pattern payload payment peer
permission phase pipeline pixel placeholder plan platform plugin pointer policy
pool port position post preference prefix presentation price priority problem
procedure process processor product profile program progress project prompt
property protocol provider proxy query queue quota range rate reader reason
record recovery reference region registry regression release report repository
request requirement resource response result retry review revision risk role
rollback route router row rule runner runtime sample sandbox scale schedule
schema scope screen script search section sector segment selector sequence
server service session setting setup shard shell signal signature site size
slot snapshot socket software solution source space spec specification sprint
stack stage standard state statement status step storage store strategy stream
string structure style subject subscription suffix suite summary support switch
symbol syntax system table tag target task team template tenant term terminal
test text theme thread threshold ticket timeline timeout timer timestamp title
toggle tool topic trace tracker transaction transfer tree trigger tuple type
unit update upload url usage user utility validation validator value variable
vendor version view volume warning webhook website week widget window worker
workflow workspace wrapper year zone
agreement airport animal apple area army art baby bank bed bird boat bone
bottle box brain bread bridge brother car cat cell chair city cloud coast
coffee color corner course court cover crowd cup dance danger daughter desk
dinner dog door dream dress drink earth edge egg energy evening eye face fact
family farm father fire fish floor flower food foot forest friend fruit game
garden gas gift girl glass gold grass ground hair hall hand head health heart
heat hill hole home horse hospital hotel house idea island kitchen knowledge
lake land law leg letter level life lunch meal meat metal milk mind money
morning mother mountain mouth music nature neck news night noise nose ocean
office oil paper park party peace pen person phone picture piece place plant
plate pocket power prison radio rain river road rock roof room salt school sea
season seat shape shirt shoe shop side silver sister skin sky sleep smile snow
song sound soup speed sport spring square star station stone story street
student sugar sun surface teacher tea temperature thing thought time tooth town
toy truck truth uncle university vacation village voice wall war water wave
weather wheel wife wind wine winter wood word world writer yard
""".split()

# Nouns without a plural form in this corpus, and irregular plurals.
_UNCOUNTABLE = set(
    """
data metadata feedback software knowledge news health music usage documentation
progress money milk water sugar salt coffee tea gold silver food peace nature
heat energy rain snow weather backlog debt
""".split()
)
_IRREGULAR_PLURALS = {
    "child": "children",
    "foot": "feet",
    "tooth": "teeth",
    "wife": "wives",
    "life": "lives",
    "person": "people",
    "matrix": "matrices",
    "analysis": "analyses",
    "index": "indexes",
    "shelf": "shelves",
}

_VERBS = """
accept access add adjust allow analyze append apply approve archive assign
attach avoid bind boot bump cache call cancel change check clean clear clone
close collect combine compare compile complete compress compute configure
confirm connect consider contain continue convert copy correct count crash
create deploy debug declare decode decrease define delay delete deliver depend
deprecate describe destroy detect disable discuss display document download
duplicate edit emit enable encode encrypt end enforce ensure enter evaluate
exclude execute expand expect expire explain export extend extract fail fetch
fill filter finish fix flush follow force format generate handle hash help hide
highlight ignore implement import improve include increase index inject insert
inspect install integrate invalidate invoke join keep label launch limit link
list load lock look manage mark match measure merge migrate mirror miss monitor
mount move name need normalize notify observe open order organize override
pack parse pass patch pause perform persist pick point poll post prefer prepare
preserve prevent print process produce profile protect provide publish pull
push query queue raise reach read rebuild receive record recover reduce refactor
refresh register reject release reload remove rename render repair repeat
replace reply report request require reset resolve respond restart restore
retry return reuse review revert rotate route run save scale schedule search
select send separate serve share show sign simplify sort split start store
stream subscribe suggest support sync test throttle track train transform
translate trust try tune type undo unify update upgrade upload use validate
verify wait want warn watch work write
""".split()

# Verbs whose final consonant doubles (commit -> committed, committing).
_DOUBLING_VERBS = """
commit drop map plan ship skip stop wrap submit tag log pin step swap trim zip
chop scan emit prefer control format permit admit refer occur transfer
""".split()

# Irregular verb forms (base first).
_IRREGULAR_VERBS = {
    "run": ["run", "runs", "ran", "running"],
    "send": ["send", "sends", "sent", "sending"],
    "keep": ["keep", "keeps", "kept", "keeping"],
    "write": ["write", "writes", "wrote", "written", "writing"],
    "read": ["read", "reads", "reading"],
    "split": ["split", "splits", "splitting"],
    "hide": ["hide", "hides", "hid", "hidden", "hiding"],
    "bind": ["bind", "binds", "bound", "binding"],
    "rebuild": ["rebuild", "rebuilds", "rebuilt", "rebuilding"],
    "undo": ["undo", "undoes", "undid", "undone", "undoing"],
    "show": ["show", "shows", "showed", "shown", "showing"],
}

_ADJECTIVES = """
active async automatic available backward basic best broken busy careful
central clean clear cold common compatible complete complex concurrent
consistent correct critical current custom daily dark dead deep default
dependent deprecated different direct dirty disabled distinct duplicate dynamic
early easy empty enabled entire equal exact excessive existing expensive
experimental explicit external extra fair fast fatal final first fixed flaky
flat free fresh frozen full global good great hard heavy hidden high hot huge
idle immutable implicit important incremental initial inline interactive
internal invalid known large last late lazy legacy light linear live local
long loose low main major manual maximum minimal minor missing mobile modern
monthly multiple mutable native nested neutral next nightly normal offline old
online open optional ordinary original outdated parallel partial pending
permanent persistent plain portable positive possible precise preferred
primary private proper public quick random rare raw ready real recent
redundant regular relative reliable remote required reusable robust root rough
safe scalable secure separate sequential serial shallow shared short silent
similar simple single slow small smart soft solid sparse special stable stale
standard static steady strict strong structured successful sudden sufficient
synchronous temporary tight total transient transparent trivial typical unique
unknown unstable unused upstream urgent useful valid verbose visible weak
weekly wide wrong
""".split()

_ADVERBS = """
again already asynchronously automatically carefully correctly daily directly
early eventually exactly explicitly fast finally first frequently generally
immediately incrementally internally lazily locally manually mostly nightly
normally once quickly rarely really recently regularly reliably remotely
safely silently simply slowly soon strictly temporarily together twice
""".split()

_TAGS = """
python django flask fastapi javascript typescript react vue css html sql
postgres mysql sqlite redis kafka docker kubernetes terraform aws gcp azure
linux macos windows git github gitlab ci cd testing pytest unittest e2e
integration performance security auth oauth api rest graphql grpc websocket
frontend backend database migration cache logging monitoring metrics tracing
alerting deploy release staging production config docs readme changelog style
lint format types mypy ruff black refactor bug bugfix hotfix feature ux ui
accessibility i18n l10n timezone billing payments email notifications search
indexing queue worker celery cron scheduler storage s3 cdn dns networking http
tls cors csrf sessions cookies admin permissions roles users teams onboarding
analytics reporting dashboard export import csv json yaml toml xml pdf images
video audio mobile ios android desktop cli tui shell bash make build packaging
pip poetry npm yarn webpack vite babel node deno rust go java kotlin swift cpp
wasm llm prompt agent memory embedding retrieval tokenizer model training
inference gpu dataset evaluation benchmark profiling latency throughput
concurrency async threading locking transactions orm schema backup recovery
incident oncall postmortem roadmap planning estimate meeting review code-review
pairing convention naming architecture design api-design versioning deprecation
compatibility legacy tech-debt cleanup experiment feature-flag ab-test sla
compliance gdpr privacy audit legal vendor budget cost
preference workflow decision constraint profile project_fact user personal
""".split()

_PATH_DIRS = [
    "src/app",
    "src/api",
    "src/core",
    "src/utils",
    "src/models",
    "src/services",
    "src/memory",
    "src/agent",
    "tests",
    "tests/unit",
    "tests/integration",
    "docs",
    "config",
    "scripts",
    "frontend/src/components",
    "frontend/src/pages",
    "migrations",
    "deploy",
    ".github/workflows",
    "backend/accounts",
]
_PATH_FILES = [
    "views.py",
    "models.py",
    "urls.py",
    "settings.py",
    "serializers.py",
    "tasks.py",
    "admin.py",
    "forms.py",
    "utils.py",
    "client.py",
    "handlers.py",
    "conftest.py",
    "test_api.py",
    "test_models.py",
    "storage.py",
    "retriever.py",
    "index.md",
    "setup.md",
    "README.md",
    "config.yaml",
    "settings.toml",
    "ci.yml",
    "App.tsx",
    "Button.tsx",
    "index.ts",
    "api.ts",
    "styles.css",
    "main.go",
    "lib.rs",
    "schema.json",
]


def _inflect_verb(v: str) -> list[str]:
    if v in _IRREGULAR_VERBS:
        return _IRREGULAR_VERBS[v]
    if v in _DOUBLING_VERBS:
        return [v, v + "s", v + v[-1] + "ed", v + v[-1] + "ing"]
    if v.endswith("e"):
        return [v, v + "s", v + "d", v[:-1] + "ing"]
    if v.endswith("y") and v[-2:-1] not in "aeiou":
        return [v, v[:-1] + "ies", v[:-1] + "ied", v + "ing"]
    if v.endswith(("s", "sh", "ch", "x", "z")):
        return [v, v + "es", v + "ed", v + "ing"]
    return [v, v + "s", v + "ed", v + "ing"]


def _pluralize(n: str) -> str | None:
    if n in _UNCOUNTABLE:
        return None
    if n in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[n]
    if n.endswith(("s", "sh", "ch", "x", "z")):
        return n + "es"
    if n.endswith("y") and n[-2:-1] not in "aeiou":
        return n[:-1] + "ies"
    return n + "s"


def build_vocabulary() -> list[str]:
    """Content vocabulary (~2.5k real English word forms), deterministic order."""
    words: list[str] = []
    seen = set()

    def add(w: str | None) -> None:
        if w and w not in seen:
            seen.add(w)
            words.append(w)

    for n in _NOUNS:
        add(n)
        add(_pluralize(n))
    for v in _VERBS + _DOUBLING_VERBS:
        for f in _inflect_verb(v):
            add(f)
    for a in _ADJECTIVES + _ADVERBS:
        add(a)
    # Drop anything that is a retriever/guard stopword: it would never be a
    # useful query term.
    return [w for w in words if w not in set(_FUNCTION_WORDS)]


def build_paths() -> list[str]:
    rng = random.Random(99)
    combos = [f"{d}/{f}" for d in _PATH_DIRS for f in _PATH_FILES]
    rng.shuffle(combos)
    return sorted(combos[:150])


class _ZipfSampler:
    """Zipf-Mandelbrot weights 1/(rank+q)^s over a deterministically shuffled list."""

    def __init__(self, items: list[str], rng_seed: int, s: float = 1.0, q: float = 15.0):
        order = list(items)
        random.Random(rng_seed).shuffle(order)
        self.items = order
        acc = 0.0
        self.cum: list[float] = []
        for rank in range(1, len(order) + 1):
            acc += 1.0 / (rank + q) ** s
            self.cum.append(acc)

    def draw(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.items, cum_weights=self.cum, k=k)


class CorpusGenerator:
    """Deterministic generator: memory i depends only on (seed, i) via one stream,
    so the corpus for N=1000 is the prefix of the corpus for N=10000."""

    def __init__(self, seed: int = 1234):
        self.seed = seed
        self.vocab = build_vocabulary()
        self.paths = build_paths()
        self.tags = list(dict.fromkeys(_TAGS))
        self.words = _ZipfSampler(self.vocab, seed + 11)
        self.tag_sampler = _ZipfSampler(self.tags, seed + 13, s=0.6, q=5.0)

    def _sentence(self, rng: random.Random) -> str:
        n = rng.randint(5, 14)
        content = self.words.draw(rng, n)
        out: list[str] = []
        for w in content:
            if rng.random() < 0.35:
                out.append(rng.choice(_FUNCTION_WORDS))
            out.append(w)
        if rng.random() < 0.3:
            out.insert(rng.randint(1, len(out)), ",")
        s = " ".join(out).replace(" ,", ",")
        return s[0].upper() + s[1:] + "."

    def _value(self, rng: random.Random) -> str:
        target = rng.randint(50, 400)
        parts: list[str] = []
        length = 0
        paths_left = 1 if rng.random() < 0.35 else 0
        if paths_left and rng.random() < 0.3:
            paths_left = 2
        while length < target:
            sent = self._sentence(rng)
            if paths_left and rng.random() < 0.6:
                p = rng.choice(self.paths)
                sent = sent[:-1] + rng.choice([" in ", " see ", " via ", " under "]) + p + "."
                paths_left -= 1
            parts.append(sent)
            length += len(sent) + 1
        text = " ".join(parts)
        if len(text) > target:
            cut = text.rfind(" ", 0, target)
            text = text[: cut if cut >= 40 else target].rstrip(",.") + "."
        if len(text) < 50:
            text = (text + " " + self._sentence(rng))[:400]
        return text

    def _key(self, rng: random.Random) -> str:
        words = self.words.draw(rng, rng.randint(2, 5))
        style = rng.random()
        if style < 0.6:
            return " ".join(words)
        if style < 0.85:
            return "_".join(words)
        return " ".join(w.capitalize() for w in words)

    def memories(self, n: int, rng: random.Random, taken: set) -> list[tuple[str, str, list[str]]]:
        out = []
        while len(out) < n:
            key = self._key(rng)
            norm = _norm_key(key)
            if norm in taken:
                continue
            taken.add(norm)
            value = self._value(rng)
            k = rng.randint(0, 4)
            tags = list(dict.fromkeys(self.tag_sampler.draw(rng, k))) if k else []
            out.append((key, value, tags))
        return out

    def queries(self, n: int, rng: random.Random) -> list[tuple[str, list[str]]]:
        out = []
        for _ in range(n):
            q = " ".join(self.words.draw(rng, rng.randint(2, 6)))
            hints = [rng.choice(self.paths) for _ in range(rng.randint(0, 2))]
            out.append((q, hints))
        return out


def _norm_key(key: str) -> str:
    # Same normalization as MemoryGuard.normalize_key (kept local so corpus
    # generation never imports the library under test).
    import re

    key = key.strip().lower()
    key = re.sub(r"\s+", "_", key)
    key = re.sub(r"[^a-z0-9_]+", "_", key)
    key = re.sub(r"_+", "_", key).strip("_")
    return key[:80]


def make_corpus(n: int, seed: int = 1234, n_extras: int = 200):
    """(corpus, extras, queries) -- deterministic for (n, seed).

    corpus  : n (key, value, tags) triples, inserted before measuring
    extras  : n_extras more triples with fresh keys, used by the write phases
    queries : 200 (query, hints) pairs for the warm phase, then 60 more for
              the cold / write+recall phases
    """
    gen = CorpusGenerator(seed)
    taken: set = set()
    corpus = gen.memories(n, random.Random(seed), taken)
    extras = gen.memories(n_extras, random.Random(seed + 1), taken)
    queries = gen.queries(260, random.Random(seed + 2))
    return corpus, extras, queries


def make_queries(seed: int = 1234):
    return CorpusGenerator(seed).queries(260, random.Random(seed + 2))
