"""The bank loader: friendly file:line problems (all at once), the whole bank loading, the CLI's offline commands.

No runner here: these are fast and need no torch (test_check.py grades through the real runner).
"""
from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from questionbank.__main__ import main
from questionbank.check import dumb_answers
from questionbank.loader import (
    ITEMS_DIR,
    SCHEMA_PATH,
    BankError,
    Problem,
    load_bank,
    load_items,
)
from questionbank.model import Item
from questionbank.render import render_explanation, render_item, render_result

REPO_ROOT = Path(__file__).resolve().parents[2]


class StubOutline:
    """Only the outline ids these tests use exist."""

    def __init__(self, *ids: str) -> None:
        self.ids = set(ids) or {"2.1.2.a.1", "2.1.2.a.2", "2.1.2.a.3", "deep.000.1"}

    def exists(self, question_id: str) -> bool:
        return question_id in self.ids


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


GOOD_ITEM = """
  - id: {id}
    outline: [2.1.2.a.1]
    kind: choice
    difficulty: 1
    tags: [view]
    requires: cpu
    title: {{zh: 标题, en: Title}}
    prompt: {{zh: 问题, en: Question}}
    explanation: {{zh: 解释, en: Explanation}}
    options:
      - {{key: A, zh: 甲, en: one}}
      - {{key: B, zh: 乙, en: two}}
    correct: [A]
"""


def messages(problems: list[Problem]) -> list[str]:
    return [str(p) for p in problems]


# --------------------------------------------------------------------------------------------
# problems, with their lines, all at once


MALFORMED = """
items:
  - id: Bad Id
    outline: [2.1.2.a.1, 9.9.9.z.9]
    kind: code
    difficulty: 7
    tags: [view]
    requires: gpu
    title: {zh: 标题}
    prompt: {zh: 提示, en: Prompt}
    explanation: {zh: 解释, en: ""}
    entrypoint: solve
    starter: |
      def solve(x, y):
          raise NotImplementedError
    setup: |
      def cases():
          return []
    reference: |
      def solver(x):
          return x
    wrong:
      - why: a typo
        code: |
          def solve(x):
              return x +
    snippet: "print(1)"
    entrypiont: solve
  - id: pick-one
    outline: [2.1.2.a.2]
    kind: choice
    difficulty: "3"
    tags: []
    requires: cpu
    title: {zh: 标题, en: T}
    prompt: {zh: 提示, en: Prompt}
    explanation: {zh: 解释, en: E}
    options:
      - {key: A, zh: 甲, en: a}
      - {key: A, zh: 乙, en: b}
    correct: [C]
  - id: pick-one
    outline: [2.1.2.a.3]
    kind: output
    difficulty: 2
    tags: []
    requires: cpu
    title: {zh: 标题, en: T}
    prompt: {zh: 提示, en: Prompt}
    explanation: {zh: 解释, en: E}
    snippet: |
      print(1)
"""


def test_malformed_file_reports_every_problem_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.yaml", MALFORMED)
    items, problems = load_items([path], outline=StubOutline())
    f = str(path)
    expected = [
        f"{f}:2: item 'Bad Id': id 'Bad Id' is not valid: use lowercase words and digits joined by hyphens, like tensor-view-transpose",
        f"{f}:3: item 'Bad Id': outline id '9.9.9.z.9' does not exist in the outline",
        f"{f}:5: item 'Bad Id': difficulty must be from 1 to 5, but it is 7",
        f"{f}:7: item 'Bad Id': requires: unknown 'gpu' (known: cpu, cuda, onnx, inductor; did you mean 'cpu'?)",
        f"{f}:8: item 'Bad Id': title is missing 'en'",
        f"{f}:10: item 'Bad Id': explanation.en is empty",
        f"{f}:15: item 'Bad Id': setup does not define a function make_cases()",
        f"{f}:18: item 'Bad Id': reference does not define the entrypoint 'solve'",
        f"{f}:22: item 'Bad Id': wrong answer 1 needs a `hint` (zh and en): what a player whose answer behaves "
        "like it is told",
        # the syntax error is reported on its own line inside the block, not at `code: |`
        f"{f}:25: item 'Bad Id': wrong[1].code has a Python syntax error: invalid syntax",
        f"{f}:26: item 'Bad Id': 'snippet' does not belong on code items; remove it",
        f"{f}:27: item 'Bad Id': unknown field 'entrypiont' (did you mean 'entrypoint'?)",
        f"{f}:31: item 'pick-one': difficulty should be a whole number, but it is the text '3'",
        f"{f}:39: item 'pick-one': option key 'A' is used twice",
        f"{f}:40: item 'pick-one': correct key 'C' is not among the options (A, A)",
        f"{f}:41: item 'pick-one': duplicate id; it is already used at {f}:28",
    ]
    assert messages(problems) == expected
    assert items == []  # nothing with a problem is handed out


def test_missing_kind_fields_and_misplaced_fields(tmp_path: Path) -> None:
    path = write(tmp_path, "kinds.yaml", """
        items:
          - id: half-code
            outline: [2.1.2.a.1]
            kind: code
            difficulty: 2
            tags: [x]
            requires: cpu
            title: {zh: 标题, en: T}
            prompt: {zh: 提示, en: P}
            explanation: {zh: 解释, en: E}
            options: []
          - id: quiz-kind
            outline: []
            kind: quiz
            difficulty: 2
            tags: [Not A Tag]
            requires: cpu
            title: {zh: 标题, en: T}
            prompt: {zh: 提示, en: P}
            explanation: {zh: 解释, en: E}
    """)
    _, problems = load_items([path], outline=StubOutline())
    f = str(path)
    got = messages(problems)
    for key in ("entrypoint", "starter", "setup", "reference", "wrong"):
        assert f"{f}:2: item 'half-code': '{key}' is required for code items" in got
    assert f"{f}:11: item 'half-code': 'options' does not belong on code items; remove it" in got
    assert not any("options needs" in m for m in got)  # one message per mistake
    assert f"{f}:14: item 'quiz-kind': kind must be one of code, output, choice, but it is the text 'quiz'" in got
    assert f"{f}:13: item 'quiz-kind': outline needs at least 1 entry, but it has 0" in got
    assert any(m.startswith(f"{f}:16: item 'quiz-kind': tags[1] 'Not A Tag' is not valid") for m in got)


def test_code_item_source_checks(tmp_path: Path) -> None:
    path = write(tmp_path, "code.yaml", """
        items:
          - id: source-checks
            outline: [2.1.2.a.1]
            kind: code
            difficulty: 2
            tags: [x]
            requires: cpu
            title: {zh: 标题, en: T}
            prompt: {zh: 提示, en: P}
            explanation: {zh: 解释, en: E}
            entrypoint: solve
            starter: |
              def solve(x):
                  raise NotImplementedError
            setup: |
              def make_cases():
                  return [{"args": (1,)}]
            reference: |
              def solve(x, dim=0):
                  return x
            probe: |
              def check(result, args, kwargs, call):
                  return {}
            wrong:
              - why: forgets the entrypoint
                hint: {zh: 函数名不对, en: The function has another name}
                code: |
                  def solution(x):
                      return x
    """)
    _, problems = load_items([path], outline=StubOutline())
    f = str(path)
    assert messages(problems) == [
        f"{f}:12: item 'source-checks': the starter's signature (x) differs from the reference's (x, dim=0)",
        f"{f}:21: item 'source-checks': probe does not define a function probe(result, args, kwargs, call)",
        f"{f}:25: item 'source-checks': wrong answer 1 does not define 'solve', so it would fail for the wrong reason",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("items:\n  - id: x\n    title: {zh: a, en: b\n    kind: code\n", ":4: YAML syntax error: expected ',' or '}', but got ':'"),
        ("items:\n  - id: x\n\tkind: code\n", ":3: YAML syntax error: found character '\\t' that cannot start any token"),
        ("", ":1: the file is empty; it needs a top-level 'items:' list"),
        ("- just\n- a list\n", ":1: the file should be a mapping with an 'items:' list, but it is a list"),
        ("item: []\n", ":1: unknown top-level field 'item' (did you mean 'items'?)"),
        ("items:\n  - id: a\n    id: b\n", ":3: 'id' appears twice in the same mapping (first at line 2)"),
    ],
)
def test_file_level_problems(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(text, encoding="utf-8")
    _, problems = load_items([path], outline=StubOutline())
    assert str(path) + expected in messages(problems)


def test_duplicate_ids_across_files_and_subsection_file_names(tmp_path: Path) -> None:
    write(tmp_path, "2.1.2.yaml", "items:" + GOOD_ITEM.format(id="same-id"))
    write(tmp_path, "2.1.10.yaml", "items:" + GOOD_ITEM.format(id="same-id"))
    items, problems = load_items([tmp_path], outline=StubOutline())
    first, second = tmp_path / "2.1.2.yaml", tmp_path / "2.1.10.yaml"
    assert [i.id for i in items] == ["same-id"]
    # files load in outline order (2.1.2 before 2.1.10); the item in 2.1.10.yaml is also in the wrong file
    assert messages(problems) == [
        f"{second}:2: item 'same-id': duplicate id; it is already used at {first}:2",
        f"{second}:3: item 'same-id': none of its outline ids is in subsection 2.1.10, the subsection this file is for",
    ]


def test_load_bank_raises_with_every_message(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "items:" + GOOD_ITEM.format(id="ok-item") + GOOD_ITEM.format(id="BAD"))
    with pytest.raises(BankError) as info:
        load_bank(tmp_path, outline=StubOutline())
    assert len(info.value.problems) == 1
    assert "1 problem in the question bank" in str(info.value)
    assert info.value.messages[0].endswith("item 'BAD': id 'BAD' is not valid: use lowercase words and digits "
                                           "joined by hyphens, like tensor-view-transpose")


def test_good_file_builds_items_with_lines(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "items:" + GOOD_ITEM.format(id="first") + GOOD_ITEM.format(id="second"))
    bank = load_bank(tmp_path, outline=StubOutline())
    second = bank.get("second")
    assert second.kind == "choice" and second.correct == ("A",)
    assert second.title.en == "Title" and second.options[1].text.zh == "乙"
    assert second.source_line == 16 and second.lines["correct"] == 28
    assert second.location.endswith("a.yaml:16")
    with pytest.raises(KeyError, match="did you mean second"):
        bank.get("secnd")


def test_hints_and_known_mistakes_load_in_both_languages(tmp_path: Path) -> None:
    """The learning loop's fields: hints on any item, a hint per known mistake of a code item,
    common wrong predictions of an output item; each misplaced one is named."""
    path = write(tmp_path, "hints.yaml", """
        items:
          - id: with-hints
            outline: [2.1.2.a.1]
            kind: code
            difficulty: 3
            tags: [x]
            requires: cpu
            title: {zh: 标题, en: T}
            prompt: {zh: 提示, en: P}
            explanation: {zh: 解释, en: E}
            hints:
              - {zh: 想想形状, en: Think about the shape}
              - {zh: 看 dim 参数, en: Look at the dim argument}
            entrypoint: f
            starter: "def f(x):\\n    pass\\n"
            setup: "def make_cases():\\n    return []\\n"
            reference: "def f(x):\\n    return x.sum(0)\\n"
            wrong:
              - why: sums the wrong dim
                hint: {zh: 对错了维度求和, en: You reduced over the wrong dimension}
                code: "def f(x):\\n    return x.sum(1)\\n"
          - id: predicted
            outline: [2.1.2.a.1]
            kind: output
            difficulty: 2
            tags: [x]
            requires: cpu
            title: {zh: 标题, en: T}
            prompt: {zh: 提示, en: P}
            explanation: {zh: 解释, en: E}
            snippet: "print(1)"
            wrong_outputs:
              - output: "2"
                hint: {zh: 差一, en: Off by one}
            hints: [{zh: 一, en: one}, {zh: 二, en: two}, {zh: 三, en: three}]
    """)
    items, problems = load_items([path], outline=StubOutline())
    got = messages(problems)
    assert got == [f"{path}:35: item 'predicted': hints needs at most 2 entries, but it has 3"], got
    assert [i.id for i in items] == ["with-hints"]
    item = items[0]
    assert [h.en for h in item.hints] == ["Think about the shape", "Look at the dim argument"]
    assert item.wrong[0].hint is not None and item.wrong[0].hint.get("zh") == "对错了维度求和"

    misplaced = write(tmp_path, "misplaced.yaml", path.read_text(encoding="utf-8").replace(
        "    entrypoint: f\n", "    entrypoint: f\n    wrong_outputs: [{output: '1', hint: {zh: 一, en: one}}]\n"))
    got = messages(load_items([misplaced], outline=StubOutline())[1])
    assert f"{misplaced}:15: item 'with-hints': 'wrong_outputs' does not belong on code items; remove it" in got


# --------------------------------------------------------------------------------------------
# the real bank


def test_every_bank_file_loads() -> None:
    """One test over the whole bank, like Red's trivia lists: a broken file fails here first."""
    try:
        bank = load_bank()
    except BankError as e:
        pytest.fail(str(e))
    files = sorted(ITEMS_DIR.glob("*.yaml"))
    assert files and set(bank.files) == set(files)
    kinds = [item.kind for item in bank]
    for kind in ("code", "output", "choice"):
        assert kinds.count(kind) >= 3, f"fewer than 3 {kind} items"
    for item in bank:
        assert 1 <= item.chapter <= 10, item.id
        if item.kind == "code":
            assert item.wrong, item.id  # (examples shown to players are checked by `check`, on the real cases)


def test_bank_queries() -> None:
    bank = load_bank()
    chapter3 = bank.by_chapter(3)
    assert chapter3 and all(any(o.startswith("3.") for o in i.outline) for i in chapter3)
    assert {i.id for i in bank.by_chapter(2)}.isdisjoint({"ste-fake-quant"})
    found = bank.search("Straight-Through")
    assert "ste-fake-quant" in {i.id for i in found}
    in_head = [("straight-through" in f"{i.id} {i.title.zh} {i.title.en}".lower()) for i in found]
    assert in_head == sorted(in_head, reverse=True)  # id/title matches rank before prompt-only ones
    assert "ste-fake-quant" in {i.id for i in bank.search("autograd STE")}
    assert bank.search("no such words anywhere") == []
    assert {i.id for i in bank.covering("2.2.1.a.1")} >= {"broadcasting-shapes"}
    assert all(i.kind == "code" for i in bank.by_kind("code"))


def test_schema_documents_exactly_the_item_fields() -> None:
    """schema.json drives validation; it must not drift from the Item dataclass."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    documented = set(schema["$defs"]["item"]["properties"])
    internal = {"source_file", "source_line", "lines", "features"}  # features: parsed from `requires`
    fields = {f.name for f in dataclasses.fields(Item)} - internal
    assert documented == fields


def test_loader_and_render_do_not_import_torch() -> None:
    code = ("import sys, questionbank.loader, questionbank.render, questionbank.check, questionbank.__main__\n"
            "questionbank.loader.load_bank()\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------------------------
# rendering and the offline commands


def test_render_shows_what_players_may_see_only() -> None:
    bank = load_bank()
    for item in bank:
        for lang in ("zh", "en"):
            text = render_item(item, lang)
            assert item.title.get(lang) in text and item.prompt.get(lang) in text
            if item.kind == "code":
                assert item.starter.strip() in text
                assert item.reference.strip() not in text and "make_cases" not in text
                assert item.probe == "" or item.probe.strip() not in text
                assert item.explanation.get(lang) not in text
            if item.kind == "choice":
                for option in item.options:
                    assert f"{option.key}. {option.text.get(lang)}" in text
            if item.kind == "output":
                assert item.snippet.strip() in text
    choice = bank.get("tensor-factory-vs-constructor")
    assert "Answer: A, D" in render_explanation(choice, "en")
    assert "答案：A, D" in render_explanation(choice, "zh")


def test_render_result_lines() -> None:
    result = {
        "verdict": "failed", "message": "1 of 2 cases passed", "passed_cases": 1, "total_cases": 2,
        "cases": [
            {"index": 0, "name": "small", "example": True, "passed": True, "message": ""},
            {"index": 1, "name": "case 2", "example": False, "passed": False, "message": "result: wrong shape (got (4, 3))"},
        ],
        "error": None,
    }
    assert render_result(result, "en").splitlines() == [
        "wrong answer (failed): 1/2",
        "1 of 2 cases passed",
        "  ✓ small (example): passed",
        "  ✗ case 2 (hidden): failed - result: wrong shape (got (4, 3))",
    ]
    assert render_result(result, "zh").splitlines()[0] == "答案错误 (failed): 1/2"


def test_dumb_answers_follow_the_signature() -> None:
    bank = load_bank()
    item = bank.get("minmax-scale-keepdim")
    answers = dumb_answers(item)
    assert [a.name for a in answers] == [
        "return None", "return the first input", "return torch.zeros_like of the first tensor input",
        "return torch.ones_like of the first tensor input", "raise NotImplementedError", "an empty body (pass)",
    ]
    for answer in answers:
        fn = ast.parse(answer.code).body[0]
        assert isinstance(fn, ast.FunctionDef) and fn.name == "minmax_scale"
        assert ast.unparse(fn.args) == "x, dim"
    assert "return x" in answers[1].code
    namespace: dict = {}
    exec(answers[2].code, {"torch": _FakeTorch}, namespace)  # the guard: non-tensors give None
    assert namespace["minmax_scale"](3, 1) is None


class _FakeTorch:
    class Tensor:  # nothing is a tensor here
        pass


def test_dumb_answers_for_odd_signatures() -> None:
    item = Item(id="x", kind="code", outline=("2.1.2.a.1",), difficulty=1, tags=(), requires="cpu",
                title=_t(), prompt=_t(), explanation=_t(), entrypoint="f",
                reference="def f(a, /, b=2, *rest, scale, **extra):\n    return a\n")
    codes = {a.name: a.code for a in dumb_answers(item)}
    assert codes["return None"].startswith("def f(a, /, b=2, *rest, scale, **extra):")
    assert "(a, b, *rest, scale, *extra.values(), )" in codes["return torch.zeros_like of the first tensor input"]
    item = dataclasses.replace(item, reference="class f:\n    pass\n")
    assert dumb_answers(item)[0].code.startswith("def f(*args, **kwargs):")


def _t():
    from questionbank.model import Text

    return Text("中", "en")


def test_cli_offline_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--ids"]) == 0
    ids = capsys.readouterr().out.split()
    assert "nchw-to-nhwc-view" in ids and len(ids) == len(set(ids))

    assert main(["list", "--kind", "output", "--chapter", "3", "--ids"]) == 0
    listed = capsys.readouterr().out.split()
    bank = load_bank()
    assert "grad-fn-chain" in listed and "detach-what-is-shared" not in listed  # a chapter-3 choice item
    assert all(bank.get(i).kind == "output" and bank.get(i).chapter == 3 for i in listed)

    assert main(["show", "nchw-to-nhwc-view", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert "NCHW 转 NHWC" in out and "def nchw_to_nhwc(x):" in out and "permute(0, 2, 3, 1)" not in out.split("起始代码")[1]

    assert main(["job", "nchw-to-nhwc-view"]) == 0
    job = json.loads(capsys.readouterr().out)
    assert job["kind"] == "code" and job["submission"] == job["reference"] and job["entrypoint"] == "nchw_to_nhwc"

    assert main(["job", "broadcasting-shapes"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "output"
    assert main(["job", "detach-what-is-shared"]) == 2
    assert main(["show", "no-such-item"]) == 2
    assert "no item with id 'no-such-item'" in capsys.readouterr().err


def test_cli_coverage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["coverage"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"coverage: \d+/744", lines[-1])
    assert int(lines[-1].split()[1].split("/")[0]) >= 9
    assert sum(1 for line in lines if line.startswith("chapter ")) == 10
    assert any(line.startswith("chapter  3 ") and "code" in line for line in lines)


def test_cli_try_choice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answer = tmp_path / "answer.txt"
    answer.write_text("a, d\n", encoding="utf-8")
    assert main(["try", "tensor-factory-vs-constructor", str(answer)]) == 0
    answer.write_text("A\n", encoding="utf-8")
    assert main(["try", "tensor-factory-vs-constructor", str(answer)]) == 1
    assert "failed" in capsys.readouterr().out
