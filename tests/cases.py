"""The test submissions as the judge gets them: a case file, with the shared C++ prelude put in.

Most CPU test submissions (tests/hacks, tests/honest, tests/submissions) use one C++ extension, the
same byte for byte (name, sources, functions, flags), so torch's extension cache builds it once per
cache. Its only copy is tests/cpp_prelude.py. A case file holds what is its own (the docstring with
the task and the expected verdict, imports, ModelNew, any other code) and, where the prelude goes,
the line PRELUDE_LINE; submission() puts the prelude's text in place of that line. A file without
the line (Triton, CUDA, its own C++, or a complete file a user copies as it is) is read unchanged.

Standard library only, and nothing here imports tests/: bench/ and scripts/ read the submissions
too and take submission() from this file by path (runpy.run_path), since tests/ is no package.
Run as a script it prints the text the judge gets, e.g. to make a file to copy elsewhere:

    python tests/cases.py tests/hacks/matmul_operator.py > runs/sol/level1__2_Small_Matmul.py
"""
from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
PRELUDE = TESTS / "cpp_prelude.py"
PRELUDE_TAG = "<<cpp_prelude.py>>"
# the whole line, newline included: the prelude (which ends with its own newline) takes its place
PRELUDE_LINE = f"# {PRELUDE_TAG} the shared C++ extension (_ops): tests/cases.py puts it in place of this line\n"


def assemble(text: str) -> str:
    """A case file's text with the prelude in place of its PRELUDE_LINE; a text without one unchanged."""
    lines = text.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if PRELUDE_TAG in line]
    if not at:
        return text
    # one exact line: a tag left in a comment or an edited marker would otherwise drop the prelude silently
    if len(at) > 1 or lines[at[0]] != PRELUDE_LINE:
        raise ValueError(f"expected the line {PRELUDE_LINE!r} once, found {[lines[i] for i in at]!r}")
    lines[at[0]] = PRELUDE.read_text()
    return "".join(lines)


def submission(path_or_name: str | Path) -> str:
    """The text the judge gets for a test submission: a bare file name is one of tests/submissions, a
    relative path is taken from the checkout's root, an absolute one as it is."""
    path = Path(path_or_name)
    if not path.is_absolute():
        path = ROOT / "tests" / "submissions" / path if len(path.parts) == 1 else ROOT / path
    return assemble(path.read_text())


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} FILE... (prints each file as the judge gets it)")
    for arg in sys.argv[1:]:
        sys.stdout.write(submission(Path(arg).resolve()))
