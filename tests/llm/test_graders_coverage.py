"""The CommonGen graders coverage, coverage-exact and coverage-llmrouter: hand-computed shares and LLMRouter's
real CommonGen rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerlab.llm.graders import Grader, Item, _prompts, get_grader, grader_names
from routerlab.llm.graders.coverage import concepts_of, inflections, llmrouter_stem

NAMES = ("coverage", "coverage-exact", "coverage-llmrouter")


def _score(name: str, concepts: str, reply: str) -> float:
    return get_grader(name).grade(Item(question=concepts, answer=reply, reference=concepts)).score


@pytest.mark.parametrize(("concepts", "reply", "ours", "exact", "llmrouter"), [
    # drove/knives/flying are inflections; LLMRouter's suffix rule only finds dogs -> dog
    ("drive, dog, knife, fly", "The dogs drove past knives flying.", 4 / 4, 0 / 4, 1 / 4),
    # "lake." keeps its period in LLMRouter's white-space pieces
    ("drive, car, lake", "A man drives his car to the lake.", 3 / 3, 2 / 3, 2 / 3),
    # players -> player but player -> play under LLMRouter's rule; "ball." keeps its period
    ("player, ball, throw", "Two players threw the ball.", 3 / 3, 1 / 3, 0 / 3),
    ("ice cream, eat", "Kids ate ice creams", 2 / 2, 0 / 2, 0 / 2),
    ("Dog, CAT", "a dog and a cat", 1.0, 1.0, 1.0),
    ("dog, cat", "hotdog category", 0.0, 0.0, 0.0),
])
def test_hand_computed_shares(concepts: str, reply: str, ours: float, exact: float, llmrouter: float) -> None:
    assert _score("coverage", concepts, reply) == pytest.approx(ours)
    assert _score("coverage-exact", concepts, reply) == pytest.approx(exact)
    assert _score("coverage-llmrouter", concepts, reply) == pytest.approx(llmrouter)


@pytest.mark.parametrize(("word", "forms"), [
    ("run", {"runs", "ran", "running"}), ("chop", {"chops", "chopped", "chopping"}), ("lie", {"lies", "lying", "lay"}),
    ("fly", {"flies", "flew", "flown", "flying"}), ("dish", {"dishes"}), ("knife", {"knives"}),
    ("clothe", {"clothes", "clothing"}), ("picnic", {"picnicked", "picnicking"}), ("begin", {"began", "begun",
                                                                                          "beginning"}),
    ("drive", {"drives", "drove", "driven", "driving"}), ("dry", {"dries", "dried", "drying"}), ("foot", {"feet"}),
])
def test_inflections(word: str, forms: set[str]) -> None:
    assert forms | {word} <= inflections(word)


def test_inflections_stay_inflections() -> None:
    assert "driver" not in inflections("drive") and "runner" not in inflections("run")
    assert "jump" not in inflections("jumper") and "cat" not in inflections("category")


@pytest.mark.parametrize(("word", "stem"), [
    ("players", "player"), ("player", "play"), ("drives", "drive"), ("driving", "driv"), ("drive", "drive"),
    ("jogger", "jogg"), ("bus", "bu"), ("is", "is"), ("sing", "sing"), ("Roasted", "roast"), ("lake.", "lake."),
])
def test_llmrouter_stem(word: str, stem: str) -> None:
    assert llmrouter_stem(word) == stem


def test_details_registry_and_prompt() -> None:
    assert set(NAMES) <= set(grader_names())
    item = Item(question="dog, frisbee, catch", answer="The dog catches a frisbee", reference="dog, frisbee, catch")
    grades = {name: get_grader(name).grade(item) for name in NAMES}
    assert grades["coverage"].detail == "3/3 concepts"
    assert grades["coverage-exact"].detail == "2/3 concepts; missing: catch"
    assert grades["coverage"].extracted == "The dog catches a frisbee"
    for name in NAMES:
        grader: Grader = get_grader(name)
        assert not grader.binary and grader.prompt(item) == _prompts.ask_coverage(item)


def test_concepts_come_from_the_reference_else_the_question() -> None:
    assert concepts_of(Item(question="a, b", answer="", reference=" Dog ,cat, ")) == ["dog", "cat"]
    assert concepts_of(Item(question="dog, cat", answer="", reference="")) == ["dog", "cat"]
    grade = get_grader("coverage").grade(Item(question="", answer="a dog", reference=" , "))
    assert (grade.score, grade.detail) == (0.0, "no concept words in the reference")


@pytest.fixture(scope="module")
def commongen(shared_data: Path) -> list[dict[str, str]]:
    folder = shared_data / "llmrouter" / "data" / "example_data" / "query_data"
    out = []
    for name in ("default_query_train.jsonl", "default_query_test.jsonl"):
        with open(folder / name, encoding="utf-8") as f:
            out += [r for r in map(json.loads, f) if r["task_name"] == "commongen"]
    return out


@pytest.mark.shared_data
def test_real_rows_whole_and_empty_replies(commongen: list[dict[str, str]]) -> None:
    assert len(commongen) == 200
    two_share_a_stem = 0
    for row in commongen:
        item = Item(question=row["query"], answer="", reference=row["ground_truth"], dataset="commongen")
        concepts = concepts_of(item)
        assert concepts and all(" " not in c for c in concepts)
        every = " and ".join(concepts)
        for name in NAMES:
            grader = get_grader(name)
            assert grader.grade(Item(row["query"], every, row["ground_truth"])).score == 1.0
            assert grader.grade(Item(row["query"], "Zzz.", row["ground_truth"])).score == 0.0
        # echoing the comma list: every concept is there for ours; LLMRouter's white-space pieces keep their
        # commas, so only the last piece counts, for the concepts that share its stem (mower and mow: "mow")
        echo = Item(row["query"], row["ground_truth"], row["ground_truth"])
        assert get_grader("coverage").grade(echo).score == 1.0
        last = [c for c in concepts if llmrouter_stem(c) == llmrouter_stem(concepts[-1])]
        two_share_a_stem += len(last) > 1
        assert get_grader("coverage-llmrouter").grade(echo).score == pytest.approx(len(last) / len(concepts))
    assert two_share_a_stem == 1


@pytest.mark.shared_data
def test_real_row_hand_computed(commongen: list[dict[str, str]]) -> None:
    row = next(r for r in commongen if r["ground_truth"].startswith("report, wheelbarrow, country"))
    assert len(row["ground_truth"].split(",")) == 22
    reply = "The customer drove a wheelbarrow of lumber past the lake and sold roasted donuts."
    # ours: customer, drive (drove), wheelbarrow, lumber, lake, sell (sold), roast (roasted), donut (donuts)
    assert _score("coverage", row["ground_truth"], reply) == pytest.approx(8 / 22)
    # exact: customer, wheelbarrow, lumber, lake
    assert _score("coverage-exact", row["ground_truth"], reply) == pytest.approx(4 / 22)
    # LLMRouter: customer/custom, wheelbarrow, lumber/lumb, lake, roasted/roast ("donuts." keeps its period)
    assert _score("coverage-llmrouter", row["ground_truth"], reply) == pytest.approx(5 / 22)


@pytest.mark.shared_data
def test_against_recorded_commongen_scores(shared_data: Path) -> None:
    """RouteProfile's 400 real CommonGen replies (50 questions, 8 models) and the coverage its pipeline recorded:
    ours gives the same share on 287 and one or two concepts more on 112 (a reply with all 28 concepts verbatim is
    recorded 27/28); exact presence and LLMRouter's suffix rule give less on almost every reply."""
    with open(shared_data / "routeprofile" / "route_data" / "routing_test_data.json", encoding="utf-8") as f:
        rows = [r for r in json.load(f) if r["task_name"] == "commongen"]
    counts = {}
    for name in NAMES:
        grader = get_grader(name)
        diffs = [grader.grade(Item(r["query"], reply["response"] or "", r["ground_truth"])).score
                 - reply["task_performance"] for r in rows for reply in r["model_performance"].values()]
        counts[name] = (sum(abs(d) < 1e-9 for d in diffs), sum(d > 1e-9 for d in diffs), sum(d < -1e-9 for d in diffs))
    assert counts == {"coverage": (287, 112, 1), "coverage-exact": (57, 8, 335), "coverage-llmrouter": (2, 0, 398)}
