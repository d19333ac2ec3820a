"""Load the question bank from YAML and report every problem at once, like a compiler.

The rules live in `schema.json` (documentation and validation in one place); this module
interprets the few JSON Schema keywords that file uses, so the bot needs no jsonschema
dependency and every message can carry a `file:line` from the YAML node marks. What a schema
cannot say (unique ids across files, outline ids that exist, entrypoints defined in the Python
sources) is checked here too. No torch: the bot imports this module.
"""
from __future__ import annotations

import ast
import difflib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import yaml

from runner.protocol import DEVICES, FEATURES, parse_requires  # torch-free

from .model import Item, Option, Solution, Text, WrongAnswer, WrongOutput

PACKAGE_DIR = Path(__file__).resolve().parent
ITEMS_DIR = PACKAGE_DIR / "items"
SCHEMA_PATH = PACKAGE_DIR / "schema.json"

# Fields that hold Python source: checked with ast, their syntax errors located in the YAML.
MIN_HINTED_DIFFICULTY = 3
SOURCE_FIELDS = ("starter", "setup", "reference", "probe", "snippet")

Path_ = tuple[Any, ...]  # a path into the parsed YAML: ("items", 0, "title", "en")


class OutlineLike(Protocol):
    """What the loader needs from questionbank.outline's Outline (tests pass a stub)."""

    def exists(self, question_id: str) -> bool: ...


@dataclass(frozen=True, order=True)
class Problem:
    """One problem in a bank file; `str()` gives the compiler-style `file:line: sentence`."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"


class BankError(Exception):
    """The bank does not load; `problems` lists every problem, not just the first."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems: list[Problem] = list(problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in the question bank"
        super().__init__("\n".join([head, *map(str, self.problems)]))

    @property
    def messages(self) -> list[str]:
        return [str(p) for p in self.problems]


@dataclass
class Bank:
    """The loaded bank: items by id, in file order (files in outline order)."""

    items: dict[str, Item]
    files: tuple[Path, ...] = ()

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Item]:
        return iter(self.items.values())

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.items

    def get(self, item_id: str) -> Item:
        """The item, or a KeyError that suggests close ids (typos in moderator commands)."""
        try:
            return self.items[item_id]
        except KeyError:
            close = difflib.get_close_matches(item_id, list(self.items), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise KeyError(f"no item with id {item_id!r}{hint}") from None

    def under(self, prefix: str) -> list[Item]:
        """Items with an outline id equal to or below `prefix` ("2", "2.1", "2.1.2", "deep")."""
        prefix = prefix.rstrip(".")
        return [
            item for item in self.items.values()
            if any(o == prefix or o.startswith(prefix + ".") for o in item.outline)
        ]

    def by_chapter(self, n: int) -> list[Item]:
        """Items covering any outline question of chapter `n` (topic weeks pick from these)."""
        return self.under(str(n))

    def by_kind(self, kind: str) -> list[Item]:
        return [item for item in self.items.values() if item.kind == kind]

    def covering(self, question_id: str) -> list[Item]:
        """Items that cover one outline question."""
        return [item for item in self.items.values() if question_id in item.outline]

    def search(self, text: str) -> list[Item]:
        """Items matching every word of `text` (case-insensitive) in id, tags, outline ids, titles
        or prompts; those matching in the id or title first, then in the tags (moderators and
        autocomplete see the best 25)."""
        words = text.lower().split()
        scored = []
        for pos, item in enumerate(self.items.values()):
            head = "\n".join([item.id, item.title.zh, item.title.en]).lower()
            tags = " ".join([item.kind, *item.tags, *item.outline]).lower()
            hay = "\n".join([head, tags, item.prompt.zh, item.prompt.en]).lower()
            if all(word in hay for word in words):
                rank = sum(3 if w in head else 2 if w in tags else 1 for w in words)
                scored.append((-rank, pos, item))
        return [item for _rank, _pos, item in sorted(scored, key=lambda t: t[:2])]


# --------------------------------------------------------------------------------------------
# Reading YAML with line numbers


@dataclass
class _Parsed:
    """A YAML document as plain data, plus the line of every node (by path)."""

    data: Any
    lines: dict[Path_, int] = field(default_factory=dict)
    # the line where a scalar's text starts (the line after `|` for block scalars)
    content_lines: dict[Path_, int] = field(default_factory=dict)

    def line(self, path: Path_) -> int:
        """The line of `path`, or of its nearest ancestor that has one."""
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path, 1)


# libyaml's parser when PyYAML was built with it (the wheels are): about 10x faster than the
# pure-Python one, which was most of the time the bank took to load; the nodes and marks are the same.
_COMPOSER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _compose(loader_class: Any, text: str) -> yaml.Node | None:
    loader = loader_class(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def _parse_yaml(text: str, file: str, problems: list[Problem]) -> _Parsed | None:
    """Compose (not just load) so each node keeps its mark; a syntax error becomes a Problem
    (worded by the pure-Python parser, whose messages say what it expected)."""
    try:
        node = _compose(_COMPOSER, text)
    except yaml.YAMLError:
        node = None
    if node is None and text.strip():
        try:
            node = _compose(yaml.SafeLoader, text)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            line = mark.line + 1 if mark else 1
            what = e.problem or e.context or "invalid YAML"
            problems.append(Problem(file, line, f"YAML syntax error: {what}"))
            return None
        except yaml.YAMLError as e:
            problems.append(Problem(file, 1, f"YAML error: {e}"))
            return None
    parsed = _Parsed(data=None)
    if node is None:
        return parsed
    constructor = yaml.SafeLoader("")
    parsed.data = _to_data(node, (), parsed, constructor, file, problems, depth=0)
    return parsed


def _to_data(node: yaml.Node, path: Path_, parsed: _Parsed, constructor: yaml.SafeLoader,
             file: str, problems: list[Problem], depth: int) -> Any:
    line = node.start_mark.line + 1
    parsed.lines[path] = line
    if depth > 50:
        problems.append(Problem(file, line, "the YAML is nested too deeply"))
        return None
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            try:
                key = constructor.construct_object(key_node, deep=True)
            except yaml.YAMLError as e:
                problems.append(Problem(file, key_node.start_mark.line + 1, f"bad mapping key: {e}"))
                continue
            key = key if isinstance(key, str) else str(key)
            if key in result:
                problems.append(Problem(
                    file, key_node.start_mark.line + 1,
                    f"'{key}' appears twice in the same mapping (first at line {parsed.lines[path + (key,)]})"))
                continue
            result[key] = _to_data(value_node, path + (key,), parsed, constructor, file, problems, depth + 1)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [
            _to_data(child, path + (i,), parsed, constructor, file, problems, depth + 1)
            for i, child in enumerate(node.value)
        ]
    parsed.content_lines[path] = line + 1 if getattr(node, "style", None) in ("|", ">") else line
    try:
        return constructor.construct_object(node, deep=True)
    except yaml.YAMLError as e:
        problems.append(Problem(file, line, f"bad value: {e}"))
        return None


# --------------------------------------------------------------------------------------------
# A small interpreter of the JSON Schema keywords schema.json uses

_TYPE_WORDS = {
    "object": "a mapping", "array": "a list", "string": "a text", "integer": "a whole number",
    "number": "a number", "boolean": "true or false",
}


def _is_type(value: Any, type_name: str) -> bool:
    if type_name == "object":
        return isinstance(value, dict)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_name == "boolean":
        return isinstance(value, bool)
    return True


def _describe(value: Any) -> str:
    """How a wrong value reads in a sentence."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        short = value if len(value) <= 40 else value[:37] + "..."
        return f"the text {short!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _where(path: Path_) -> str:
    """A path relative to an item, as a reader writes it: wrong[2].code, title.en."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part + 1}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


Report = Callable[..., None]  # report(path, sentence, line=None)


class _SchemaChecker:
    """Validates plain data against schema.json, calling `report(path, sentence)` per problem."""

    def __init__(self, schema: dict[str, Any], skip: int = 0):
        self.root = schema
        self.skip = skip  # leading path parts not shown in messages (("items", 3) for an item)

    def name(self, path: Path_) -> str:
        return _where(path[self.skip:])

    def resolve(self, schema: Any) -> Any:
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            if not ref.startswith("#/"):
                raise ValueError(f"only local $ref is supported, not {ref}")
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target[part]
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **{k: v for k, v in rest.items() if k == "description"}} if rest else target
        return schema

    def matches(self, schema: Any, value: Any) -> bool:
        hits: list[str] = []
        self.check(schema, value, (), lambda p, m: hits.append(m))
        return not hits

    def check(self, schema: Any, value: Any, path: Path_, report: Report, kind_label: str = "") -> None:
        schema = self.resolve(schema)
        if schema is True or schema is None:
            return
        if schema is False:
            report(path, f"'{self.name(path)}' is not allowed here")
            return
        name = self.name(path) or "the value"
        types = schema.get("type")
        if types is not None:
            type_list = types if isinstance(types, list) else [types]
            if not any(_is_type(value, t) for t in type_list):
                want = " or ".join(_TYPE_WORDS.get(t) or str(t) for t in type_list)
                report(path, f"{name} should be {want}, but it is {_describe(value)}")
                return
        if "enum" in schema and value not in schema["enum"]:
            choices = ", ".join(map(str, schema["enum"]))
            hint = _did_you_mean(value, map(str, schema["enum"])) if isinstance(value, str) else ""
            report(path, f"{name} must be one of {choices}, but it is {_describe(value)}{hint}")
            return
        if "const" in schema and value != schema["const"]:
            report(path, f"{name} must be {schema['const']!r}")
            return
        if isinstance(value, str):
            if len(value.strip()) < schema.get("minLength", 0):
                report(path, f"{name} is empty")
            elif "pattern" in schema and not re.search(schema["pattern"], value):
                hint = schema.get("x-hint") or f"it must match {schema['pattern']}"
                report(path, f"{name} {value!r} is not valid: {hint}")
        if _is_type(value, "number"):
            self._check_range(schema, value, name, path, report)
        if isinstance(value, list):
            self._check_array(schema, value, name, path, report)
        if isinstance(value, dict):
            self._check_object(schema, value, path, report, kind_label)
        for sub in schema.get("allOf", ()):
            if "if" in sub:
                if self.matches(sub["if"], value):
                    then = sub.get("then", True)
                    label = then.get("x-kind-label", "") if isinstance(then, dict) else ""
                    self.check(then, value, path, report, label)
            else:
                self.check(sub, value, path, report, kind_label)

    def _check_range(self, schema: dict, value: float, name: str, path: Path_, report: Report) -> None:
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                report(path, f"{name} must be from {low} to {high}, but it is {value}")
            elif low is not None:
                report(path, f"{name} must be at least {low}, but it is {value}")
            else:
                report(path, f"{name} must be at most {high}, but it is {value}")
        excl = schema.get("exclusiveMinimum")
        if excl is not None and value <= excl:
            report(path, f"{name} must be greater than {excl}, but it is {value}")

    def _check_array(self, schema: dict, value: list, name: str, path: Path_, report: Report) -> None:
        least = schema.get("minItems", 0)
        if len(value) < least:
            entries = "entry" if least == 1 else "entries"
            report(path, f"{name} needs at least {least} {entries}, but it has {len(value)}")
        most = schema.get("maxItems")
        if most is not None and len(value) > most:
            entries = "entry" if most == 1 else "entries"
            report(path, f"{name} needs at most {most} {entries}, but it has {len(value)}")
        if schema.get("uniqueItems"):
            seen: list[Any] = []
            for i, element in enumerate(value):
                if element in seen:
                    report(path + (i,), f"{name} lists {element!r} more than once")
                else:
                    seen.append(element)
        if "items" in schema:
            for i, element in enumerate(value):
                self.check(schema["items"], element, path + (i,), report)

    def _check_object(self, schema: dict, value: dict, path: Path_, report: Report, kind_label: str) -> None:
        properties: dict[str, Any] = schema.get("properties", {})
        # a field a matching if/then rule forbids gets that one message, not its value's problems too
        forbidden = set()
        for sub in schema.get("allOf", ()):
            then = sub.get("then")
            if "if" in sub and isinstance(then, dict) and self.matches(sub["if"], value):
                forbidden |= {k for k, v in then.get("properties", {}).items() if v is False}
        for key in schema.get("required", ()):
            if key not in value or value[key] is None:
                if kind_label:
                    report(path, f"'{key}' is required for {kind_label} items")
                elif self.name(path):
                    report(path, f"{self.name(path)} is missing '{key}'")
                else:
                    report(path, f"missing required field '{key}'")
        for key, element in value.items():
            if key in forbidden and properties.get(key) is not False:
                continue
            if key in properties:
                sub = properties[key]
                if sub is False:
                    where = self.name(path + (key,))
                    label = f"{kind_label} items" if kind_label else "here"
                    report(path + (key,), f"'{where}' does not belong on {label}; remove it")
                elif element is not None or key not in schema.get("required", ()):
                    self.check(sub, element, path + (key,), report)
            elif schema.get("additionalProperties", True) is False:
                where = f" in {self.name(path)}" if self.name(path) else ""
                report(path + (key,), f"unknown field '{key}'{where}{_did_you_mean(key, properties)}")
            elif isinstance(schema.get("additionalProperties"), dict):
                self.check(schema["additionalProperties"], element, path + (key,), report)


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """schema.json, parsed once."""
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return json.load(f)


# --------------------------------------------------------------------------------------------
# Python source checks (ast only: nothing is executed here)


def defined_names(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level names a module defines (def, class, assignment, import), mapped to their node."""
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
    return names


def signature_of(source: str, name: str) -> ast.arguments | None:
    """The parameters of top-level function `name` in `source`, or None (not a def, or no parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    node = defined_names(tree).get(name)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.args
    return None


# --------------------------------------------------------------------------------------------
# Loading files


def _display(path: Path) -> str:
    """Paths relative to the working directory read best in a report."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return os.path.abspath(path) if rel.startswith("..") else rel


def _natural_key(path: Path) -> list[Any]:
    """2.1.10.yaml sorts after 2.1.9.yaml."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def bank_files(paths: Iterable[str | os.PathLike[str]] | None = None) -> list[Path]:
    """YAML files named by `paths` (directories expand to their *.yaml), default the bank's items/."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for p in ([ITEMS_DIR] if paths is None else paths):
        path = Path(p)
        if path.is_dir():
            files.extend(sorted((*path.glob("*.yaml"), *path.glob("*.yml")), key=_natural_key))
        else:
            files.append(path)
    return files


def default_outline() -> OutlineLike:
    """The real outline (questionbank/outline.yaml) via the outline module."""
    from .outline import load_outline  # local: tests and tools may pass their own outline

    return load_outline()


_SUBSECTION_FILE = re.compile(r"^\d+\.\d+\.\d+$")


class _FileLoader:
    """Validates one parsed file and builds its items; problems go to a shared list."""

    def __init__(self, file: str, parsed: _Parsed, outline: OutlineLike | None, problems: list[Problem]):
        self.file = file
        self.parsed = parsed
        self.outline = outline
        self.problems = problems
        self.checker = _SchemaChecker(load_schema(), skip=2)

    def problem(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.file, line, message))

    def load(self) -> list[tuple[str | None, int, Item | None, bool]]:
        """Per item: its id, line, the Item (None when the schema failed) and whether it was clean."""
        data = self.parsed.data
        if data is None:
            self.problem(1, "the file is empty; it needs a top-level 'items:' list")
            return []
        if not isinstance(data, dict):
            self.problem(self.parsed.line(()), f"the file should be a mapping with an 'items:' list, but it is {_describe(data)}")
            return []
        root = load_schema()
        # the file level first (without descending into items: they get item-level messages)
        for key in data:
            if key not in root["properties"]:
                self.problem(self.parsed.line((key,)), f"unknown top-level field '{key}'{_did_you_mean(key, root['properties'])}")
        items = data.get("items")
        if items is None:
            self.problem(self.parsed.line(()), "missing the top-level 'items:' list")
            return []
        if not isinstance(items, list):
            self.problem(self.parsed.line(("items",)), f"'items' should be a list, but it is {_describe(items)}")
            return []
        out = []
        for index, raw in enumerate(items):
            before = len(self.problems)
            item = self.load_item(index, raw)
            ident = raw.get("id") if isinstance(raw, dict) else None
            ident = ident if isinstance(ident, str) and ident else None
            out.append((ident, self.parsed.line(("items", index)), item, len(self.problems) == before))
        return out

    def load_item(self, index: int, raw: Any) -> Item | None:
        base: Path_ = ("items", index)
        ident = raw.get("id") if isinstance(raw, dict) else None
        label = f"item '{ident}'" if isinstance(ident, str) and ident else f"item {index + 1}"

        def report(path: Path_, message: str, line: int | None = None) -> None:
            self.problem(line or self.parsed.line(path), f"{label}: {message}")

        if not isinstance(raw, dict):
            report(base, f"an item should be a mapping of fields, but it is {_describe(raw)}")
            return None
        before = len(self.problems)
        schema = load_schema()["$defs"]["item"]
        self.checker.check(schema, raw, base, report)
        schema_ok = len(self.problems) == before
        self.check_sources(raw, base, report)
        self.check_outline(raw, base, report)
        if isinstance(raw.get("requires"), (str, list)):
            try:
                parse_requires(raw["requires"])
            except ValueError as e:
                names = raw["requires"] if isinstance(raw["requires"], list) else [raw["requires"]]
                unknown = [n for n in names if isinstance(n, str) and n not in DEVICES + FEATURES]
                hint = _did_you_mean(unknown[0], DEVICES + FEATURES) if unknown else ""
                message = str(e)
                if hint and message.endswith(")"):  # "(known: ...)" + "; did you mean 'cpu'?"
                    message = message[:-1] + "; " + hint.strip(" ()") + ")"
                report(base + ("requires",), message)
                schema_ok = False
        self.check_choice(raw, base, report)
        self.check_teaching(raw, base, report)
        if not schema_ok:
            return None
        return self.build(raw, base)

    # -- checks a schema cannot express --------------------------------------------------

    def parse_source(self, source: Any, path: Path_, report: Report) -> ast.Module | None:
        if not isinstance(source, str) or not source.strip():
            return None
        try:
            return ast.parse(source)
        except SyntaxError as e:
            # the error's own line inside the block, so the author lands on it
            start = self.parsed.content_lines.get(path, self.parsed.line(path))
            report(path, f"{_where(path[2:])} has a Python syntax error: {e.msg}", start + (e.lineno or 1) - 1)
            return None

    def check_sources(self, raw: dict, base: Path_, report: Report) -> None:
        trees = {name: self.parse_source(raw.get(name), base + (name,), report) for name in SOURCE_FIELDS}
        answer_trees: dict[str, list[tuple[int, ast.Module | None]]] = {"wrong": [], "solutions": []}
        for group, trees_of_group in answer_trees.items():
            entries = raw.get(group)
            if isinstance(entries, list):
                for i, entry in enumerate(entries):
                    if isinstance(entry, dict):
                        trees_of_group.append((i, self.parse_source(entry.get("code"), base + (group, i, "code"), report)))
        if raw.get("kind") != "code":
            return
        entry = raw.get("entrypoint")
        if isinstance(entry, str) and entry:
            for name in ("reference", "starter"):
                tree = trees[name]
                if tree is not None and entry not in defined_names(tree):
                    report(base + (name,), f"{name} does not define the entrypoint '{entry}'")
            for i, tree in answer_trees["wrong"]:
                if tree is not None and entry not in defined_names(tree):
                    report(base + ("wrong", i), f"wrong answer {i + 1} does not define '{entry}', so it would fail for the wrong reason")
            reference_shape = ast.dump(trees["reference"]) if trees["reference"] is not None else None
            for i, tree in answer_trees["solutions"]:
                if tree is None:
                    continue
                if entry not in defined_names(tree):
                    report(base + ("solutions", i), f"solution {i + 1} does not define the entrypoint '{entry}'")
                elif ast.dump(tree) == reference_shape:
                    report(base + ("solutions", i), f"solution {i + 1} is the reference again; write it in a different idiom")
            if trees["reference"] is not None and trees["starter"] is not None:
                ref = signature_of(raw["reference"], entry)
                start = signature_of(raw["starter"], entry)
                if ref is not None and start is not None and ast.unparse(ref) != ast.unparse(start):
                    report(base + ("starter",), f"the starter's signature ({ast.unparse(start)}) differs from the reference's ({ast.unparse(ref)})")
        if trees["setup"] is not None:
            node = defined_names(trees["setup"]).get("make_cases")
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                report(base + ("setup",), "setup does not define a function make_cases()")
        if trees["probe"] is not None:
            node = defined_names(trees["probe"]).get("probe")
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                report(base + ("probe",), "probe does not define a function probe(result, args, kwargs, call)")

    def check_outline(self, raw: dict, base: Path_, report: Report) -> None:
        ids = raw.get("outline")
        if not isinstance(ids, list):
            return
        stem = Path(self.file).stem
        if self.outline is not None:
            for i, qid in enumerate(ids):
                if isinstance(qid, str) and qid and not self.outline.exists(qid):
                    report(base + ("outline", i), f"outline id '{qid}' does not exist in the outline")
        if _SUBSECTION_FILE.match(stem) and ids and all(isinstance(q, str) for q in ids):
            if not any(q.startswith(stem + ".") for q in ids):
                report(base + ("outline",), f"none of its outline ids is in subsection {stem}, the subsection this file is for")

    def check_teaching(self, raw: dict, base: Path_, report: Report) -> None:
        """What the learning loop needs: hints on items of difficulty 3 or more (players stuck on
        hard ones get a way forward), a player-facing hint on every known mistake (a player whose
        answer behaves like it is told what it is)."""
        difficulty = raw.get("difficulty")
        if type(difficulty) is int and MIN_HINTED_DIFFICULTY <= difficulty <= 5 and "hints" not in raw:
            report(base + ("difficulty",), f"items of difficulty {MIN_HINTED_DIFFICULTY} or more need `hints` "
                                           "(one or two, zh and en) for /quiz hint")
        wrong = raw.get("wrong")
        if raw.get("kind") == "code" and isinstance(wrong, list):
            for i, entry in enumerate(wrong):
                if isinstance(entry, dict) and "hint" not in entry:
                    report(base + ("wrong", i), f"wrong answer {i + 1} needs a `hint` (zh and en): what a player "
                                                "whose answer behaves like it is told")

    def check_choice(self, raw: dict, base: Path_, report: Report) -> None:
        options, correct = raw.get("options"), raw.get("correct")
        if raw.get("kind") != "choice" or not isinstance(options, list):
            return
        keys: list[str] = []
        for i, option in enumerate(options):
            key = option.get("key") if isinstance(option, dict) else None
            if isinstance(key, str):
                if key in keys:
                    report(base + ("options", i), f"option key '{key}' is used twice")
                keys.append(key)
        if isinstance(correct, list):
            for i, key in enumerate(correct):
                if isinstance(key, str) and key not in keys:
                    report(base + ("correct", i), f"correct key '{key}' is not among the options ({', '.join(keys)})")
            if len(set(keys)) > 1 and set(correct) >= set(keys):
                report(base + ("correct",), "every option is marked correct, so there is nothing to choose")

    # -- building the Item -----------------------------------------------------------------

    def build(self, raw: dict, base: Path_) -> Item:
        device, features = parse_requires(raw["requires"])  # validated in load_item

        def text(value: dict) -> Text:
            return Text(zh=value["zh"].strip(), en=value["en"].strip())

        lines = {key: self.parsed.line(base + (key,)) for key in raw}
        return Item(
            id=raw["id"],
            kind=raw["kind"],
            outline=tuple(raw["outline"]),
            difficulty=raw["difficulty"],
            tags=tuple(raw["tags"]),
            requires=device,
            features=features,
            ranks=int(raw.get("ranks", 1)),
            title=text(raw["title"]),
            prompt=text(raw["prompt"]),
            explanation=text(raw["explanation"]),
            limits=dict(raw.get("limits") or {}),
            entrypoint=raw.get("entrypoint", ""),
            starter=raw.get("starter", ""),
            setup=raw.get("setup", ""),
            reference=raw.get("reference", ""),
            probe=raw.get("probe", ""),
            tolerances={k: float(v) for k, v in (raw.get("tolerances") or {}).items()},
            wrong=tuple(
                WrongAnswer(code=w["code"], why=w["why"].strip(), hint=text(w["hint"]) if "hint" in w else None,
                            line=self.parsed.line(base + ("wrong", i)))
                for i, w in enumerate(raw.get("wrong") or ())
            ),
            solutions=tuple(
                Solution(code=a["code"], idea=a["idea"].strip(), line=self.parsed.line(base + ("solutions", i)))
                for i, a in enumerate(raw.get("solutions") or ())
            ),
            hints=tuple(text(h) for h in raw.get("hints") or ()),
            mode=raw.get("mode", "partial"),
            snippet=raw.get("snippet", ""),
            wrong_outputs=tuple(WrongOutput(output=w["output"], hint=text(w["hint"]))
                                for w in raw.get("wrong_outputs") or ()),
            options=tuple(Option(key=o["key"], text=text(o)) for o in raw.get("options") or ()),
            correct=tuple(raw.get("correct") or ()),
            source_file=self.file,
            source_line=self.parsed.line(base),
            lines=lines,
        )


def load_items(paths: Iterable[str | os.PathLike[str]] | None = None,
               outline: OutlineLike | None = None) -> tuple[list[Item], list[Problem]]:
    """Items that loaded cleanly, and every problem found in `paths` (files or directories).

    `outline` defaults to the real one; a problem is reported when it cannot be loaded, since
    then no outline id can be checked.
    """
    problems: list[Problem] = []
    files = bank_files(paths)
    if outline is None:
        try:
            outline = default_outline()
        except Exception as e:  # noqa: BLE001 - any failure is a problem to report, not a crash
            problems.append(Problem(_display(PACKAGE_DIR / "outline.yaml"), 0,
                                    f"cannot load the outline, so outline ids were not checked: {e}"))
    items: list[Item] = []
    first_seen: dict[str, str] = {}  # id -> file:line where it was first defined
    for path in files:
        file = _display(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            problems.append(Problem(file, 0, f"cannot read the file: {e}"))
            continue
        parsed = _parse_yaml(text, file, problems)
        if parsed is None:
            continue
        loader = _FileLoader(file, parsed, outline, problems)
        for ident, line, item, clean in loader.load():
            if ident is not None:
                earlier = first_seen.get(ident)
                if earlier is not None:
                    problems.append(Problem(file, line, f"item '{ident}': duplicate id; it is already used at {earlier}"))
                    continue
                first_seen[ident] = f"{file}:{line}"
            if item is not None and clean:
                items.append(item)
    problems.sort(key=lambda p: (_bank_order(p.file, files), p.line))
    return items, problems


def _bank_order(file: str, files: Sequence[Path]) -> int:
    """Problems are reported file by file, in the order the files were read."""
    for i, path in enumerate(files):
        if _display(path) == file:
            return i
    return -1


def load_bank(root: str | os.PathLike[str] | None = None, outline: OutlineLike | None = None) -> Bank:
    """The whole bank (default questionbank/items/); raises BankError listing every problem."""
    files = bank_files(None if root is None else [root])
    items, problems = load_items(files, outline)
    if problems:
        raise BankError(problems)
    return Bank(items={item.id: item for item in items}, files=tuple(files))
