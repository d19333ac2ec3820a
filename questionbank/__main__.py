"""`python -m questionbank ...`: the bank's command line for authors, moderators and CI.

import-outline SEED_FILE        regenerate outline.yaml (questionbank.outline)
check [PATHS] [--chapter N]     the content gate (questionbank.check)
coverage                        outline questions with a playable item, per chapter
list / show / job / try         browse, preview, inspect the runner job, grade a file
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import check as check_mod
from .jobs import answer_text, code_job, normalise_output, output_job
from .loader import Bank, BankError, load_bank
from .model import Item
from .render import known_mistake_index, mistake_hint, render_item, render_mistake, render_result


def _bank() -> Bank:
    return load_bank()


def cmd_coverage(args: argparse.Namespace) -> int:
    """Per chapter: how many outline questions have at least one item, and with which kinds."""
    from .outline import load_outline

    outline = load_outline()
    bank = _bank()
    covered: dict[str, set[str]] = {}  # outline question id -> kinds covering it
    for item in bank:
        for qid in item.outline:
            covered.setdefault(qid, set()).add(item.kind)
    total_covered = 0
    for chapter_id, heading in outline.chapters.items():
        questions = [q for q in outline.questions.values() if q.chapter == chapter_id]
        hits = [q for q in questions if q.id in covered]
        total_covered += len(hits)
        kinds: dict[str, int] = {}
        for q in hits:
            for kind in covered[q.id]:
                kinds[kind] = kinds.get(kind, 0) + 1
        kind_text = ", ".join(f"{k} {kinds[k]}" for k in ("code", "output", "choice") if k in kinds)
        title = f"{heading.zh} / {heading.en}" if heading.en else heading.zh
        by_kind = f"; by kind: {kind_text}" if kind_text else ""
        print(f"chapter {chapter_id:>2} {title}: {len(hits)}/{len(questions)} covered{by_kind}")
    deep_hits = [d for d in outline.deep if d in covered]
    if outline.deep:
        print(f"deep questions: {len(deep_hits)}/{len(outline.deep)}")
    print(f"coverage: {total_covered}/{len(outline.questions)}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    bank = _bank()
    items = list(bank)
    if args.kind:
        items = [i for i in items if i.kind == args.kind]
    if args.chapter is not None:
        items = check_mod.select_items(items, args.chapter)
    if args.search:
        wanted = {i.id for i in bank.search(args.search)}
        items = [i for i in items if i.id in wanted]
    for item in items:
        if args.ids:
            print(item.id)
        else:
            title = item.title.get(args.lang)
            print(f"{item.id:<36} {item.kind:<6} d{item.difficulty} {item.requires:<4} "
                  f"{','.join(item.outline):<24} {title}")
    return 0


def _item(bank: Bank, item_id: str) -> Item | None:
    try:
        return bank.get(item_id)
    except KeyError as e:
        print(f"questionbank: {e.args[0]}", file=sys.stderr)
        return None


def cmd_show(args: argparse.Namespace) -> int:
    item = _item(_bank(), args.id)
    if item is None:
        return 2
    print(render_item(item, args.lang))
    if args.hints:
        for i, hint in enumerate(item.hints, start=1):
            print(f"\nHint {i} of {len(item.hints)} (/quiz hint reveal): {hint.get(args.lang)}")
        if not item.hints:
            print("\n(no hints)")
    return 0


def cmd_job(args: argparse.Namespace) -> int:
    item = _item(_bank(), args.id)
    if item is None:
        return 2
    if item.kind == "code":
        try:
            submission = (answer_text(Path(args.submission).read_text(encoding="utf-8"), "code")
                          if args.submission else None)
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            print(f"questionbank: cannot read the submission {args.submission}: {reason}", file=sys.stderr)
            return 2
        job = code_job(item, submission)
    elif item.kind == "output":
        if args.submission:
            print("questionbank: output items take no submission; the job runs the snippet", file=sys.stderr)
        job = output_job(item)
    else:
        print(f"questionbank: {item.id} is a choice item; the runner never sees it", file=sys.stderr)
        return 2
    print(json.dumps(job, indent=2, ensure_ascii=False))
    return 0


async def _grade(job: dict[str, Any], runner_url: str | None) -> dict[str, Any]:
    if runner_url:
        from runner.client import RunnerClient

        client = RunnerClient(runner_url, os.environ.get("RUNNER_TOKEN", ""))
        try:
            return await client.grade(job)
        finally:
            close = getattr(client, "close", None)
            if close is not None:
                await close()
    from runner.embedded import EmbeddedRunner

    async with EmbeddedRunner() as client:
        return await client.grade(job)


def parse_choice(text: str, keys: Sequence[str] = ()) -> set[str]:
    """`A`, `a, c`, `AC`, `My answer: B` -> the option keys chosen (words that are not keys,
    like "My" or "answer", are skipped)."""
    options = {k.upper() for k in keys} or set("ABCDEFGHIJ")
    chosen: set[str] = set()
    for token in re.split(r"[^A-Za-z]+", text):
        if token and len(token) <= len(options) and all(c in options for c in token.upper()):
            if len(token) == 1 or token.isupper():
                chosen.update(token.upper())
    return chosen


def cmd_try(args: argparse.Namespace) -> int:
    item = _item(_bank(), args.id)
    if item is None:
        return 2
    try:
        answer = answer_text(Path(args.file).read_text(encoding="utf-8"), item.kind)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"questionbank: cannot read the answer file {args.file}: {reason}", file=sys.stderr)
        return 2
    if item.kind == "choice":
        chosen = parse_choice(answer, [o.key for o in item.options])
        ok = chosen == set(item.correct)
        print(f"{'passed' if ok else 'failed'}: chose {', '.join(sorted(chosen)) or 'nothing'}")
        return 0 if ok else 1
    if item.kind == "code":
        result = asyncio.run(_grade(code_job(item, answer, job_id=f"try:{item.id}"), args.runner))
        print(render_result(result, args.lang))
        hint = mistake_hint(item, known_mistake_index(item, result))
        if hint is not None:
            print(render_mistake(hint, args.lang))
        return 0 if result.get("verdict") == "passed" else 1
    result = asyncio.run(_grade(output_job(item, job_id=f"try:{item.id}"), args.runner))
    if result.get("verdict") != "passed":
        print(render_result(result, args.lang))
        return 1
    ok = normalise_output(answer) == normalise_output(str(result.get("stdout") or ""))
    print("passed" if ok else "failed: the output differs")
    hint = None if ok else mistake_hint(item, known_mistake_index(item, answer=answer))
    if hint is not None:
        print(render_mistake(hint, args.lang))
    if not ok:
        print("expected:\n" + str(result.get("stdout") or "").rstrip())
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m questionbank", description="The PyTorch quiz question bank.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("import-outline", help="regenerate outline.yaml from SEED_FILE (see import-outline --help)",
                   add_help=False)

    p = sub.add_parser("check", help="validate items and grade references, wrong and dumb answers through the runner")
    check_mod.add_arguments(p)
    p.set_defaults(func=check_mod.main)

    p = sub.add_parser("coverage", help="outline questions covered by at least one item, per chapter")
    p.set_defaults(func=cmd_coverage)

    p = sub.add_parser("list", help="list items")
    p.add_argument("--kind", choices=("code", "output", "choice"))
    p.add_argument("--chapter", type=int)
    p.add_argument("--search", help="only items matching these words")
    p.add_argument("--ids", action="store_true", help="print only the ids")
    p.add_argument("--lang", choices=("zh", "en"), default="en")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="render an item as a player sees it")
    p.add_argument("id")
    p.add_argument("--lang", choices=("zh", "en"), default="en")
    p.add_argument("--hints", action="store_true", help="also print the hints a player may reveal, at a cost")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("job", help="print the runner job JSON of an item")
    p.add_argument("id")
    p.add_argument("--submission", metavar="FILE", help="the submitted code (default: the reference)")
    p.set_defaults(func=cmd_job)

    p = sub.add_parser("try", help="grade FILE against an item through the runner; exit 0 only if it passed")
    p.add_argument("id")
    p.add_argument("file")
    p.add_argument("--runner", metavar="URL", help="runner URL (token from RUNNER_TOKEN); default: embedded")
    p.add_argument("--lang", choices=("zh", "en"), default="en")
    p.set_defaults(func=cmd_try)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "import-outline":
        # its own parser (questionbank.outline) owns the options
        from .outline import run_import_outline

        return run_import_outline(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BankError as e:
        print(e, file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head`: the reader left, nothing is wrong
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
