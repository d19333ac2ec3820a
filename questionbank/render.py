"""Plain-text rendering of items and results, as a player sees them.

`python -m questionbank show` and the bot's console adapter print these; chat adapters may
reuse the pieces. Only what players may see: never the setup, the hidden cases, the probe or
the reference (the explanation is rendered separately, for when a round closes). No torch.
"""
from __future__ import annotations

from typing import Any

from .jobs import normalise_output
from .model import Item, Text

KIND_LABEL = {
    "code": {"zh": "编程题", "en": "code"},
    "output": {"zh": "输出题", "en": "output"},
    "choice": {"zh": "选择题", "en": "multiple choice"},
}

_WORDS = {
    "difficulty": {"zh": "难度", "en": "difficulty"},
    "starter": {"zh": "起始代码", "en": "Starter code"},
    "snippet": {"zh": "代码", "en": "Snippet"},
    "options": {"zh": "选项", "en": "Options"},
    "explanation": {"zh": "解析", "en": "Explanation"},
    "answer": {"zh": "答案", "en": "Answer"},
    "reference": {"zh": "参考答案", "en": "Reference solution"},
    "requires_cuda": {"zh": "需要 GPU (CUDA) 运行", "en": "runs on a GPU (CUDA)"},
    "how_code": {
        "zh": "回复一个代码块，定义 `{entry}`。",
        "en": "Reply with a code block that defines `{entry}`.",
    },
    "how_output": {
        "zh": "回复这段代码打印的内容（比较时忽略多余空白）。",
        "en": "Reply with exactly what this snippet prints (extra whitespace is ignored).",
    },
    "how_choice_one": {"zh": "回复正确选项的字母。", "en": "Reply with the letter of the correct option."},
    "how_choice_many": {
        "zh": "可能有多个正确选项：回复所有正确选项的字母，如 `A C`。",
        "en": "More than one option may be correct: reply with every correct letter, e.g. `A C`.",
    },
    "mistake": {"zh": "这像是一个常见错误", "en": "This looks like a known mistake"},
    "case_passed": {"zh": "通过", "en": "passed"},
    "case_failed": {"zh": "未通过", "en": "failed"},
    "no_module": {"zh": "判题环境只有 torch、numpy、onnx/onnxruntime 和 Python 标准库，没有安装其他包。",
                  "en": "The grader has torch, numpy, onnx/onnxruntime and the Python standard library; "
                        "no other package is installed."},
    "example": {"zh": "示例", "en": "example"},
    "hidden": {"zh": "隐藏", "en": "hidden"},
}

VERDICT_LABEL = {
    "passed": {"zh": "通过", "en": "passed"},
    "failed": {"zh": "答案错误", "en": "wrong answer"},
    "error": {"zh": "运行出错", "en": "error"},
    "timeout": {"zh": "超时", "en": "time limit exceeded"},
    "memory": {"zh": "内存超限", "en": "memory limit exceeded"},
    "output_limit": {"zh": "输出超限", "en": "output limit exceeded"},
    "invalid": {"zh": "无效提交", "en": "invalid submission"},
    "internal": {"zh": "评测机内部错误（不计分，会重试）", "en": "runner error (not counted; will retry)"},
    "unsupported": {"zh": "评测机无法运行此题（不计分，会换一台重试）",
                    "en": "this runner cannot run it (not counted; another will be tried)"},
}


def word(key: str, lang: str) -> str:
    table = _WORDS[key]
    return table.get(lang) or table["en"]


def _lang(lang: str) -> str:
    return "zh" if lang == "zh" else "en"


def _label(key: str, lang: str) -> str:
    """A heading followed by the colon of its language."""
    return word(key, lang) + ("：" if lang == "zh" else ":")


def code_block(source: str) -> str:
    """A fenced block: readable in a terminal, rendered by every chat platform."""
    return "```python\n" + source.rstrip("\n") + "\n```"


def header(item: Item, lang: str = "en") -> str:
    """`title  [code · difficulty 3/5]`, the line a question opens with."""
    lang = _lang(lang)
    bits = [KIND_LABEL[item.kind][lang], f"{word('difficulty', lang)} {item.difficulty}/5"]
    if item.requires == "cuda":
        bits.append(word("requires_cuda", lang))
    return f"{item.title.get(lang)}  [{' · '.join(bits)}]"


def how_to_answer(item: Item, lang: str = "en") -> str:
    lang = _lang(lang)
    if item.kind == "code":
        return word("how_code", lang).format(entry=item.entrypoint)
    if item.kind == "output":
        return word("how_output", lang)
    return word("how_choice_many" if len(item.correct) > 1 else "how_choice_one", lang)


def render_options(item: Item, lang: str = "en") -> str:
    return "\n".join(f"{o.key}. {o.text.get(_lang(lang))}" for o in item.options)


def render_item(item: Item, lang: str = "en") -> str:
    """The question as posted: title, prompt, then starter code / snippet / options, and how to answer."""
    lang = _lang(lang)
    parts = [header(item, lang), item.prompt.get(lang)]
    if item.kind == "code":
        parts.append(f"{_label('starter', lang)}\n{code_block(item.starter)}")
    elif item.kind == "output":
        parts.append(f"{_label('snippet', lang)}\n{code_block(item.snippet)}")
    elif item.kind == "choice":
        parts.append(f"{_label('options', lang)}\n{render_options(item, lang)}")
    parts.append(how_to_answer(item, lang))
    return "\n\n".join(p for p in parts if p)


def render_explanation(item: Item, lang: str = "en", *, expected_output: str | None = None,
                       with_reference: bool = True) -> str:
    """What a round shows when it closes: the answer (correct keys, expected output or reference) and the why."""
    lang = _lang(lang)
    parts = [item.title.get(lang)]
    if item.kind == "choice":
        gap = "" if lang == "zh" else " "
        parts.append(f"{_label('answer', lang)}{gap}{', '.join(item.correct)}")
    elif item.kind == "output" and expected_output is not None:
        parts.append(f"{_label('answer', lang)}\n```\n{expected_output.rstrip()}\n```")
    elif item.kind == "code" and with_reference:
        parts.append(f"{_label('reference', lang)}\n{code_block(item.reference)}")
    parts.append(f"{_label('explanation', lang)}\n{item.explanation.get(lang)}")
    return "\n\n".join(parts)


def render_result(result: dict[str, Any], lang: str = "en") -> str:
    """A runner result for the player: the verdict, the score, one line per case, the error.

    Case messages come from the runner, which never reveals hidden expected values.
    """
    lang = _lang(lang)
    verdict = str(result.get("verdict", "internal"))
    label = VERDICT_LABEL.get(verdict, {}).get(lang, verdict)
    lines = [label if label == verdict else f"{label} ({verdict})"]
    total = result.get("total_cases")
    if total:
        lines[0] += f": {result.get('passed_cases', 0)}/{total}"
    error = result.get("error")
    error_head = ""
    if isinstance(error, dict):
        error_head = f"{error.get('type', '')}: {error.get('message', '')}".strip(": ")
    message = str(result.get("message") or "")
    if message and verdict != "passed" and message != error_head:
        lines.append(message)
    cases = result.get("cases") or []
    # a verdict decided before any case ran (invalid, timeout, ...) needs no list of "not run"
    for case in cases if any(c.get("ran", True) for c in cases) else []:
        mark = "✓" if case.get("passed") else "✗"
        kind = word("example" if case.get("example") else "hidden", lang)
        name = case.get("name") or f"#{case.get('index', '?')}"
        status = word("case_passed" if case.get("passed") else "case_failed", lang)
        text = f"  {mark} {name} ({kind}): {status}"
        if case.get("message"):
            text += f" - {case['message']}"
        lines.append(text)
    if isinstance(error, dict):
        if error_head:
            lines.append(error_head)
        if error.get("traceback"):
            lines.append(str(error["traceback"]).rstrip())
        if error.get("type") in ("ModuleNotFoundError", "ImportError"):  # say what there is to import
            lines.append(word("no_module", lang))
    return "\n".join(lines)


def known_mistake_index(item: Item, result: dict[str, Any] | None = None, answer: str | None = None) -> int | None:
    """Which known mistake an answer behaves like, or None: for a code item the runner's
    `mistake` (an index into the item's wrong answers, checked against them); for an output
    item the first listed wrong output the answer matches. One rule for the bot and `try`."""
    if item.kind == "code" and result is not None:
        index = result.get("mistake")
        if type(index) is int and 0 <= index < len(item.wrong):
            return index
    if item.kind == "output" and answer is not None:
        said = normalise_output(answer)
        for i, wrong in enumerate(item.wrong_outputs):
            if normalise_output(wrong.output) == said:
                return i
    return None


def mistake_hint(item: Item, index: int | None) -> Text | None:
    """The player-facing hint of a known mistake (None when it has none to give)."""
    if index is None or index < 0:
        return None
    if item.kind == "code" and index < len(item.wrong):
        return item.wrong[index].hint
    if item.kind == "output" and index < len(item.wrong_outputs):
        return item.wrong_outputs[index].hint
    return None


def render_mistake(hint: Text, lang: str = "en") -> str:
    """The line a player reads under a failed answer."""
    lang = _lang(lang)
    return f"{word('mistake', lang)}{'：' if lang == 'zh' else ': '}{hint.get(lang)}"
