"""TRUSTED: the first stage, in the judge's own process (no process started): is the submission
Python source defining ModelNew (format), and free of the patterns the static checks refuse (checks.py)?"""
from __future__ import annotations

import ast
import gc
import threading

from ..compute_policy import STRICT
from . import feedback as fb
from .checks import check_source
from .config import JudgeConfig
from .verdict import ErrorKind, Stage, Verdict


def screen(task_id: str, code, cfg: JudgeConfig, policy: str = STRICT) -> Verdict | None:
    """The verdict when the submission fails format or static checks under `policy`, else None."""
    return screen_parsed(task_id, code, cfg, policy)[0]


def screen_parsed(task_id: str, code, cfg: JudgeConfig, policy: str = STRICT) -> tuple[Verdict | None, ast.Module | None]:
    """screen's verdict, and the parsed source when it passed (the build key reads the same tree:
    a source is parsed once)."""
    limit = cfg.feedback_max_chars

    def fail(stage, kind, msg):
        return Verdict(task_id, stage.value, error_kind=kind.value, feedback=fb.clip(msg, limit), policy=policy), None

    if code is None or (isinstance(code, (str, bytes)) and not code.strip()):
        return fail(Stage.FORMAT, ErrorKind.EMPTY_CODE, "No code was submitted: answer with one ```python block "
                    "that defines class ModelNew.")
    if not isinstance(code, (str, bytes)):
        return fail(Stage.FORMAT, ErrorKind.EMPTY_CODE, "The submission must be Python source text.")
    raw = code.encode("utf-8", "surrogatepass") if isinstance(code, str) else code
    if len(raw) > cfg.max_code_bytes:
        return fail(Stage.FORMAT, ErrorKind.CODE_TOO_LARGE,
                    f"The submission is {len(raw)} bytes; the limit is {cfg.max_code_bytes}.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return fail(Stage.FORMAT, ErrorKind.NOT_UTF8, "The submission is not valid UTF-8 text.")
    if "\x00" in text:
        return fail(Stage.FORMAT, ErrorKind.NOT_UTF8, "The submission contains NUL characters.")
    try:
        tree = parse_source(text)
    except SyntaxError as e:
        line = (e.text or "").rstrip()
        return fail(Stage.FORMAT, ErrorKind.SYNTAX_ERROR, f"Syntax error at line {e.lineno}: {e.msg}\n    {line}")
    except (RecursionError, MemoryError):
        # CPython's parser gives up on deep nesting (`- - - ... 1`, `1+1+...+1`) with these, not SyntaxError
        return fail(Stage.FORMAT, ErrorKind.SYNTAX_ERROR, "The submission nests expressions too deeply to parse.")
    if not any((isinstance(n, ast.ClassDef) and n.name == "ModelNew") or
               (isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "ModelNew" for t in n.targets))
               for n in tree.body):
        return fail(Stage.FORMAT, ErrorKind.NO_MODEL_NEW, "No `class ModelNew(nn.Module)` at module level: define "
                    "it with the same constructor arguments as Model.")
    bad = check_source(text, tree, policy)
    if bad:
        where = f" (line {bad.line})" if bad.line else ""
        return fail(Stage.STATIC, bad.kind, f"Rejected before running{where}: {bad.message}.")
    return None, tree


_PARSE_LOCK = threading.Lock()


def parse_source(text: str) -> ast.Module:
    """ast.parse with the garbage collector paused. CPython 3.11 keeps the AST builder's depth count per
    interpreter, not per call: a finalizer run by a collection in the middle of a parse that itself
    parses (traceback.py does, to underline a frame of a logged exception, as an asyncio task's
    "exception was never retrieved" does) leaves the count off, and the outer parse raises
    SystemError. Without collections no Python code runs inside the parse, so no thread switches
    into one either. The lock keeps two threads from re-enabling the collector under each other."""
    with _PARSE_LOCK:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return ast.parse(text)
        finally:
            if was_enabled:
                gc.enable()
