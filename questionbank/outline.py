"""The outline as data: stable ids for the 744 outline questions and the deep questions.

The seeds (`../shared/seeds`) are Chinese Markdown. Items, coverage and the bot refer to
outline questions by id, so the ids must be reproducible from the seed: they follow the
outline's own numbering, `C.S.K.g.q` (chapter, section, subsection, topic group as a
letter, question number within the group), e.g. `2.1.2.b.3`. The deep questions of the
other seed files get `deep.NNN.i` (file prefix, order of appearance).

`import_outline` parses the seeds and merges the hand-written English of
`outline_en.yaml`; `write_outline_yaml` writes the generated, committed
`outline.yaml`; `load_outline` reads that file (cached), which is all the bank loader,
`coverage` and the bot need: they never parse Markdown.
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import re
import string
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from .model import Text

PACKAGE_DIR = Path(__file__).resolve().parent
OUTLINE_PATH = PACKAGE_DIR / "outline.yaml"
EN_PATH = PACKAGE_DIR / "outline_en.yaml"
DEFAULT_SEED_DIR = PACKAGE_DIR.parent.parent / "shared" / "seeds"
OUTLINE_SEED_PREFIX = "004_"
DEEP_SEED_PREFIXES: tuple[str, ...] = ("000", "001", "002", "003")
# What the outline "熟悉PyTorch" holds; the importer refuses a parse that disagrees, so a
# parser regression or a changed seed cannot silently renumber the bank.
EXPECTED_COUNTS: Mapping[str, int] = {
    "chapters": 10,
    "sections": 37,
    "subsections": 79,
    "groups": 187,  # not 188: see parse_outline_markdown (the 188th bold line is the closing remark)
    "questions": 744,
}
# The seeds README and issue 3 quote 188 topic groups: that is the number of `**bold**` lines
# in the seed, and one of them is the closing remark, not a group. Kept here so a test can
# show where the quoted figure comes from.
BOLD_LINES_IN_SEED = 188
TITLE_KEY = "title"  # key of the outline's own title in outline_en.yaml
NOTE_KEY = "note"  # key of its closing remark

QUESTION_ID_RE = re.compile(r"^([1-9]\d*)\.([1-9]\d*)\.([1-9]\d*)\.([a-z])\.([1-9]\d*)$")
DEEP_ID_RE = re.compile(r"^deep\.(\d{3})\.([1-9]\d*)$")

Level = Literal["chapter", "section", "subsection", "group"]


class OutlineError(Exception):
    """The seed or the YAML does not have the shape the ids depend on."""


class TranslationError(OutlineError):
    """outline_en.yaml lacks English for some ids, or its English was written for other Chinese."""

    def __init__(self, missing: list[str], stale: list[str], unknown: list[str], path: str) -> None:
        self.missing, self.stale, self.unknown = missing, stale, unknown
        lines = [f"{path}: the English renderings do not match the outline"]
        if missing:
            lines.append(f"  missing ({len(missing)}): " + ", ".join(missing))
        if stale:
            lines.append(
                f"  stale, the Chinese changed since they were written ({len(stale)}): " + ", ".join(stale)
            )
        if unknown:
            lines.append(f"  not in the outline ({len(unknown)}): " + ", ".join(unknown))
        lines.append("  add or fix those entries (each keeps the `zh` it translates) and import again")
        super().__init__("\n".join(lines))


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Heading:
    """A chapter, section, subsection or topic-group title; `parent` is the enclosing id."""

    id: str
    level: Level
    zh: str
    en: str
    parent: str = ""

    @property
    def text(self) -> Text:
        return Text(zh=self.zh, en=self.en)


@dataclass(frozen=True)
class OutlineQuestion:
    """One outline question; `chapter`..`group` are the ids of its headings (`"2"`, `"2.1"`...)."""

    id: str
    chapter: str
    section: str
    subsection: str
    group: str
    text_zh: str
    text_en: str

    @property
    def text(self) -> Text:
        return Text(zh=self.text_zh, en=self.text_en)

    @property
    def chapter_no(self) -> int:
        return int(self.chapter)


@dataclass(frozen=True)
class DeepQuestion:
    """A deep question from seed files 000-003.

    `part` is the `###` heading it stands under: a part heading in 000 (two questions per
    part), the question's own heading in 001-003. `text_zh` is the full original body,
    code snippets included; `text_en` is a shorter English rendering.
    """

    id: str
    source: str
    number: int
    part_zh: str
    part_en: str
    title_zh: str
    title_en: str
    text_zh: str
    text_en: str

    @property
    def part(self) -> Text:
        return Text(zh=self.part_zh, en=self.part_en)

    @property
    def title(self) -> Text:
        return Text(zh=self.title_zh, en=self.title_en)

    @property
    def text(self) -> Text:
        return Text(zh=self.text_zh, en=self.text_en)


@dataclass
class Outline:
    """The whole outline, every dict in outline order. Treat it as read-only: load_outline caches it."""

    title: Text
    source: str
    note: Text = field(default_factory=lambda: Text("", ""))  # the closing remark after the last chapter
    chapters: dict[str, Heading] = field(default_factory=dict)
    sections: dict[str, Heading] = field(default_factory=dict)
    subsections: dict[str, Heading] = field(default_factory=dict)
    groups: dict[str, Heading] = field(default_factory=dict)
    questions: dict[str, OutlineQuestion] = field(default_factory=dict)
    deep: dict[str, DeepQuestion] = field(default_factory=dict)

    def exists(self, id: str) -> bool:
        """True for an outline question id or a deep question id (what items may point at)."""
        return id in self.questions or id in self.deep

    def chapter_of(self, id: str) -> int:
        """The chapter number of a question or heading id; 0 for deep questions (as Item.chapter)."""
        if id in self.deep:
            return 0
        if id in self.questions:
            return int(self.questions[id].chapter)
        if self.heading(id) is not None:
            return int(id.split(".", 1)[0])
        raise KeyError(f"unknown outline id {id!r}")

    def heading(self, id: str) -> Heading | None:
        """The chapter/section/subsection/group with that id, or None."""
        for table in (self.chapters, self.sections, self.subsections, self.groups):
            if id in table:
                return table[id]
        return None

    def questions_in(self, prefix: str) -> list[OutlineQuestion]:
        """Questions under a chapter/section/subsection/group id (`"2"`, `"2.1"`, `"2.1.2.b"`)."""
        if prefix == "":
            return list(self.questions.values())
        return [q for q in self.questions.values() if q.id.startswith(prefix + ".")]

    def counts(self) -> dict[str, int]:
        return {
            "chapters": len(self.chapters),
            "sections": len(self.sections),
            "subsections": len(self.subsections),
            "groups": len(self.groups),
            "questions": len(self.questions),
            "deep": len(self.deep),
        }


# --------------------------------------------------------------------------- parsing the outline

_TITLE_RE = re.compile(r"^# 主题：(?P<title>.+)$")
_CHAPTER_RE = re.compile(r"^## 章节(?P<c>\d+)：(?P<title>.+)$")
_SECTION_RE = re.compile(r"^### 小节(?P<c>\d+)\.(?P<s>\d+)：(?P<title>.+)$")
_SUBSECTION_RE = re.compile(r"^#### 子小节(?P<c>\d+)\.(?P<s>\d+)\.(?P<k>\d+)：(?P<title>.+)$")
_GROUP_RE = re.compile(r"^\*\*(?P<title>[^*].*?)\*\*$")
_QUESTION_RE = re.compile(r"^- (?P<text>.+)$")
_RULE_RE = re.compile(r"^-{3,}$")


def parse_outline_markdown(text: str, source: str = "") -> Outline:
    """Parse the outline seed into an Outline with empty English.

    Numbers of chapters, sections and subsections come from the headings and must run
    1, 2, 3... inside their parent (checked, so a gap is an error, not a silent renumber);
    groups get letters and questions numbers in order of appearance. Every non-blank line
    must be one of the known shapes, so a changed seed fails loudly with its line number.

    Irregularities of the seed, handled here:
    - the `# 主题：...` line is the outline's title, not a chapter;
    - `---` rules separate chapters; the last one is followed by a bold closing remark
      (`**结语：本大纲涵盖了...**`) that looks like a topic group but has no questions and
      lies outside every chapter. It is kept as `Outline.note`, not counted as a group, so
      the seed has 187 topic groups: the "188" quoted in the seeds README and issue 3 is the
      number of bold lines, closing remark included (BOLD_LINES_IN_SEED);
    - most groups have 4 questions, but 1.1.2.b and 1.2.2.b have 3 and 1.1.2.c has 2:
      content, not an irregularity; the numbering simply follows;
    - a topic group with no questions anywhere else would be an error.
    """
    outline = Outline(title=Text("", ""), source=source)
    chapter = section = subsection = group = ""
    after_rule = False
    group_line = 0

    def fail(lineno: int, why: str) -> OutlineError:
        return OutlineError(f"{source or '<outline>'}:{lineno}: {why}")

    def close_group() -> None:
        if group and not outline.questions_in(group):
            raise fail(group_line, f"topic group {group} has no questions")

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if m := _TITLE_RE.match(line):
            if outline.title.zh or outline.chapters:
                raise fail(lineno, "a second outline title")
            outline.title = Text(zh=m["title"].strip(), en="")
            continue
        if _RULE_RE.match(line):
            close_group()
            group = subsection = section = ""
            after_rule = True
            continue
        if m := _CHAPTER_RE.match(line):
            close_group()
            c = int(m["c"])
            if c != len(outline.chapters) + 1:
                raise fail(lineno, f"chapter {c} follows chapter {len(outline.chapters)}")
            chapter, section, subsection, group, after_rule = str(c), "", "", "", False
            outline.chapters[chapter] = Heading(chapter, "chapter", m["title"].strip(), "")
            continue
        if m := _SECTION_RE.match(line):
            close_group()
            if after_rule or not chapter or m["c"] != chapter:
                raise fail(lineno, f"section {m['c']}.{m['s']} is not inside chapter {m['c']}")
            n = sum(1 for s in outline.sections if s.startswith(chapter + ".")) + 1
            if int(m["s"]) != n:
                raise fail(lineno, f"section {m['c']}.{m['s']} should be {chapter}.{n}")
            section, subsection, group = f"{chapter}.{n}", "", ""
            outline.sections[section] = Heading(section, "section", m["title"].strip(), "", chapter)
            continue
        if m := _SUBSECTION_RE.match(line):
            close_group()
            if not section or f"{m['c']}.{m['s']}" != section:
                raise fail(lineno, f"subsection {m['c']}.{m['s']}.{m['k']} is not inside section {m['c']}.{m['s']}")
            n = sum(1 for s in outline.subsections if s.startswith(section + ".")) + 1
            if int(m["k"]) != n:
                raise fail(lineno, f"subsection {m['c']}.{m['s']}.{m['k']} should be {section}.{n}")
            subsection, group = f"{section}.{n}", ""
            outline.subsections[subsection] = Heading(subsection, "subsection", m["title"].strip(), "", section)
            continue
        if m := _GROUP_RE.match(line):
            if after_rule:  # the closing remark after the last rule: not a topic group
                if outline.note.zh:
                    raise fail(lineno, "a second bold line after a `---` rule")
                outline.note = Text(zh=m["title"].strip(), en="")
                continue
            close_group()
            if not subsection:
                raise fail(lineno, f"topic group {line!r} is not inside a subsection")
            n = sum(1 for g in outline.groups if g.startswith(subsection + "."))
            if n >= len(string.ascii_lowercase):
                raise fail(lineno, f"more than 26 topic groups in {subsection}")
            group, group_line = f"{subsection}.{string.ascii_lowercase[n]}", lineno
            outline.groups[group] = Heading(group, "group", m["title"].strip(), "", subsection)
            continue
        if m := _QUESTION_RE.match(line):
            if not group:
                raise fail(lineno, f"question {line!r} is not inside a topic group")
            n = sum(1 for q in outline.questions if q.startswith(group + ".")) + 1
            qid = f"{group}.{n}"
            outline.questions[qid] = OutlineQuestion(
                id=qid, chapter=chapter, section=section, subsection=subsection, group=group,
                text_zh=m["text"].strip(), text_en="",
            )
            continue
        raise fail(lineno, f"unexpected line {line!r}")
    close_group()
    if not outline.title.zh:
        raise OutlineError(f"{source or '<outline>'}: no `# 主题：` title line")
    return outline


# --------------------------------------------------------------------------- parsing the deep questions

_H3_RE = re.compile(r"^###\s+(?P<title>.+?)\s*$")
_NUMBERED_HEADING_RE = re.compile(r"^(?:(?P<n>\d+)\.\s+|问题(?P<zh>[一二三四五六七八九十]+)[：:]\s*)(?P<title>.+)$")
_DEEP_ITEM_RE = re.compile(r"^(?P<n>\d+)\.\s+\*\*(?P<title>.+?)\*\*\s*[:：]\s*(?P<rest>.*)$")
_FENCE_RE = re.compile(r"^\s*```")


def _strip_bold(s: str) -> str:
    s = s.strip()
    if s.startswith("**") and s.endswith("**") and len(s) > 4:
        s = s[2:-2].strip()
    return s


def _clean_body(lines: Iterable[str]) -> str:
    """Dedent, strip trailing spaces per line (so the YAML can use block style) and outer blank lines."""
    text = textwrap.dedent("\n".join(line.rstrip() for line in lines))
    return text.strip("\n")


def parse_deep_markdown(text: str, prefix: str, source: str = "") -> list[DeepQuestion]:
    """The deep questions of one seed file, numbered in order of appearance as `deep.<prefix>.i`.

    Two shapes occur: a `###` heading that is itself numbered (`### **1. ...**`,
    `### 2. ...`, `### 问题一：...`, files 001-003) is one question whose text is the whole
    section; an unnumbered heading (`### **第一部分：...**`, file 000) is a part whose
    questions are its numbered bold items (`1.  **title**: text`). A section ends at the
    next `###` or a `---` rule; intros, summaries and closing words are not questions.
    """
    found: list[tuple[str, str, list[str], bool]] = []  # (part, title, body lines, is an item)
    part = ""
    own_section = False  # the current ### heading is itself a question
    in_fence = False
    current: tuple[str, str, list[str], bool] | None = None

    for raw in text.splitlines():
        is_fence = bool(_FENCE_RE.match(raw))
        if is_fence:
            in_fence = not in_fence
        elif not in_fence:
            if m := _H3_RE.match(raw):
                current = None
                part = _strip_bold(m["title"])
                numbered = _NUMBERED_HEADING_RE.match(part)
                own_section = numbered is not None
                if numbered:
                    current = (part, numbered["title"].strip(), [], False)
                    found.append(current)
                continue
            if _RULE_RE.match(raw.strip()):
                current, part, own_section = None, "", False
                continue
            if part and not own_section and (m := _DEEP_ITEM_RE.match(raw)):
                current = (part, m["title"].strip(), [m["rest"]], True)
                found.append(current)
                continue
        if current is not None:
            current[2].append(raw)

    questions: list[DeepQuestion] = []
    for i, (part_zh, title_zh, body, is_item) in enumerate(found, start=1):
        if is_item:
            # the text starts after `**title**:` and goes on in lines indented under the item
            text_zh = (body[0].strip() + "\n" + _clean_body(body[1:])).strip("\n")
        else:
            text_zh = _clean_body(body)
        questions.append(DeepQuestion(
            id=f"deep.{prefix}.{i}", source=source, number=i, part_zh=part_zh, part_en="",
            title_zh=title_zh, title_en="", text_zh=text_zh, text_en="",
        ))
    if not questions:
        raise OutlineError(f"{source or prefix}: no deep questions found")
    return questions


# --------------------------------------------------------------------------- English


def _digest(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8")).hexdigest()[:16]


def english_entries(outline: Outline) -> dict[str, dict[str, str]]:
    """What outline_en.yaml must hold for this outline: id -> the Chinese it translates.

    Titles and questions carry their `zh` verbatim, so a reviewer sees both languages side by
    side and a changed seed is caught as "stale". Deep questions carry their Chinese title
    and a digest of their (long) Chinese part heading and text.
    """
    wanted: dict[str, dict[str, str]] = {TITLE_KEY: {"zh": outline.title.zh}}
    if outline.note.zh:
        wanted[NOTE_KEY] = {"zh": outline.note.zh}
    for table in (outline.chapters, outline.sections, outline.subsections, outline.groups):
        for h in table.values():
            wanted[h.id] = {"zh": h.zh}
    for q in outline.questions.values():
        wanted[q.id] = {"zh": q.text_zh}
    for d in outline.deep.values():
        wanted[d.id] = {"zh": d.title_zh, "zh_digest": _digest(d.part_zh + "\n" + d.text_zh)}
    return wanted


def apply_english(outline: Outline, en: Mapping[str, Any], path: str = "outline_en.yaml") -> Outline:
    """Merge the hand-written English; any missing, stale or unknown id is one TranslationError."""
    wanted = english_entries(outline)
    missing, stale = [], []
    for id, src in wanted.items():
        entry = en.get(id)
        deep = id.startswith("deep.")
        keys = ("part", "title", "text") if deep else ("en",)
        if not isinstance(entry, Mapping) or any(not str(entry.get(k) or "").strip() for k in keys):
            missing.append(id)
        elif any(str(entry.get(k, "")).strip() != v.strip() for k, v in src.items()):
            stale.append(id)
    unknown = [str(id) for id in en if str(id) not in wanted]
    if missing or stale or unknown:
        raise TranslationError(missing, stale, unknown, path)

    def en_of(id: str) -> str:
        return str(en[id]["en"]).strip()

    out = Outline(title=Text(outline.title.zh, en_of(TITLE_KEY)), source=outline.source)
    if outline.note.zh:
        out.note = Text(outline.note.zh, en_of(NOTE_KEY))
    out.chapters = {k: replace(h, en=en_of(k)) for k, h in outline.chapters.items()}
    out.sections = {k: replace(h, en=en_of(k)) for k, h in outline.sections.items()}
    out.subsections = {k: replace(h, en=en_of(k)) for k, h in outline.subsections.items()}
    out.groups = {k: replace(h, en=en_of(k)) for k, h in outline.groups.items()}
    out.questions = {k: replace(q, text_en=en_of(k)) for k, q in outline.questions.items()}
    out.deep = {
        k: replace(
            d,
            part_en=str(en[k]["part"]).strip(),
            title_en=str(en[k]["title"]).strip(),
            text_en=_clean_body(str(en[k]["text"]).splitlines()),
        )
        for k, d in outline.deep.items()
    }
    return out


def read_english(path: str | Path = EN_PATH) -> dict[str, Any]:
    """The hand-written English renderings (id -> entry); an absent file is an empty mapping."""
    path = Path(path)
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise OutlineError(f"{path}: expected a mapping of id -> entry")
    return {str(k): v for k, v in data.items()}


# --------------------------------------------------------------------------- import


def _seed_files(seed_dir_or_file: str | Path) -> tuple[Path, list[tuple[str, Path]]]:
    p = Path(seed_dir_or_file)
    if p.is_dir():
        matches = sorted(p.glob(OUTLINE_SEED_PREFIX + "*.txt"))
        if len(matches) != 1:
            raise OutlineError(f"{p}: expected one {OUTLINE_SEED_PREFIX}*.txt outline file, found {len(matches)}")
        outline_file, folder = matches[0], p
    elif p.is_file():
        outline_file, folder = p, p.parent
    else:
        raise OutlineError(f"{p}: no such seed file or folder")
    deep: list[tuple[str, Path]] = []
    for prefix in DEEP_SEED_PREFIXES:
        matches = sorted(folder.glob(prefix + "_*.txt"))
        if len(matches) != 1:
            raise OutlineError(f"{folder}: expected one {prefix}_*.txt deep-question file, found {len(matches)}")
        deep.append((prefix, matches[0]))
    return outline_file, deep


def import_outline(
    seed_dir_or_file: str | Path = DEFAULT_SEED_DIR,
    en_path: str | Path | None = EN_PATH,
    *,
    expect_counts: Mapping[str, int] | None = EXPECTED_COUNTS,
) -> Outline:
    """Parse the outline seed (004) and the deep-question seeds (000-003 beside it), add English.

    `en_path=None` skips the English (empty `en` everywhere): that is for tooling that wants
    the Chinese skeleton, never for writing outline.yaml.
    """
    outline_file, deep_files = _seed_files(seed_dir_or_file)
    outline = parse_outline_markdown(outline_file.read_text(encoding="utf-8"), outline_file.name)
    if expect_counts is not None:
        got = outline.counts()
        wrong = {k: (got[k], v) for k, v in expect_counts.items() if got.get(k) != v}
        if wrong:
            detail = ", ".join(f"{k}: {g} (expected {e})" for k, (g, e) in wrong.items())
            raise OutlineError(f"{outline_file}: the parse disagrees with the outline's counts: {detail}")
    for prefix, path in deep_files:
        for d in parse_deep_markdown(path.read_text(encoding="utf-8"), prefix, path.name):
            outline.deep[d.id] = d
    if en_path is not None:
        outline = apply_english(outline, read_english(en_path), str(en_path))
    return outline


# --------------------------------------------------------------------------- YAML

_HEADER = (
    "# The outline as data. GENERATED by `python -m questionbank import-outline SEED_FILE`\n"
    "# from ../shared/seeds (004 for the outline, 000-003 for the deep questions) and the\n"
    "# hand-written English in questionbank/outline_en.yaml. Do not edit: edit those and regenerate.\n"
    "# Ids: C.S.K.g.q = chapter.section.subsection.group letter.question; deep.NNN.i.\n"
)


class _Dumper(yaml.SafeDumper):
    """SafeDumper that writes multi-line strings as `|` blocks, so code snippets stay readable."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_representer)


def outline_to_data(outline: Outline) -> dict[str, Any]:
    """The nested, ordered structure written to outline.yaml."""
    def node(h: Heading) -> dict[str, Any]:
        return {"id": h.id, "zh": h.zh, "en": h.en}

    chapters = []
    for c in outline.chapters.values():
        cd = node(c) | {"sections": []}
        for s in (s for s in outline.sections.values() if s.parent == c.id):
            sd = node(s) | {"subsections": []}
            for k in (k for k in outline.subsections.values() if k.parent == s.id):
                kd = node(k) | {"groups": []}
                for g in (g for g in outline.groups.values() if g.parent == k.id):
                    gd = node(g) | {"questions": [
                        {"id": q.id, "zh": q.text_zh, "en": q.text_en} for q in outline.questions_in(g.id)
                    ]}
                    kd["groups"].append(gd)
                sd["subsections"].append(kd)
            cd["sections"].append(sd)
        chapters.append(cd)
    deep = [
        {
            "id": d.id,
            "source": d.source,
            "part": {"zh": d.part_zh, "en": d.part_en},
            "title": {"zh": d.title_zh, "en": d.title_en},
            "zh": d.text_zh,
            "en": d.text_en,
        }
        for d in outline.deep.values()
    ]
    return {
        "title": {"zh": outline.title.zh, "en": outline.title.en},
        "source": outline.source,
        "counts": {k: v for k, v in outline.counts().items()},
        "note": {"zh": outline.note.zh, "en": outline.note.en},
        "chapters": chapters,
        "deep": deep,
    }


def dump_outline_yaml(outline: Outline) -> str:
    """The exact text of outline.yaml: same outline, same bytes."""
    body = yaml.dump(
        outline_to_data(outline), Dumper=_Dumper, allow_unicode=True, sort_keys=False,
        width=1_000_000, default_flow_style=False,
    )
    return _HEADER + body


def write_outline_yaml(outline: Outline, path: str | Path = OUTLINE_PATH) -> Path:
    """Write outline.yaml (UTF-8, `\\n` line ends) and drop load_outline's cache."""
    path = Path(path)
    path.write_bytes(dump_outline_yaml(outline).encode("utf-8"))
    load_outline.cache_clear()
    return path


def outline_from_data(data: Mapping[str, Any], where: str = "outline.yaml") -> Outline:
    """Rebuild an Outline from the structure of outline.yaml."""
    try:
        outline = Outline(title=Text(str(data["title"]["zh"]), str(data["title"]["en"])), source=str(data.get("source", "")))
        note = data.get("note") or {}
        outline.note = Text(str(note.get("zh", "")), str(note.get("en", "")))
        for c in data["chapters"]:
            cid = str(c["id"])
            outline.chapters[cid] = Heading(cid, "chapter", str(c["zh"]), str(c["en"]))
            for s in c["sections"]:
                sid = str(s["id"])
                outline.sections[sid] = Heading(sid, "section", str(s["zh"]), str(s["en"]), cid)
                for k in s["subsections"]:
                    kid = str(k["id"])
                    outline.subsections[kid] = Heading(kid, "subsection", str(k["zh"]), str(k["en"]), sid)
                    for g in k["groups"]:
                        gid = str(g["id"])
                        outline.groups[gid] = Heading(gid, "group", str(g["zh"]), str(g["en"]), kid)
                        for q in g["questions"]:
                            qid = str(q["id"])
                            outline.questions[qid] = OutlineQuestion(
                                id=qid, chapter=cid, section=sid, subsection=kid, group=gid,
                                text_zh=str(q["zh"]), text_en=str(q["en"]),
                            )
        for d in data.get("deep") or []:
            did = str(d["id"])
            m = DEEP_ID_RE.match(did)
            outline.deep[did] = DeepQuestion(
                id=did, source=str(d["source"]), number=int(m[2]) if m else 0,
                part_zh=str(d["part"]["zh"]), part_en=str(d["part"]["en"]),
                title_zh=str(d["title"]["zh"]), title_en=str(d["title"]["en"]),
                text_zh=str(d["zh"]), text_en=str(d["en"]),
            )
    except (KeyError, TypeError) as e:
        raise OutlineError(f"{where}: malformed outline ({type(e).__name__}: {e})") from e
    return outline


@functools.lru_cache(maxsize=4)
def load_outline(path: str | Path | None = None) -> Outline:
    """The committed outline (questionbank/outline.yaml by default), parsed once per path.

    Cached because the loader, `coverage` and the bot all ask for it; the object is shared,
    so do not mutate it. `load_outline.cache_clear()` after rewriting the file.
    """
    p = Path(path) if path is not None else OUTLINE_PATH
    try:
        # the C loader when PyYAML has it: same safe semantics, a few times faster on 180 KB
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except FileNotFoundError as e:
        raise OutlineError(f"{p}: not found; run `python -m questionbank import-outline SEED_FILE`") from e
    if not isinstance(data, dict):
        raise OutlineError(f"{p}: expected a mapping")
    return outline_from_data(data, str(p))


# --------------------------------------------------------------------------- command


def run_import_outline(argv: Sequence[str] | None = None) -> int:
    """`python -m questionbank import-outline [SEED_FILE] [--out PATH] [--en PATH] [--check]`.

    Returns the exit status: 0 written (or up to date with --check), 1 out of date with
    --check, 2 the seeds or the English do not fit (the message says which ids).
    """
    parser = argparse.ArgumentParser(
        prog="python -m questionbank import-outline",
        description="Regenerate questionbank/outline.yaml from the outline seed (004) and the "
        "deep-question seeds (000-003) in the same folder, with the English of outline_en.yaml.",
    )
    parser.add_argument("seed", nargs="?", default=str(DEFAULT_SEED_DIR),
                        help="the outline seed file 004_*.txt or the seeds folder (default: %(default)s)")
    parser.add_argument("--out", default=str(OUTLINE_PATH), help="where to write (default: %(default)s)")
    parser.add_argument("--en", default=str(EN_PATH), help="the English renderings (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when --out differs from what would be written")
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        outline = import_outline(args.seed, args.en)
    except OutlineError as e:
        print(f"import-outline: {e}", file=sys.stderr)
        return 2
    counts = outline.counts()
    summary = ", ".join(f"{v} {k}" for k, v in counts.items())
    out = Path(args.out)
    if args.check:
        fresh = dump_outline_yaml(outline).encode("utf-8")
        if not out.exists() or out.read_bytes() != fresh:
            print(f"import-outline: {out} is out of date; run `python -m questionbank import-outline`", file=sys.stderr)
            return 1
        print(f"{out}: up to date ({summary})")
        return 0
    write_outline_yaml(outline, out)
    print(f"{out}: {summary}")
    return 0


if __name__ == "__main__":  # pragma: no cover - `python -m questionbank.outline` for convenience
    raise SystemExit(run_import_outline())
