"""Tests for the rule-based crystallizer (memoryapp.rules.crystallizer, docs/behaviour.md §6)."""

from __future__ import annotations

import dataclasses

import pytest

from memoryapp.rules.crystallizer import Proposal, propose, user_texts


def user(content: object) -> dict[str, object]:
    return {"role": "user", "content": content}


def one(text: str) -> Proposal:
    """The single proposal of a one-message call (fails when there is not exactly one)."""
    proposals = propose([user(text)])
    assert len(proposals) == 1, proposals
    return proposals[0]


def keys(messages: list[dict[str, object]]) -> list[str]:
    return [p.key_normalized for p in propose(messages)]


# --------------------------------------------------------------------------- families


FAMILIES = [
    # (text, scope, type, key, content)
    ("I prefer dark mode in the editor", "user", "preference", "preference_dark_mode_in_the",
     "dark mode in the editor"),
    ("I like green tea", "user", "preference", "preference_green_tea", "green tea"),
    ("I use vim", "user", "preference", "preference_vim", "vim"),
    ("I want a faster build", "user", "preference", "preference_a_faster_build", "a faster build"),
    ("i PREFER Tabs", "user", "preference", "preference_tabs", "Tabs"),
    ("我喜欢用空格缩进", "user", "preference", "preference_用空格缩进", "用空格缩进"),
    ("我偏好暗色主题", "user", "preference", "preference_暗色主题", "暗色主题"),
    ("我倾向于使用 tabs", "user", "preference", "preference_使用_tabs", "使用 tabs"),
    ("我倾向简洁的代码", "user", "preference", "preference_简洁的代码", "简洁的代码"),
    ("我想用 Python 写脚本", "user", "preference", "preference_python_写脚本", "Python 写脚本"),
    # A constraint keeps its modal force ("never", "must") in the content; a
    # forbidding one keys with "not" (issue #29: never "Constraint: deploy on Fridays").
    ("Never use tabs for indentation", "project", "constraint",
     "constraint_not_use_tabs_for_indentation", "never use tabs for indentation"),
    ("Always run tests before merging", "project", "constraint",
     "constraint_run_tests_before_merging", "always run tests before merging"),
    ("Don't push to main", "project", "constraint", "constraint_not_push_to_main",
     "don't push to main"),
    ("Don\u2019t push to main", "project", "constraint", "constraint_not_push_to_main",
     "don't push to main"),
    ("Do not use global variables", "project", "constraint",
     "constraint_not_use_global_variables", "do not use global variables"),
    ("You must not commit secrets", "project", "constraint", "constraint_not_commit_secrets",
     "must not commit secrets"),
    ("You must sign commits", "project", "constraint", "constraint_sign_commits",
     "must sign commits"),
    ("NEVER deploy on Fridays", "project", "constraint", "constraint_not_deploy_on_fridays",
     "never deploy on Fridays"),
    ("不要用 tabs", "project", "constraint", "constraint_not_用_tabs", "不要用 tabs"),
    ("永远不要用 tabs", "project", "constraint", "constraint_not_用_tabs", "永远不要用 tabs"),
    ("永远不提交密钥", "project", "constraint", "constraint_not_提交密钥", "永远不提交密钥"),
    ("我们从不在周五发布", "project", "constraint", "constraint_not_在周五发布", "从不在周五发布"),
    ("我们必须在合并前运行测试", "project", "constraint", "constraint_在合并前运行测试",
     "必须在合并前运行测试"),
    ("禁止直接推送到主分支", "project", "constraint", "constraint_not_直接推送到主分支",
     "禁止直接推送到主分支"),
    ("We decided to adopt a monorepo", "project", "decision", "decision_adopt_a_monorepo",
     "adopt a monorepo"),
    ("let's use Postgres", "project", "decision", "decision_postgres", "Postgres"),
    ("Let\u2019s use Rust", "project", "decision", "decision_rust", "Rust"),
    ("We are switching to TypeScript", "project", "decision", "decision_typescript",
     "TypeScript"),
    ("We're going to use Redis for caching", "project", "decision",
     "decision_redis_for_caching", "Redis for caching"),
    ("We chose Postgres over MySQL", "project", "decision", "decision_postgres_over_mysql",
     "Postgres over MySQL"),
    ("我们决定使用 Docker 部署服务", "project", "decision", "decision_使用_docker_部署服务",
     "使用 Docker 部署服务"),
    ("我们选择 PostgreSQL", "project", "decision", "decision_postgresql", "PostgreSQL"),
    ("改用 pnpm 管理依赖", "project", "decision", "decision_pnpm_管理依赖", "pnpm 管理依赖"),
    ("采用微服务架构", "project", "decision", "decision_微服务架构", "微服务架构"),
    ("Our workflow is: lint, test, deploy", "project", "workflow", "workflow_lint_test_deploy",
     "lint, test, deploy"),
    ("Workflow: lint and test", "project", "workflow", "workflow_lint_and_test",
     "lint and test"),
    ("The process: plan, build, verify", "project", "workflow", "workflow_plan_build_verify",
     "plan, build, verify"),
    ("The deploy pipeline is : build, test, ship", "project", "workflow",
     "workflow_build_test_ship", "build, test, ship"),
    ("工作流是：先测试再部署", "project", "workflow", "workflow_先测试再部署", "先测试再部署"),
    ("流程为:需求评审，开发，测试", "project", "workflow", "workflow_需求评审_开发_测试",
     "需求评审，开发，测试"),
    ("工作流：规划", "project", "workflow", "workflow_规划", "规划"),
    ("我们的工作流程是：开发→测试→上线", "project", "workflow", "workflow_开发_测试_上线",
     "开发→测试→上线"),
]  # fmt: skip

TITLE_PREFIX = {
    "preference": "Preference: ",
    "constraint": "Constraint: ",
    "decision": "Decision: ",
    "workflow": "Workflow: ",
}


@pytest.mark.parametrize(("text", "scope", "type_", "key", "content"), FAMILIES)
def test_phrase_families(text: str, scope: str, type_: str, key: str, content: str) -> None:
    proposal = one(text)
    assert proposal.scope == scope
    assert proposal.type == type_
    assert proposal.key_normalized == key
    assert proposal.content == content
    assert proposal.title == TITLE_PREFIX[type_] + content
    assert proposal.evidence == text.strip()
    assert proposal.occurrences == 1
    assert proposal.confidence == "auto_summary"
    assert proposal.tags == (type_,)


def test_spec_examples() -> None:
    assert one("Never use tabs for indentation").key_normalized == (
        "constraint_not_use_tabs_for_indentation"
    )
    assert one("我们决定使用 Docker 部署服务").key_normalized == "decision_使用_docker_部署服务"


def test_proposal_is_frozen() -> None:
    proposal = one("I prefer tabs")
    with pytest.raises(dataclasses.FrozenInstanceError):
        proposal.content = "spaces"  # type: ignore[misc]


# ------------------------------------------------------------------ phrase boundaries


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("I prefer tabs; not spaces", "tabs"),
        ("I prefer tabs; spaces are fine too", "tabs"),
        ("I prefer tabs. Spaces are fine too", "tabs"),
        ("I prefer tabs\nand more", "tabs"),
        ("I prefer tabs\r\nand more", "tabs"),
        ("我喜欢简洁的代码，谢谢", "简洁的代码"),
        ("我喜欢简洁的代码。谢谢", "简洁的代码"),
        ("我喜欢简洁的代码；谢谢", "简洁的代码"),
        ("I prefer   tabs   ", "tabs"),
        ("I prefer node.js", "node"),
        ("I prefer tabs!", "tabs!"),
    ],
)
def test_phrase_stops_at_terminator(text: str, content: str) -> None:
    assert one(text).content == content


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("workflow: lint, test; deploy. then rest", "lint, test; deploy"),
        ("workflow: lint, test\nthen rest", "lint, test"),
        ("工作流是：规划，构建；验证。然后发布", "规划，构建；验证"),
    ],
)
def test_workflow_runs_to_full_stop_or_newline(text: str, content: str) -> None:
    assert one(text).content == content


def test_inner_whitespace_kept_in_content_collapsed_in_title() -> None:
    proposal = one("i LIKE  green \t tea ")
    assert proposal.content == "green \t tea"
    assert proposal.title == "Preference: green tea"
    assert proposal.key_normalized == "preference_green_tea"


@pytest.mark.parametrize(
    "text",
    [
        "I prefer",
        "I prefer\ntabs",
        "Never, ever",
        "workflow is lint then test",  # no colon
        "workflow:\nlint then test",
        "偏好暗色主题",  # the Chinese preference triggers all start with 我
        "必须。",
    ],
)
def test_no_phrase_no_candidate(text: str) -> None:
    assert propose([user(text)]) == []


def test_must_not_is_one_trigger() -> None:
    proposal = one("We must not deploy on fridays")
    assert proposal.content == "must not deploy on fridays"
    assert proposal.key_normalized == "constraint_not_deploy_on_fridays"
    # "must" followed by a word starting with "not" is plain "must".
    proposal = one("You must notify ops")
    assert (proposal.content, proposal.key_normalized) == (
        "must notify ops",
        "constraint_notify_ops",
    )


def test_families_match_independently_in_one_message() -> None:
    proposals = propose([user("必须采用 Docker 部署")])
    assert [(p.type, p.content) for p in proposals] == [
        ("constraint", "必须采用 Docker 部署"),
        ("decision", "Docker 部署"),
    ]
    proposals = propose([user("Always run tests. Never push to main. I prefer tabs")])
    assert [p.key_normalized for p in proposals] == [
        "constraint_run_tests",
        "constraint_not_push_to_main",
        "preference_tabs",
    ]


# --------------------------------------------------------------------------- roles


@pytest.mark.parametrize("role", ["assistant", "tool", "system", "User", "", None])
def test_only_user_messages_are_read(role: object) -> None:
    phrases = "I prefer tabs. Never push to main. We chose Rust. workflow: lint then test"
    messages = [{"role": role, "content": phrases}]
    assert propose(messages) == []
    assert user_texts(messages) == []
    # The same phrases in a user message do produce.
    assert len(propose([user(phrases)])) == 4


def test_non_user_messages_do_not_add_occurrences() -> None:
    messages = [
        {"role": "assistant", "content": "I prefer tabs"},
        user("I prefer tabs"),
        {"role": "tool", "content": "I prefer tabs"},
        {"role": "system", "content": "I prefer tabs"},
    ]
    (proposal,) = propose(messages)
    assert proposal.occurrences == 1
    assert proposal.confidence == "auto_summary"


def test_message_without_role_is_skipped() -> None:
    assert propose([{"content": "I prefer tabs"}]) == []


# ------------------------------------------------------------------ content shapes


def test_list_content_text_blocks_read_other_blocks_ignored() -> None:
    content = [
        {"type": "text", "text": "I prefer tabs"},
        {"type": "image", "text": "I like cats", "source": "x.png"},
        {"type": "tool_result", "text": "We chose Rust"},
        {"type": "text", "text": "Never push to main"},
    ]
    assert keys([user(content)]) == ["preference_tabs", "constraint_not_push_to_main"]


def test_text_blocks_do_not_run_into_each_other() -> None:
    content = [{"type": "text", "text": "I prefer tabs"}, {"type": "text", "text": "over all"}]
    assert one_from(content).content == "tabs"
    assert user_texts([user(content)]) == ["I prefer tabs\nover all"]


def one_from(content: object) -> Proposal:
    proposals = propose([user(content)])
    assert len(proposals) == 1, proposals
    return proposals[0]


def test_pin_marker_ignored() -> None:
    proposal = one("[PIN] I prefer tabs")
    assert proposal.content == "tabs"
    assert proposal.evidence == "I prefer tabs"
    assert user_texts([user("[PIN] I prefer tabs")]) == ["I prefer tabs"]
    assert user_texts([user("  [PIN]I prefer tabs")]) == ["I prefer tabs"]
    # The marker in a list content is the leading one of the joined text.
    assert user_texts([user([{"type": "text", "text": "[PIN] Never push"}])]) == ["Never push"]
    # Only a leading marker is removed.
    assert user_texts([user("I prefer tabs [PIN]")]) == ["I prefer tabs [PIN]"]


def test_pin_marker_does_not_hide_a_workflow_or_add_to_it() -> None:
    proposal = one("[PIN]Workflow: lint and test")
    assert proposal.content == "lint and test"
    assert "[PIN]" not in proposal.evidence


def test_pinned_and_plain_message_fold_together() -> None:
    (proposal,) = propose([user("[PIN] I prefer tabs"), user("I prefer tabs")])
    assert proposal.occurrences == 2


@pytest.mark.parametrize(
    "messages",
    [
        None,
        5,
        object(),
        [None, 3, "I prefer tabs", ["I prefer tabs"]],
        [{"role": "user"}],
        [{"role": "user", "content": None}],
        [{"role": "user", "content": 42}],
        [{"role": "user", "content": {"type": "text", "text": "I prefer tabs"}}],
        [{"role": "user", "content": [1, "I prefer tabs", None, {"type": "text", "text": 3}]}],
        [{"role": "user", "content": [{"type": "text"}, {"text": "I prefer tabs"}]}],
        [{"role": "user", "content": "   "}],
        [{"role": "user", "content": "[PIN]"}],
    ],
)
def test_malformed_input_is_skipped(messages: object) -> None:
    assert user_texts(messages) == []  # type: ignore[arg-type]
    assert propose(messages) == []  # type: ignore[arg-type]


def test_malformed_messages_do_not_hide_good_ones() -> None:
    messages = [None, {"role": "user", "content": 1}, user("I prefer tabs"), "junk"]
    assert user_texts(messages) == ["I prefer tabs"]
    assert keys(messages) == ["preference_tabs"]


def test_generator_of_messages_is_accepted() -> None:
    assert keys(user(t) for t in ["I prefer tabs", "Never push"]) == [
        "preference_tabs",
        "constraint_not_push",
    ]


# --------------------------------------------------------------------- length bounds


@pytest.mark.parametrize(
    ("trigger", "unit", "low", "high"),
    [
        ("I prefer ", "a", 3, 80),
        ("Never ", "a", 3, 80),
        ("We chose ", "a", 3, 80),
        ("我喜欢", "好", 2, 40),
        ("不要", "好", 2, 40),
        ("决定", "好", 2, 40),
        ("workflow: ", "a", 5, 120),
        ("工作流：", "好", 2, 80),
    ],
)
def test_length_bounds_at_their_edges(trigger: str, unit: str, low: int, high: int) -> None:
    # The bounds are the phrase's; a constraint's content also keeps its trigger.
    kept = trigger.lower() if trigger.strip() in ("Never", "不要") else ""
    assert propose([user(trigger + unit * (low - 1))]) == []
    assert one(trigger + unit * low).content == kept + unit * low
    assert one(trigger + unit * high).content == kept + unit * high
    # Too long: cut at the maximum, as Agentao's bounded phrase patterns cut it.
    assert one(trigger + unit * (high + 1)).content == kept + unit * high
    if trigger.isascii() and not kept:
        long = [user(trigger + unit * (high + 25) + " tail")]
        assert _ours(long) == _reference(long)


def test_bounds_follow_the_trigger_language() -> None:
    # A Chinese trigger takes the Chinese bounds even for an English phrase ...
    assert one("我喜欢 go").content == "go"
    assert propose([user("我喜欢 x")]) == []
    # ... and an English trigger the English bounds even for a Chinese phrase.
    assert propose([user("I like 猫猫")]) == []
    assert one("I like 小猫咪").content == "小猫咪"


def test_length_is_measured_on_the_stripped_phrase() -> None:
    assert propose([user("I prefer ab   ")]) == []
    assert one("I prefer " + "a" * 80 + "    ").content == "a" * 80


def test_too_long_phrase_is_cut_and_does_not_block_other_families() -> None:
    text = "I prefer " + "a" * 81 + ". Always push to main"
    assert keys([user(text)]) == ["preference_" + "a" * 80, "constraint_push_to_main"]
    ours, reference = _ours([user(text)]), _reference([user(text)])
    assert ours[0] == reference[0]
    # The constraint differs only in keeping its modal word (see PARITY_DIFFERENCES).
    assert ours[1][:3] == reference[1][:3] and ours[1][4] == "always push to main"


# ---------------------------------------------------------------------- key and title


def test_key_uses_first_four_word_tokens_lower_cased() -> None:
    proposal = one("Always run pytest-xdist with 4 workers")
    assert proposal.key_normalized == "constraint_run_pytest_xdist_with"


def test_key_digits_and_symbols_are_not_tokens() -> None:
    assert one("I prefer Python3 over py2").key_normalized == "preference_python_over_py"


def test_key_cjk_runs_are_not_segmented() -> None:
    assert one("必须在周五下午发布新版本").key_normalized == "constraint_在周五下午发布新版本"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("I prefer 123", "preference_unknown"),
        ("必须 123", "constraint_unknown"),
        ("不要 123", "constraint_not_unknown"),
        ("We chose 42!", "decision_unknown"),
        ("workflow: 1 -> 2 -> 3", "workflow_unknown"),
    ],
)
def test_unknown_key(text: str, key: str) -> None:
    assert one(text).key_normalized == key


def test_title_not_cut_at_sixty() -> None:
    phrase = "b" * 60
    assert one("I prefer " + phrase).title == "Preference: " + phrase


def test_title_cut_past_sixty() -> None:
    phrase = "c" * 61
    proposal = one("I prefer " + phrase)
    assert proposal.title == "Preference: " + "c" * 57 + "…"
    assert proposal.content == phrase


def test_title_length_counts_collapsed_whitespace() -> None:
    # 60 characters once collapsed, 70 as written: not cut.
    phrase = "word " * 11 + "last!"
    spaced = phrase.replace(" ", "  ")
    assert len(phrase) == 60
    assert one("I prefer " + spaced).title == "Preference: " + phrase


def test_title_cut_for_workflow() -> None:
    phrase = ", ".join(["step"] * 20)
    proposal = one("workflow: " + phrase)
    assert proposal.title == "Workflow: " + phrase[:57] + "…"


# --------------------------------------------------------------------------- evidence


def test_evidence_forty_characters_either_side() -> None:
    text = "b" * 60 + " I prefer tabs." + "a" * 60
    assert one(text).evidence == "b" * 39 + " I prefer tabs." + "a" * 39


def test_evidence_is_stripped() -> None:
    assert one("  well  I prefer tabs   ").evidence == "well  I prefer tabs"


def test_evidence_window_is_relative_to_the_match_not_the_message() -> None:
    text = "z" * 100 + " Never push to main. " + "y" * 100
    evidence = one(text).evidence
    assert evidence.startswith("z" * 39 + " Never")
    assert evidence.endswith("main. " + "y" * 38)


def test_evidence_capped_at_240() -> None:
    # Whitespace inside a trigger is unbounded, so the match can exceed 240.
    text = "p" * 100 + " workflow" + " " * 50 + "is:" + " " * 30 + "w" * 120 + ". " + "q" * 100
    proposal = one(text)
    assert proposal.content == "w" * 120
    assert len(proposal.evidence) == 238 and proposal.evidence.endswith("…")  # 237 + "…"
    assert proposal.evidence.startswith("p" * 39 + " workflow")


# ----------------------------------------------------------------------------- folding


def test_same_message_repeating_a_phrase_counts_once() -> None:
    (proposal,) = propose([user("I prefer tabs. I prefer tabs. I prefer tabs")])
    assert proposal.occurrences == 1
    assert proposal.confidence == "auto_summary"


def test_within_one_message_the_last_occurrence_supplies_the_text() -> None:
    (proposal,) = propose([user("I prefer Tabs. Later on, I prefer tabs!")])
    assert proposal.content == "tabs!"
    assert proposal.occurrences == 1


def test_two_messages_fold_latest_wins() -> None:
    messages = [user("I prefer Tabs"), user("Honestly I prefer tabs!")]
    (proposal,) = propose(messages)
    assert proposal.key_normalized == "preference_tabs"
    assert proposal.occurrences == 2
    assert proposal.confidence == "inferred"
    assert proposal.content == "tabs!"
    assert proposal.title == "Preference: tabs!"
    assert proposal.evidence == "Honestly I prefer tabs!"


def test_occurrences_count_messages() -> None:
    messages = [user("Never push to main"), user("never push to main. Never push to main")] * 2
    (proposal,) = propose(messages)
    assert proposal.occurrences == 4
    assert proposal.confidence == "inferred"


def test_order_is_first_appearance() -> None:
    messages = [
        user("Never push to main; I prefer tabs"),
        user("We chose Rust"),
        user("I prefer tabs. never push to main"),
    ]
    proposals = propose(messages)
    assert [p.key_normalized for p in proposals] == [
        "constraint_not_push_to_main",
        "preference_tabs",
        "decision_rust",
    ]
    assert [p.occurrences for p in proposals] == [2, 2, 1]
    assert [p.confidence for p in proposals] == ["inferred", "inferred", "auto_summary"]


def test_different_types_with_same_words_do_not_fold() -> None:
    assert keys([user("I prefer tabs"), user("Always tabs")]) == [
        "preference_tabs",
        "constraint_tabs",
    ]


def test_english_and_chinese_keys_are_distinct() -> None:
    assert keys([user("不要用 tabs"), user("Don't use tabs")]) == [
        "constraint_not_用_tabs",
        "constraint_not_use_tabs",
    ]


def test_empty_call() -> None:
    assert propose([]) == []
    assert user_texts([]) == []


# -------------------------------------------------------------------- word boundaries


@pytest.mark.parametrize(
    "text",
    [
        "Unlike you, tabs are great",
        "I likely will go home",
        "She spoke usefully about things",
        "I useful things",
        "I preferred tabs back then",
        "I wanted more coffee",
        "AI like robots everywhere",
        "Nevertheless it works fine",
        "Alwaysbe closing the deal",
        "The mustard is great today",
        "You mustn't do that",
        "Dont push to main",
        "lets use Rust here",
        "we decided together",
        "switching tools is hard",
        "the chosen one arrives",
        "going to userland today",
        "Processing: abcde fghij",
        "subprocess: abcde fghij",
        "Workflows: abcde fghij",
        "my pipelines: abcde fghij",
    ],
)
def test_word_boundary_near_misses_produce_nothing(text: str) -> None:
    assert propose([user(text)]) == []


def test_cjk_neighbour_is_a_word_boundary() -> None:
    assert one("好的I prefer tabs").key_normalized == "preference_tabs"
    assert one("说never use tabs").key_normalized == "constraint_not_use_tabs"


# ------------------------------------------------------- parity with the reference runtime


PARITY = [
    "我们决定使用 Docker 部署服务",
    "I prefer dark mode in the editor",
    "I like pizza",
    "unlike you I like green tea",
    "Our workflow is: lint, test, deploy. ok",
    "工作流是：先测试再部署",
    "let's use Postgres",
    "we decided to go with Rust, ok",
    "我倾向于使用 tabs",
    "i LIKE  green   tea ",
    "I prefer node.js",
    "I prefer 123",
    "we chose Postgres; we like it",
    "We are switching to TypeScript next month",
    "The deploy pipeline is: build, test, ship to staging. Then prod.",
    "流程：需求评审、开发、测试",
    "The quick brown fox jumps over the lazy dog and then I prefer spaces over tabs. ok",
    "I like it, I like it, I like it",
    "usefully said",
]
"""Messages on which we and Agentao 0.5.17 agree field for field."""

# Deliberate differences (issue #29, docs/agentao.md "The crystallizer keeps polarity"):
# Agentao drops a constraint's trigger, so "Never X" and "Always X" both read "X" and
# share one key. Per message, per proposal: {field: (Agentao's value, ours)}; every
# other field is equal. The wider measurement is tests/polarity_corpus.py.
PARITY_DIFFERENCES: list[tuple[str, list[dict[str, tuple[str, str]]]]] = [
    ("Never use tabs for indentation", [{
        "key_normalized": ("constraint_use_tabs_for_indentation",
                           "constraint_not_use_tabs_for_indentation"),
        "title": ("Constraint: use tabs for indentation",
                  "Constraint: never use tabs for indentation"),
        "content": ("use tabs for indentation", "never use tabs for indentation"),
    }]),
    ("我喜欢简洁的代码，不要写注释。谢谢", [{}, {
        "key_normalized": ("constraint_写注释", "constraint_not_写注释"),
        "title": ("Constraint: 写注释", "Constraint: 不要写注释"),
        "content": ("写注释", "不要写注释"),
    }]),
    ("Always run tests. Never push to main.", [{
        # A positive modal keeps its key: only the text gains the modal word.
        "title": ("Constraint: run tests", "Constraint: always run tests"),
        "content": ("run tests", "always run tests"),
    }, {
        "key_normalized": ("constraint_push_to_main", "constraint_not_push_to_main"),
        "title": ("Constraint: push to main", "Constraint: never push to main"),
        "content": ("push to main", "never push to main"),
    }]),
    ("必须采用 Docker 部署", [{
        "title": ("Constraint: 采用 Docker 部署", "Constraint: 必须采用 Docker 部署"),
        "content": ("采用 Docker 部署", "必须采用 Docker 部署"),
    }, {}]),
    ("You must not commit secrets to the repo", [{
        "key_normalized": ("constraint_commit_secrets_to_the",
                           "constraint_not_commit_secrets_to_the"),
        "title": ("Constraint: commit secrets to the repo",
                  "Constraint: must not commit secrets to the repo"),
        "content": ("commit secrets to the repo", "must not commit secrets to the repo"),
    }]),
]  # fmt: skip

FIELDS = [field.name for field in dataclasses.fields(Proposal)]


def _reference(messages: list[dict[str, object]]) -> list[tuple[object, ...]]:
    crystallizer_module = pytest.importorskip("agentao.memory.crystallizer")
    crystallizer = crystallizer_module.MemoryCrystallizer()

    def value(v: object) -> object:
        return getattr(v, "value", v)

    return [
        (
            value(p.scope),
            value(p.type),
            p.key_normalized,
            p.title,
            p.content,
            p.evidence,
            p.occurrences,
            value(p.confidence),
            tuple(p.tags),
        )
        for p in crystallizer.extract_from_user_messages(messages)
    ]


def _ours(messages: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [dataclasses.astuple(p) for p in propose(messages)]


@pytest.mark.parametrize("text", PARITY)
def test_parity_with_reference_runtime(text: str) -> None:
    messages = [user(text)]
    assert _ours(messages) == _reference(messages)


@pytest.mark.parametrize(("text", "differences"), PARITY_DIFFERENCES)
def test_deliberate_differences_from_reference_runtime(
    text: str, differences: list[dict[str, tuple[str, str]]]
) -> None:
    ours, reference = _ours([user(text)]), _reference([user(text)])
    assert len(ours) == len(reference) == len(differences)
    for mine, theirs, expected in zip(ours, reference, differences, strict=True):
        for index, field in enumerate(FIELDS):
            if field in expected:
                assert (theirs[index], mine[index]) == expected[field], field
            else:
                assert mine[index] == theirs[index], field


def test_parity_with_reference_runtime_on_folding() -> None:
    # Same phrase text in both messages: the reference keeps the first message's
    # title/content where docs/behaviour.md §6 says the latest wins (tested above).
    # A decision and a preference: a constraint's text differs by design (above).
    messages = [
        user("I prefer tabs"),
        {"role": "assistant", "content": "We chose Rust"},
        user("We chose Postgres; I prefer tabs"),
        user("We chose Rust"),
    ]
    assert _ours(messages) == _reference(messages)


def test_context_reading_is_linear_in_the_message() -> None:
    # Each match reads its sentence, clause and quotation state by bisection over
    # marks found once per message; the first version rescanned the message per
    # match and took about 90 s here.
    import time

    text = " ".join(f'Never deploy on day{i} now. I prefer x{i} "tabs".' for i in range(3000))
    started = time.perf_counter()
    proposals = propose([user(text)])
    assert time.perf_counter() - started < 10
    assert [p.key_normalized for p in proposals] == [
        "constraint_not_deploy_on_day_now",
        "preference_x_tabs",
    ]


@pytest.mark.parametrize(
    ("text", "keys_"),
    [
        # An inch mark is no quotation: the rule after it is the user's.
        ('My 27" monitor is fine. Never deploy on Fridays', ["constraint_not_deploy_on_fridays"]),
        ("It's fine. Don't deploy on Fridays", ["constraint_not_deploy_on_fridays"]),
        # Apostrophes are no quotation either; a quoted rule is someone else's.
        ("The guide's rule: 'never use var' is old", []),
        ("\u2018Never use var\u2019 is what they said", []),
        # A message of several lines: each line is its own sentence.
        ("Should we use Go?\nNever use var", ["constraint_not_use_var"]),
    ],
)
def test_quotation_marks_and_apostrophes(text: str, keys_: list[str]) -> None:
    assert keys([user(text)]) == keys_
