"""The backend contract without a model: actor specs, the call cache, the registry and lazy imports."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from routerlab.errors import UsageError
from routerlab.llm import base as llm_base
from routerlab.llm.base import (
    GREEDY,
    Backend,
    BackendSpec,
    ChoiceScores,
    Completion,
    Decoding,
    Message,
    load_backend,
    messages_from,
    parse_actor_list,
    parse_actor_spec,
    register_backend,
)
from routerlab.llm.cache import CachedBackend, CacheWarning, CallCache, call_key, default_cache_dir


class EchoBackend(Backend):
    """A backend that answers with the last message reversed and counts its real calls."""

    options: ClassVar[Mapping[str, Any]] = {"shout": False}
    supports_choice_scores = True

    def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
        super().__init__(spec, cache_dir=cache_dir)
        self.calls = 0

    def complete(self, messages: Sequence[Message], decoding: Decoding = GREEDY) -> Completion:
        self.calls += 1
        text = messages[-1].content[::-1][: decoding.max_tokens]
        if self.spec.option("shout"):
            text = text.upper()
        return Completion(text, len(messages[-1].content), len(text), 0.5, 0.1, 0.01)

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
        self.calls += 1
        return ChoiceScores(tuple(letters), tuple(float(i) for i in range(len(letters))), 0.2, 7)


@pytest.fixture()
def echo_kind() -> Iterator[str]:
    register_backend("echo-test")(EchoBackend)
    yield "echo-test"
    llm_base._REGISTRY.remove("echo-test")


# ------------------------------------------------------------------------------------ values
def test_decoding_validates() -> None:
    assert Decoding().greedy and Decoding().max_tokens == 256
    for bad in ({"max_tokens": 0}, {"max_tokens": 1.5}, {"temperature": -1}, {"temperature": math.inf},
                {"temperature": math.nan}, {"top_p": 0}, {"stop": "x"}, {"stop": ("",)}):
        with pytest.raises(UsageError, match="decoding"):
            Decoding(**bad)  # type: ignore[arg-type]
    assert Decoding(stop=["a"]).stop == ("a",)  # type: ignore[arg-type]


def test_messages_and_roles() -> None:
    assert messages_from("hi") == (Message("user", "hi"),)
    assert messages_from([{"role": "system", "content": "s"}, Message("user", "u")])[0].role == "system"
    with pytest.raises(UsageError, match="role"):
        Message("robot", "x")
    with pytest.raises(UsageError, match="at least one"):
        messages_from([])


def test_choice_scores_helpers() -> None:
    sc = ChoiceScores(("A", "B", "C"), (0.0, 2.0, 2.0), 0.1, 5)
    assert sc.choice == "B"  # first of a tie
    assert math.isclose(sum(sc.probabilities()), 1.0)
    assert ChoiceScores.from_record(sc.to_record()).logits == sc.logits


# ------------------------------------------------------------------------------------- specs
def test_parse_actor_spec_forms(echo_kind: str) -> None:
    name, spec = parse_actor_spec(f"e={echo_kind}:m1,shout=true,input_price=0.5,params_b=1.5")
    assert name == "e" and spec == BackendSpec(echo_kind, "m1", {"shout": True, "input_price": 0.5, "params_b": 1.5})
    assert spec.input_price == 0.5 and spec.output_price == 0.0 and spec.params_b == 1.5
    assert spec.describe() == f"{echo_kind}:m1,input_price=0.5,params_b=1.5,shout=true"
    assert spec.backend_options() == {"shout": True}
    # a model may hold ':' and '/', e.g. an ollama tag or a URL after '@'
    assert parse_actor_spec(f"x={echo_kind}:llama3:8b@http://h:1/v1")[1].model == "llama3:8b@http://h:1/v1"


@pytest.mark.parametrize(("text", "match"), [
    ("local:smollm2-135m", "NAME=KIND:MODEL"),
    ("=echo-test:m", "NAME=KIND:MODEL"),
    ("a b=echo-test:m", "name"),
    ("a=echo-test", "NAME=KIND:MODEL"),
    ("a=nosuch:m", "unknown backend kind 'nosuch'"),
    ("a=echo-test:", "model is empty"),
    ("a=echo-test:m,shout", "bad option 'shout'"),
    ("a=echo-test:m,loud=1", "unknown option 'loud'"),
    ("a=echo-test:m,shout=1", "shout"),
    ("a=echo-test:m,input_price=-1", "input_price"),
    ("a=echo-test:m,input_price=nan", "input_price"),
    ("a=echo-test:m,shout=true,shout=false", "twice"),
])
def test_parse_actor_spec_errors(echo_kind: str, text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match) as info:
        parse_actor_spec(text)
    assert "\n" not in str(info.value)


def test_parse_actor_list(echo_kind: str) -> None:
    actors = parse_actor_list("a=echo-test:m1,shout=true,b=echo-test:m2@http://h:8/v1,input_price=2")
    assert [n for n, _ in actors] == ["a", "b"]
    assert actors[0][1].options == {"shout": True}
    assert actors[1][1].model == "m2@http://h:8/v1" and actors[1][1].input_price == 2.0
    with pytest.raises(UsageError, match="'a' given twice"):
        parse_actor_list("a=echo-test:m1,a=echo-test:m2")
    with pytest.raises(UsageError, match="unknown backend kind"):
        parse_actor_list("a=echo-test:m1,b=nosuch:m")
    with pytest.raises(UsageError, match="empty actor spec"):
        parse_actor_list("")


def test_builtin_kinds_known_without_import() -> None:
    assert {"local", "openai"} <= set(llm_base.backend_kinds())


# ------------------------------------------------------------------------------------- cache
def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ROUTERLAB_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "llm"
    monkeypatch.delenv("ROUTERLAB_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "routerlab" / "llm"


def test_call_key_covers_every_part() -> None:
    msgs = [Message("user", "q")]
    base = call_key("k", "m", "complete", msgs, Decoding().as_dict())
    assert base == call_key("k", "m", "complete", [Message("user", "q")], Decoding().as_dict())
    others = {call_key("k2", "m", "complete", msgs, Decoding().as_dict()),
              call_key("k", "m2", "complete", msgs, Decoding().as_dict()),
              call_key("k", "m", "choice_scores", msgs, Decoding().as_dict()),
              call_key("k", "m", "complete", [Message("system", "q")], Decoding().as_dict()),
              call_key("k", "m", "complete", msgs, Decoding(max_tokens=5).as_dict()),
              call_key("k", "m", "complete", msgs, Decoding(temperature=0.7, seed=1).as_dict())}
    assert base not in others and len(others) == 6


def test_cache_hit_miss_and_corruption(tmp_path: Path) -> None:
    cache = CallCache(tmp_path)
    key = call_key("k", "m", "complete", [Message("user", "q")], {})
    assert cache.get(key) is None
    cache.put(key, {"text": "a"})
    assert cache.get(key) == {"text": "a"}
    assert (cache.hits, cache.misses) == (1, 1)
    path = cache.path(key)
    assert path.parent.name == key[:2] and not list(path.parent.glob(".*.tmp"))
    path.write_text('{"key": "' + key + '", "rec')  # a torn write from some other tool
    with pytest.warns(CacheWarning, match="unreadable"):
        assert cache.get(key) is None
    assert not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": "other", "record": {"text": "b"}}))  # a record under the wrong name
    with pytest.warns(CacheWarning):
        assert cache.get(key) is None
    with pytest.warns(CacheWarning, match="could not be written"):
        cache.put(key, {"x": math.nan})


def test_cached_backend(echo_kind: str, tmp_path: Path) -> None:
    _, spec = parse_actor_spec(f"e={echo_kind}:m")
    backend = load_backend(spec, cache_dir=tmp_path)
    assert isinstance(backend, CachedBackend) and backend.name == spec.describe()
    inner = backend.inner
    assert isinstance(inner, EchoBackend)
    first = backend.complete([Message("user", "abc")])
    again = backend.complete([Message("user", "abc")])
    assert not first.cached and again.cached and again.text == first.text == "cba"
    assert again.latency_s == first.latency_s and inner.calls == 1
    batch = backend.complete_batch([[Message("user", "abc")], [Message("user", "xy")]])
    assert [c.text for c in batch] == ["cba", "yx"] and [c.cached for c in batch] == [True, False]
    assert inner.calls == 2
    assert backend.complete([Message("user", "abc")], Decoding(max_tokens=1)).text == "c" and inner.calls == 3
    sc = backend.choice_scores([Message("user", "q")], ["A", "B"])
    sc2 = backend.choice_scores([Message("user", "q")], ["A", "B"])
    assert not sc.cached and sc2.cached and sc2.logits == (0.0, 1.0) and inner.calls == 4
    assert not backend.choice_scores([Message("user", "q")], ["A", "B", "C"]).cached  # letters are in the key
    # a second process (a fresh backend on the same directory) resumes from the cache
    fresh = load_backend(spec, cache_dir=tmp_path)
    assert fresh.complete([Message("user", "abc")]).cached
    assert "".join(backend.stream([Message("user", "abc")])) == "cba"
    assert not isinstance(load_backend(spec, cache=False), CachedBackend)
    # sampling without a seed is never served from the cache: each call is a fresh draw
    hot = Decoding(temperature=0.7)
    backend.complete([Message("user", "abc")], hot)
    assert not backend.complete([Message("user", "abc")], hot).cached
    seeded = Decoding(temperature=0.7, seed=3)
    backend.complete([Message("user", "abc")], seeded)
    assert backend.complete([Message("user", "abc")], seeded).cached


def test_default_choice_scores_is_a_usage_error(echo_kind: str) -> None:
    class NoLogits(EchoBackend):
        supports_choice_scores = False

        def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> ChoiceScores:
            return Backend.choice_scores(self, messages, letters)

    with pytest.raises(UsageError, match="local model"):
        NoLogits(BackendSpec(echo_kind, "m")).choice_scores([Message("user", "q")], ["A"])


def test_import_is_light() -> None:
    code = ("import sys, routerlab, routerlab.llm, routerlab.llm.cache, routerlab.llm.local, routerlab.llm.models\n"
            "from routerlab.llm import parse_actor_list\n"
            "bad = [m for m in ('torch', 'transformers', 'openai', 'fastapi', 'uvicorn', 'gguf') if m in sys.modules]\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
