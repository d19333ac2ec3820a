"""The outline as data: counts, stable ids, byte-identical regeneration, English everywhere.

The committed questionbank/outline.yaml is checked on its own; where the seeds are present
(../shared/seeds next to the repository) it is also checked against a fresh import.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from questionbank.outline import (
    BOLD_LINES_IN_SEED,
    DEEP_ID_RE,
    EN_PATH,
    EXPECTED_COUNTS,
    OUTLINE_PATH,
    QUESTION_ID_RE,
    Outline,
    OutlineError,
    TranslationError,
    apply_english,
    dump_outline_yaml,
    import_outline,
    load_outline,
    parse_deep_markdown,
    parse_outline_markdown,
    read_english,
    run_import_outline,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SEEDS = REPO_ROOT.parent / "shared" / "seeds"
SEED_FILE = next(iter(sorted(SEEDS.glob("004_*.txt"))), None) if SEEDS.is_dir() else None
needs_seeds = pytest.mark.skipif(
    SEED_FILE is None, reason=f"the seeds are not at {SEEDS} (they live outside the repository)"
)
DEEP_PER_FILE = {"000": 10, "001": 4, "002": 3, "003": 3}
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


@pytest.fixture(scope="module")
def committed() -> Outline:
    return load_outline()


@pytest.fixture(scope="module")
def fresh() -> Outline:
    assert SEED_FILE is not None
    return import_outline(SEED_FILE)


def _structural_counts(outline: Outline) -> dict[str, int]:
    return {k: v for k, v in outline.counts().items() if k in EXPECTED_COUNTS}


# --------------------------------------------------------------------------- counts


def test_committed_counts(committed: Outline) -> None:
    assert _structural_counts(committed) == {
        "chapters": 10, "sections": 37, "subsections": 79, "groups": 187, "questions": 744,
    }
    assert _structural_counts(committed) == dict(EXPECTED_COUNTS)
    assert Counter(d.split(".")[1] for d in committed.deep) == DEEP_PER_FILE


def test_188_quoted_groups_are_187_groups_and_the_closing_remark(committed: Outline) -> None:
    # The seeds README and issue 3 say 188 topic groups: the number of bold lines, one of
    # which is the closing remark after the last chapter (kept as Outline.note).
    assert len(committed.groups) + 1 == BOLD_LINES_IN_SEED == 188
    assert committed.note.zh.startswith("结语：") and committed.note.en


@needs_seeds
def test_seed_bold_lines_are_groups_plus_closing_remark(fresh: Outline) -> None:
    assert SEED_FILE is not None
    lines = SEED_FILE.read_text(encoding="utf-8").splitlines()
    bold = [line for line in lines if line.startswith("**")]
    assert len(bold) == BOLD_LINES_IN_SEED
    assert bold[-1].strip("*") == fresh.note.zh
    assert len([line for line in lines if line.startswith("- ")]) == 744


@needs_seeds
def test_reimport_counts(fresh: Outline) -> None:
    assert _structural_counts(fresh) == dict(EXPECTED_COUNTS)
    assert Counter(d.split(".")[1] for d in fresh.deep) == DEEP_PER_FILE


# --------------------------------------------------------------------------- regeneration


@needs_seeds
def test_regeneration_is_byte_identical(fresh: Outline) -> None:
    committed_bytes = OUTLINE_PATH.read_bytes()
    first = dump_outline_yaml(fresh).encode("utf-8")
    second = dump_outline_yaml(import_outline(SEED_FILE)).encode("utf-8")
    assert first == second, "two imports of the same seeds differ"
    assert first == committed_bytes, "outline.yaml is out of date: run `python -m questionbank import-outline`"


@needs_seeds
def test_command_writes_the_committed_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "outline.yaml"
    assert run_import_outline([str(SEED_FILE), "--out", str(out)]) == 0
    assert out.read_bytes() == OUTLINE_PATH.read_bytes()
    assert "744 questions" in capsys.readouterr().out
    # the seeds folder works as well as the file, and --check agrees
    assert run_import_outline([str(SEEDS), "--out", str(out), "--check"]) == 0


@needs_seeds
def test_check_flags_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "outline.yaml"
    out.write_bytes(OUTLINE_PATH.read_bytes().replace(b"Tensor operations", b"Tensor things"))
    assert run_import_outline([str(SEED_FILE), "--out", str(out), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err


@needs_seeds
def test_committed_file_loads_to_the_fresh_import(committed: Outline, fresh: Outline) -> None:
    assert committed == fresh


def test_load_outline_is_cached() -> None:
    assert load_outline() is load_outline()


# --------------------------------------------------------------------------- ids


def test_ids_are_unique_and_well_formed() -> None:
    data = yaml.safe_load(OUTLINE_PATH.read_text(encoding="utf-8"))
    seen: list[str] = []
    for c_no, c in enumerate(data["chapters"], start=1):
        assert c["id"] == str(c_no)
        seen.append(c["id"])
        for s_no, s in enumerate(c["sections"], start=1):
            assert s["id"] == f"{c['id']}.{s_no}"
            seen.append(s["id"])
            for k_no, k in enumerate(s["subsections"], start=1):
                assert k["id"] == f"{s['id']}.{k_no}"
                seen.append(k["id"])
                for g_no, g in enumerate(k["groups"]):
                    assert g["id"] == f"{k['id']}.{'abcdefghijklmnopqrstuvwxyz'[g_no]}"
                    seen.append(g["id"])
                    assert g["questions"], f"{g['id']} has no questions"
                    for q_no, q in enumerate(g["questions"], start=1):
                        assert q["id"] == f"{g['id']}.{q_no}"
                        assert QUESTION_ID_RE.match(q["id"]), q["id"]
                        seen.append(q["id"])
    for d in data["deep"]:
        assert DEEP_ID_RE.match(d["id"]), d["id"]
        seen.append(d["id"])
    dupes = [i for i, n in Counter(seen).items() if n > 1]
    assert not dupes
    assert len(seen) == 10 + 37 + 79 + 187 + 744 + 20


def test_question_records_point_at_their_headings(committed: Outline) -> None:
    for q in committed.questions.values():
        c, s, k, g, _ = q.id.split(".")
        assert (q.chapter, q.section, q.subsection, q.group) == (
            c, f"{c}.{s}", f"{c}.{s}.{k}", f"{c}.{s}.{k}.{g}",
        )
        assert q.group in committed.groups and q.subsection in committed.subsections
        assert q.section in committed.sections and q.chapter in committed.chapters
    for table, parents in (
        (committed.sections, committed.chapters),
        (committed.subsections, committed.sections),
        (committed.groups, committed.subsections),
    ):
        assert all(h.parent in parents for h in table.values())


def test_every_text_has_zh_and_english(committed: Outline) -> None:
    assert committed.title.zh and committed.title.en
    for table in (committed.chapters, committed.sections, committed.subsections, committed.groups):
        for h in table.values():
            assert h.zh.strip() and h.en.strip(), h.id
            assert not CJK.search(h.en), f"{h.id}: Chinese left in the English {h.en!r}"
    for q in committed.questions.values():
        assert q.text_zh.strip() and q.text_en.strip(), q.id
        assert not CJK.search(q.text_en), f"{q.id}: Chinese left in the English {q.text_en!r}"
    for d in committed.deep.values():
        for zh, en in ((d.part_zh, d.part_en), (d.title_zh, d.title_en), (d.text_zh, d.text_en)):
            assert zh.strip() and en.strip(), d.id
            assert not CJK.search(en), f"{d.id}: Chinese left in the English"


# --------------------------------------------------------------------------- spot checks


def test_spot_checks(committed: Outline) -> None:
    q = committed.questions
    assert q["2.1.1.a.1"].text_zh == "列举至少5种创建张量的方法（torch.tensor、torch.zeros等）"
    assert q["2.1.2.b.3"].text_zh == "detach()操作对计算图有什么影响？"
    assert committed.groups["2.1.2.b"].zh == "张量复制"
    assert committed.subsections["2.1.2"].zh == "张量的视图与克隆"
    assert committed.sections["2.1"].zh == "张量基础"
    assert committed.chapters["2"].zh == "张量(Tensor)操作"
    assert committed.chapters["3"].en == "Automatic differentiation (Autograd)"
    # the short groups: 1.1.2.c has two questions, 1.1.2.b three
    assert [x.id for x in committed.questions_in("1.1.2.c")] == ["1.1.2.c.1", "1.1.2.c.2"]
    assert len(committed.questions_in("1.1.2.b")) == 3
    assert q["10.5.2.c.4"].text_zh == "分布式训练的未来发展？"
    assert list(q)[0] == "1.1.1.a.1" and list(q)[-1] == "10.5.2.c.4"


@needs_seeds
@pytest.mark.parametrize("subsection", ["1.1.1", "2.1.1", "3.3.2", "6.3.2", "10.5.2"])
def test_first_question_of_subsection_matches_the_seed(committed: Outline, subsection: str) -> None:
    assert SEED_FILE is not None
    lines = SEED_FILE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"#### 子小节{subsection}："))
    first_group = next(line for line in lines[start:] if line.startswith("**"))
    first_question = next(line for line in lines[start:] if line.startswith("- "))
    assert committed.groups[f"{subsection}.a"].zh == first_group.strip("*")
    assert committed.questions[f"{subsection}.a.1"].text_zh == first_question[2:]


def test_helpers(committed: Outline) -> None:
    assert committed.exists("2.1.2.b.3") and committed.exists("deep.000.3")
    assert not committed.exists("2.1.2.b.9") and not committed.exists("2.1.2.b") and not committed.exists("deep.009.1")
    assert committed.chapter_of("2.1.2.b.3") == 2
    assert committed.chapter_of("10.1.1.a.1") == 10
    assert committed.chapter_of("4.2") == 4
    assert committed.chapter_of("deep.002.1") == 0
    with pytest.raises(KeyError):
        committed.chapter_of("11.1.1.a.1")
    assert len(committed.questions_in("1")) == 32  # "10.*" is not under "1"
    assert sum(len(committed.questions_in(c)) for c in committed.chapters) == 744
    heading = committed.heading("2.1.2.b")
    assert heading is not None and heading.level == "group" and heading.parent == "2.1.2"
    assert committed.questions["2.1.1.a.1"].text.get("en").startswith("Name at least five ways")


# --------------------------------------------------------------------------- deep questions


def test_deep_questions(committed: Outline) -> None:
    for prefix, n in DEEP_PER_FILE.items():
        ids = [d for d in committed.deep if d.startswith(f"deep.{prefix}.")]
        assert ids == [f"deep.{prefix}.{i}" for i in range(1, n + 1)]
        assert all(committed.deep[i].source.startswith(prefix + "_") for i in ids)
    d2 = committed.deep["deep.000.2"]
    assert d2.title_zh == "Storage 的共享之谜"
    assert d2.part_zh == "第一部分：关于 Tensor 结构与内存管理的问题"
    assert "```python\nx = torch.randn(4, 4)" in d2.text_zh and "y.add_(1)" in d2.text_zh
    assert committed.deep["deep.000.10"].title_zh == "Triton Kernel 与静态形状"
    assert "class QuantizeWithSTE(torch.autograd.Function):" in committed.deep["deep.002.1"].text_zh
    assert "TORCH_LIBRARY(my_ops, m)" in committed.deep["deep.002.2"].text_zh
    assert committed.deep["deep.001.2"].title_zh.startswith("编写自定义扩展")
    assert committed.deep["deep.003.3"].title_zh == "性能 - 榨干GPU的每一滴FLOPS"
    # summaries and closing words are not questions
    assert not any("总结" in d.title_zh for d in committed.deep.values())


def test_deep_parser_shapes() -> None:
    parts = parse_deep_markdown(
        "intro\n\n---\n\n### **第一部分：A**\n\n1.  **T1**: first\n    *   more\n\n"
        "2.  **T2**: second\n    ```python\n    ### not a heading\n    ```\n\n---\n\nbye",
        "000",
    )
    assert [(d.id, d.part_zh, d.title_zh) for d in parts] == [
        ("deep.000.1", "第一部分：A", "T1"), ("deep.000.2", "第一部分：A", "T2"),
    ]
    assert parts[0].text_zh == "first\n*   more"
    assert parts[1].text_zh == "second\n```python\n### not a heading\n```"
    sections = parse_deep_markdown("### 问题一：X\nbody\n\n1.  **inner**: stays\n\n### 总结\ntable", "003")
    assert [(d.id, d.title_zh) for d in sections] == [("deep.003.1", "X")]
    assert sections[0].text_zh == "body\n\n1.  **inner**: stays"


# --------------------------------------------------------------------------- errors


def test_english_missing_stale_and_unknown_are_listed(committed: Outline) -> None:
    en = read_english(EN_PATH)
    en.pop("2.1.1.a.1")
    en["2.1.1.a.2"] = dict(en["2.1.1.a.2"], zh="改过的中文")
    en["9.9.9.z.9"] = {"zh": "x", "en": "y"}
    en["deep.000.1"] = dict(en["deep.000.1"], zh_digest="0" * 16)
    with pytest.raises(TranslationError) as err:
        apply_english(committed, en)
    assert err.value.missing == ["2.1.1.a.1"]
    assert err.value.stale == ["2.1.1.a.2", "deep.000.1"]
    assert err.value.unknown == ["9.9.9.z.9"]
    message = str(err.value)
    assert "missing (1): 2.1.1.a.1" in message and "9.9.9.z.9" in message


def test_committed_english_applies_cleanly(committed: Outline) -> None:
    assert apply_english(committed, read_english(EN_PATH)) == committed


@needs_seeds
def test_import_fails_clearly_without_english(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    en = tmp_path / "en.yaml"
    en.write_text("title: {zh: 熟悉PyTorch, en: Getting to know PyTorch}\n", encoding="utf-8")
    assert run_import_outline([str(SEED_FILE), "--en", str(en), "--out", str(tmp_path / "o.yaml")]) == 2
    err = capsys.readouterr().err
    assert "missing (1078)" in err and "1.1.1.a.1" in err and "deep.003.3" in err
    assert not (tmp_path / "o.yaml").exists()


OUTLINE_SNIPPET = """# 主题：T

---

## 章节1：C

### 小节1.1：S

#### 子小节1.1.1：K

**G**
- q1
- q2

---

**结语：bye**
"""


def test_parser_on_a_small_outline() -> None:
    o = parse_outline_markdown(OUTLINE_SNIPPET, "x.txt")
    assert list(o.questions) == ["1.1.1.a.1", "1.1.1.a.2"]
    assert list(o.groups) == ["1.1.1.a"] and o.note.zh == "结语：bye" and o.title.zh == "T"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (OUTLINE_SNIPPET.replace("- q1\n", "- q1\nstray text\n"), "x.txt:13: unexpected line"),
        (OUTLINE_SNIPPET.replace("小节1.1：", "小节1.2："), "section 1.2 should be 1.1"),
        (OUTLINE_SNIPPET.replace("子小节1.1.1：", "子小节2.1.1："), "not inside section 2.1"),
        (OUTLINE_SNIPPET.replace("**G**\n", ""), "x.txt:11: question '- q1' is not inside a topic group"),
        (OUTLINE_SNIPPET.replace("- q1\n- q2\n", ""), "topic group 1.1.1.a has no questions"),
        (OUTLINE_SNIPPET.replace("章节1：", "章节2："), "chapter 2 follows chapter 0"),
    ],
)
def test_parser_rejects_irregular_outlines(text: str, message: str) -> None:
    with pytest.raises(OutlineError, match=re.escape(message)):
        parse_outline_markdown(text, "x.txt")
