"""The ``code`` grader and its sandbox: real MBPP and HumanEval questions from LLMRouter's data graded with
hand-written right and wrong answers, how the answer is read, and hostile code (an infinite loop, a memory hog,
1 GB of output, 30 sleeping children, ``os.system``, escapes from the process group, a network attempt), each a
failed cell within its limits with no process left behind (children carry a unique marker in their argv; /proc
is scanned for it after grading)."""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from routerlab.llm.graders import Item, _prompts, get_grader
from routerlab.llm.graders.code import CodeGrader, python_blocks, read_code, read_tests
from routerlab.llm.graders.sandbox import Limits, SandboxError, run_python

SMALL = Limits(wall_s=8, cpu_s=1, memory_bytes=256 << 20, output_bytes=64 << 10, nproc=64)


def alive_with(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(name))
    return found


@pytest.fixture(scope="module")
def questions(shared_data: Path) -> dict[str, Item]:
    """LLMRouter's code questions by task id, as Items without an answer (test split first, then train)."""
    base = shared_data / "llmrouter" / "data" / "example_data" / "query_data"
    out: dict[str, Item] = {}
    for split in ("test", "train"):
        with open(base / f"default_query_{split}.jsonl", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                if row["task_name"] in ("mbpp", "human_eval") and row["task_id"] not in out:
                    out[row["task_id"]] = Item(question=row["query"], answer="", reference=row["ground_truth"],
                                               dataset=row["task_name"], metric=row["metric"],
                                               query_id=row["task_id"])
    return out


def answer(item: Item, reply: str) -> Item:
    return Item(question=item.question, answer=reply, reference=item.reference, dataset=item.dataset,
                metric=item.metric, query_id=item.query_id)


def fenced(code: str, prose: str = "Here is the function:") -> str:
    return f"{prose}\n\n```python\n{code.strip()}\n```\n\nIt runs in linear time."


# -- the sandbox alone -----------------------------------------------------------------------------------------

def test_sandbox_reasons_for_ordinary_endings() -> None:
    ok = run_python("print('hello')\nassert 1 + 1 == 2\n", SMALL)
    assert (ok.passed, ok.reason, ok.stdout, ok.exit_code) == (True, "ok", "hello\n", 0)
    failed = run_python("x = 1\nassert x == 2, 'x is one'\n", SMALL)
    assert (failed.passed, failed.reason, failed.detail, failed.line) == (False, "assertion",
                                                                         "AssertionError: x is one", 2)
    error = run_python("def f():\n    return 1 / 0\nf()\n", SMALL)
    assert (error.reason, error.detail, error.line) == ("error", "ZeroDivisionError: division by zero", 2)
    assert "Traceback" in error.stderr and "ZeroDivisionError" in error.stderr
    syntax = run_python("def f(:\n", SMALL)
    assert (syntax.reason, syntax.line) == ("error", 1) and syntax.detail.startswith("SyntaxError")
    # leaving early is not passing: the tests after the exit never ran
    for early in ("import sys\nsys.exit(0)\nassert False\n", "import os\nos._exit(0)\nassert False\n"):
        left = run_python(early, SMALL)
        assert (left.passed, left.reason) == (False, "error") and "before its end" in left.detail


def test_sandbox_directory_environment_and_main_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/nowhere")
    monkeypatch.setenv("ROUTERLAB_TEST_SECRET", "s3cret")
    program = ("import os, sys, json\n"
               "open('scratch.txt', 'w').write('x')\n"
               "print(json.dumps({'cwd': os.getcwd(), 'env': dict(os.environ), 'files': os.listdir('.'),"
               " 'name': __name__}))\n"
               "if __name__ == '__main__':\n    input()\n")
    result = run_python(program, SMALL)
    assert result.passed, result.detail
    seen = json.loads(result.stdout)
    assert seen["files"] == ["scratch.txt"] and seen["name"] == "__solution__"
    assert not Path(seen["cwd"]).exists()  # the temporary directory is gone
    assert seen["env"]["HOME"] == seen["cwd"] == seen["env"]["TMPDIR"]
    assert sorted(seen["env"]) == ["HOME", "LANG", "LC_ALL", "MKL_NUM_THREADS", "OMP_NUM_THREADS",
                                   "OPENBLAS_NUM_THREADS", "PATH", "TMPDIR"]


def test_sandbox_limits_cpu_wall_memory_output() -> None:
    programs = [("while True:\n    pass\n", SMALL), ("import time\ntime.sleep(60)\n", Limits(wall_s=0.5, cpu_s=1)),
                ("x = []\nwhile True:\n    x.append(bytearray(10**7))\n", SMALL),
                ("import sys\nfor _ in range(1000):\n    sys.stdout.write('x' * 10**6)\n", SMALL)]
    with ThreadPoolExecutor(len(programs)) as pool:  # side by side, as grade_many runs them
        loop, hang, hog, flood = pool.map(lambda p: run_python(*p), programs)
    assert (loop.passed, loop.reason, loop.signal) == (False, "cpu", "SIGXCPU")
    assert loop.cpu_seconds < 2.5
    assert (hang.reason, hang.detail) == ("timeout", "timeout after 0.5 s (wall clock)")
    assert hang.seconds < 3
    assert (hog.reason, hog.line) == ("memory", 3) and hog.max_rss_bytes < 300 << 20
    assert flood.reason == "output-limit" and flood.stdout_bytes == 64 << 10
    assert len(flood.stdout) == 2000  # only the tail is read back


def test_sandbox_takes_any_text() -> None:
    assert run_python("s = '\ud800'\nassert len(s) == 1\n", SMALL).passed  # a lone surrogate, as JSON allows
    nul = run_python("x = 1\0\n", SMALL)
    assert (nul.passed, nul.reason) == (False, "error") and "null bytes" in nul.detail


def test_sandbox_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="wall_s must be a positive number"):
        Limits(wall_s=0)
    with pytest.raises(ValueError, match="memory_bytes"):
        Limits(memory_bytes=-1)


def test_sandbox_cannot_start_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    with pytest.raises(SandboxError, match="sandbox: cannot start /nonexistent/python"):
        run_python("pass", SMALL)
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(SandboxError, match="needs Linux"):
        run_python("pass", SMALL)


def test_sandbox_kills_children_that_left_the_group_after_success() -> None:
    """setsid + double fork (the grandchild's parent exits, so it is nobody's child and in no group of ours) and a
    setsid'd shell command: the subreaper catches both, after a program that passed."""
    marker = f"routerlab-sandbox-test-{uuid.uuid4().hex}"
    program = (
        "import os, subprocess\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv('/bin/sleep', ['{marker}', '60'])\n"
        "    os._exit(0)\n"
        f"os.system('setsid /bin/sh -c \"sleep 60; : {marker}\" &')\n"
        "import time\ntime.sleep(0.3)\n")
    result = run_python(program, SMALL)
    assert result.passed, result.detail
    assert result.subreaper and result.leftover_alive == 0 and result.leftover_killed >= 2
    assert alive_with(marker) == []


def test_sandbox_network_is_cut_where_the_platform_allows() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    try:
        result = run_python(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n",
                            SMALL)
        try:
            server.accept()[0].close()
            reached = True
        except TimeoutError:
            reached = False
    finally:
        server.close()
    if result.network.startswith("not isolated"):  # e.g. a container without CAP_SYS_ADMIN or user namespaces
        assert result.passed and reached
    else:
        assert result.network in ("netns", "userns+netns")
        assert (result.passed, reached, result.reason) == (False, False, "error")
        assert "Network is unreachable" in result.detail


# -- reading the answer and the tests --------------------------------------------------------------------------

def test_read_code_first_block_defining_the_function_then_all_blocks_then_the_reply() -> None:
    reply = ("```bash\npip install nothing\n```\n```python\nprint(add(1, 2))\n```\n"
             "```py\ndef add(a, b):\n    return a + b\n```\n```python\nassert add(1, 1) == 3\n```")
    assert python_blocks(reply) == ["print(add(1, 2))\n", "def add(a, b):\n    return a + b\n",
                                    "assert add(1, 1) == 3\n"]
    assert read_code(reply, "add") == ("def add(a, b):\n    return a + b\n", "the first python block defining add")
    code, how = read_code("```python\nimport math\n```\ntext\n```python\nroot = math.sqrt\n```", "add")
    assert (code, how) == ("import math\n\n\nroot = math.sqrt\n", "all python blocks")
    assert read_code("def add(a, b):\n    return a + b", "add") == ("def add(a, b):\n    return a + b",
                                                                 "the whole reply")
    assert read_code("The answer is 42.", "add") == ("", "no code found")
    assert read_code("```python\ndef add(a, b):\n    return a + b", "add")[0] == "def add(a, b):\n    return a + b"


def test_read_tests_mbpp_names_the_function_and_imports_what_the_asserts_use() -> None:
    tests = read_tests(Item("q", "", "['assert set(pair((3, 4), (5, 4))) == set((4,))', 'assert pair((1,), (1,))']"))
    assert tests is not None and (tests.needed, tests.count) == ("pair", 2)
    own_builtin = read_tests(Item("q", "", "['assert sum(10,15) == 6', 'assert sum(4,6) == 3']"))
    assert own_builtin is not None and own_builtin.needed == "sum"
    uses_sys = read_tests(Item("q", "", "['assert size((1,)) == sys.getsizeof((1,))']"))
    assert uses_sys is not None and uses_sys.code.splitlines()[0] == "import sys"
    assert read_tests(Item("q", "", "42")) is None


@pytest.mark.shared_data
def test_prompt_is_the_fixed_code_prompt(questions: dict[str, Item]) -> None:
    grader = get_grader("code")
    for task in ("970", "HumanEval/8"):
        assert grader.prompt(questions[task]) == _prompts.ask_code(questions[task])
    assert "assert min_of_two(10,20)==10" in grader.prompt(questions["970"])


# -- real questions ---------------------------------------------------------------------------------------------

MBPP_RIGHT = {
    "970": "def min_of_two(x, y):\n    return x if x < y else y",
    "779": "def unique_sublists(lists):\n    counts = {}\n    for l in lists:\n"
           "        counts[tuple(l)] = counts.get(tuple(l), 0) + 1\n    return counts",
    "785": "def tuple_str_int(text):\n    return tuple(int(x) for x in text.strip('()').split(','))",
    "546": "def last_occurence_char(s, c):\n    i = s.rfind(c)\n    return None if i < 0 else i + 1",
    "596": "import sys\n\ndef tuple_size(t):\n    return sys.getsizeof(t)",
}


@pytest.mark.shared_data
def test_right_mbpp_answers_pass_and_wrong_ones_fail_with_the_failing_assert(questions: dict[str, Item]) -> None:
    grader = CodeGrader(limits=SMALL, workers=2)
    items = [answer(questions[t], fenced(code)) for t, code in MBPP_RIGHT.items()]
    wrong = [
        answer(questions["970"], fenced("def min_of_two(x, y):\n    return max(x, y)")),
        answer(questions["546"], fenced("def last_occurence_char(s, c):\n    return s.rfind(c) + 1")),
        answer(questions["785"], fenced("def tuple_str_int(text):\n    return text[1]")),
        answer(questions["970"], "The smaller of two numbers is min(x, y)."),
        answer(questions["970"], fenced("def smallest(x, y):\n    return min(x, y)")),
    ]
    grades = grader.grade_many(items + wrong)
    assert [g.score for g in grades] == [1.0] * len(items) + [0.0] * len(wrong)
    assert all(g.grader == "code" for g in grades)
    assert grades[0].detail == "passed 3 asserts" and grades[0].extracted == MBPP_RIGHT["970"] + "\n"
    assert [g.detail for g in grades[len(items):]] == [
        "test failed: assert min_of_two(10,20)==10",
        "test failed: assert last_occurence_char(\"little\",'y')==None",
        "test failed: assert tuple_str_int(\"(7, 8, 9)\") == (7, 8, 9)",
        "no code found",
        "NameError: name 'min_of_two' is not defined (at test assert min_of_two(10,20)==10)",
    ]


@pytest.mark.shared_data
def test_humaneval_whole_function_completion_and_the_question_helpers(questions: dict[str, Item]) -> None:
    grader = CodeGrader(limits=SMALL, workers=2)
    body = "    s, p = 0, 1\n    for n in numbers:\n        s += n\n        p *= n\n    return s, p\n"
    items = [
        # a whole function, without the question's typing import it annotates with
        answer(questions["HumanEval/8"], fenced("def sum_product(numbers: List[int]) -> Tuple[int, int]:\n" + body)),
        # completion style: the body only, raw (a base model's continuation) or in a block at column 0
        answer(questions["HumanEval/8"], body),
        answer(questions["HumanEval/8"], fenced("s, p = 0, 1\nfor n in numbers:\n    s += n\n    p *= n\n"
                                                 "return s, p")),
        # the question's helper (is_palindrome, poly) is used, not rewritten
        answer(questions["HumanEval/10"], fenced(
            "def make_palindrome(string: str) -> str:\n    for i in range(len(string)):\n"
            "        if is_palindrome(string[i:]):\n            return string + string[:i][::-1]\n"
            "    return string")),
        answer(questions["HumanEval/32"], fenced(
            "def find_zero(xs):\n    lo, hi = -1.0, 1.0\n    while poly(xs, lo) * poly(xs, hi) > 0:\n"
            "        lo, hi = lo * 2, hi * 2\n    for _ in range(200):\n        mid = (lo + hi) / 2\n"
            "        if poly(xs, lo) * poly(xs, mid) <= 0:\n            hi = mid\n        else:\n"
            "            lo = mid\n    return lo")),
        answer(questions["HumanEval/13"], "```python\nimport math\n\ndef greatest_common_divisor(a, b):\n"
                                          "    return math.gcd(a, b)\n\nif __name__ == '__main__':\n"
                                          "    print(greatest_common_divisor(int(input()), 5))\n```"),
        # a __future__ import must stay first: the question's lines are not put before it
        answer(questions["HumanEval/8"], fenced("from __future__ import annotations\n\n"
                                                 "def sum_product(numbers: List[int]) -> Tuple[int, int]:\n" + body)),
        # wrong
        answer(questions["HumanEval/8"], fenced("def sum_product(numbers):\n    return sum(numbers), 0")),
        answer(questions["HumanEval/48"], fenced("def is_palindrome(text):\n    return text[0] == text[-1]")),
    ]
    grades = grader.grade_many(items)
    assert [g.score for g in grades] == [1.0] * 7 + [0.0] * 2, [g.detail for g in grades]
    assert grades[1].extracted.startswith(questions["HumanEval/8"].question.rstrip())
    assert grades[0].detail == "passed 5 asserts"
    assert grades[0].extracted.startswith("from typing import List, Tuple\n\n\ndef sum_product(numbers: List[int])")
    assert grades[7].detail == "test failed: assert candidate([]) == (0, 1)"
    assert grades[8].detail == "IndexError: string index out of range (at answer line 2: return text[0] == text[-1])"


# -- hostile answers to a real question -------------------------------------------------------------------------

@pytest.mark.shared_data
def test_hostile_answers_fail_within_their_limits_and_leave_no_process(questions: dict[str, Item]) -> None:
    marker = f"routerlab-sandbox-test-{uuid.uuid4().hex}"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(60)' {marker}"
    hostile = {
        "infinite loop": "def min_of_two(x, y):\n    while True:\n        pass",
        "memory hog": "def min_of_two(x, y):\n    hog = []\n    while True:\n        hog.append(bytearray(10**7))",
        "1 GB of output": "import sys\nfor _ in range(1000):\n    sys.stdout.write('x' * 10**6)\n"
                          "def min_of_two(x, y):\n    return min(x, y)",
        "30 sleeping children": "import subprocess\n"
                                f"kids = [subprocess.Popen(['{marker}', '60'], executable='/bin/sleep') "
                                "for _ in range(30)]\n"
                                "def min_of_two(x, y):\n    return len(kids)",
        "os.system": f"import os\ndef min_of_two(x, y):\n    return os.system(\"{sleeper} &\")",
        "network": "import socket\ndef min_of_two(x, y):\n"
                   "    socket.create_connection(('1.1.1.1', 53), timeout=2).close()\n    return min(x, y)",
    }
    question = questions["970"]
    grader = CodeGrader(limits=SMALL, workers=len(hostile))
    grades = grader.grade_many([answer(question, fenced(code)) for code in hostile.values()])
    details = dict(zip(hostile, (g.detail for g in grades), strict=True))
    network_cut = not run_python("pass", SMALL).network.startswith("not isolated")
    assert all(g.score == 0.0 for name, g in zip(hostile, grades, strict=True) if name != "network" or network_cut), \
        details
    assert details["infinite loop"] == "CPU limit of 1 s reached"
    assert details["memory hog"] == "MemoryError (memory limit 256 MiB)"
    assert details["1 GB of output"].startswith("output limit of 65536 bytes reached")
    assert details["30 sleeping children"] == "test failed: assert min_of_two(10,20)==10"
    assert details["os.system"] == "test failed: assert min_of_two(10,20)==10"
    if network_cut:
        assert details["network"] == ("OSError: [Errno 101] Network is unreachable (at answer line 3: "
                                      "socket.create_connection(('1.1.1.1', 53), timeout=2).close())")
    assert alive_with(marker) == []


@pytest.mark.shared_data
def test_a_hang_with_a_child_ends_at_the_wall_clock_limit(questions: dict[str, Item]) -> None:
    marker = f"routerlab-sandbox-test-{uuid.uuid4().hex}"
    code = ("import os, time\n"
            "def min_of_two(x, y):\n    if os.fork() == 0:\n"
            f"        os.execv('/bin/sleep', ['{marker}', '60'])\n"
            "    time.sleep(60)")
    grade = CodeGrader(limits=Limits(wall_s=1, cpu_s=1)).grade(answer(questions["970"], fenced(code)))
    assert (grade.score, grade.detail) == (0.0, "timeout after 1 s (wall clock)")
    assert alive_with(marker) == []


@pytest.mark.shared_data
def test_a_right_answer_that_leaves_30_children_passes_and_leaves_none(questions: dict[str, Item]) -> None:
    marker = f"routerlab-sandbox-test-{uuid.uuid4().hex}"
    code = ("import subprocess\n"
            f"kids = [subprocess.Popen(['{marker}', '60'], executable='/bin/sleep') for _ in range(30)]\n"
            "def min_of_two(x, y):\n    return min(x, y)")
    grade = CodeGrader(limits=SMALL).grade(answer(questions["970"], fenced(code)))
    assert (grade.score, grade.detail) == (1.0, "passed 3 asserts")
    assert alive_with(marker) == []


@pytest.mark.shared_data
def test_real_model_replies_from_routeprofile(shared_data: Path) -> None:
    """Replies as models wrote them (RouteProfile's test data): MBPP's [BEGIN]/[DONE] format, a HumanEval body
    at column 0, a missing import, markdown-escaped names."""
    rows = json.loads((shared_data / "routeprofile" / "route_data" / "routing_test_data.json").read_text())
    by_task = {row["task_id"]: row for row in rows if row["metric"] == "code_eval"}
    wanted = [("541", "llama-3.2-3b-instruct"), ("HumanEval/152", "mixtral-8x22b-instruct-v0.1"),
              ("434", "gemma-2-9b-it"), ("487", "mixtral-8x7b-instruct-v0.1")]
    items = [Item(question=by_task[t]["query"], answer=by_task[t]["model_performance"][m]["response"],
                  reference=by_task[t]["ground_truth"], dataset=by_task[t]["task_name"]) for t, m in wanted]
    assert items[0].answer.startswith("[BEGIN]") and items[1].answer.lstrip().startswith("[BEGIN]\nreturn [")
    grades = CodeGrader(limits=SMALL, workers=2).grade_many(items)
    assert [(g.score, g.detail) for g in grades] == [
        (1.0, "passed 3 asserts"),
        (1.0, "passed 5 asserts"),
        (0.0, "NameError: name 're' is not defined (at answer line 2: if re.search(r'a.*b', text):)"),
        (0.0, "SyntaxError: unexpected character after line continuation character "
              "(at answer line 1: def sort\\_tuple(tuples):)"),
    ]
    assert grades[0].extracted == "def check_abundant(n):\n    return sum(i for i in range(1, n) if n % i == 0) > n\n"


@pytest.mark.parametrize("attack", ["SIGKILL", "SIGSTOP"])
def test_a_program_that_kills_or_stops_its_supervisor_leaves_no_child(attack: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed, the supervisor takes the runner with it (PR_SET_PDEATHSIG); stopped, it is killed by the caller's
    backstop (shortened here). Either way the caller kills the runner's group, where the child is."""
    from routerlab.llm.graders import sandbox

    monkeypatch.setattr(sandbox, "_GRACE_S", 0.5)
    marker = f"routerlab-sandbox-test-{uuid.uuid4().hex}"
    program = ("import os, signal, subprocess, time\n"
               f"subprocess.Popen(['{marker}', '60'], executable='/bin/sleep')\n"
               f"os.kill(os.getppid(), signal.{attack})\ntime.sleep(60)\n")
    result = run_python(program, Limits(wall_s=1, cpu_s=1))
    assert (result.passed, result.reason) == (False, "killed")
    assert result.detail == ("the sandbox's supervisor was killed by SIGKILL" if attack == "SIGKILL"
                             else "the sandbox did not finish within 1.5 s and was killed")
    assert alive_with(marker) == []
