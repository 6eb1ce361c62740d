"""The test submissions' shared C++ prelude (tests/cpp_prelude.py, put in by tests/cases.py): every
file that uses the shared extension gets the prelude byte for byte, so torch builds it once per cache,
and every file reads as a whole module with its own docstring. No builds here."""
import ast
import subprocess
import sys

import pytest

from cases import PRELUDE, PRELUDE_LINE, ROOT, assemble, submission

FILES = sorted(p for d in ("submissions", "hacks", "honest", "faults_cuda") for p in (ROOT / "tests" / d).glob("*.py"))
SHARED_NAME = 'name="kernel_env_test_ops"'


def test_every_file_of_the_shared_extension_has_the_prelude_once():
    prelude = PRELUDE.read_text()
    assert prelude.count(SHARED_NAME) == 1
    users = []
    for p in FILES:
        raw, text = p.read_text(), submission(p)
        tree = ast.parse(text)
        assert ast.get_docstring(tree) == ast.get_docstring(ast.parse(raw)), p.name  # the file's own, first
        if SHARED_NAME in text:
            users.append(p.name)
            # no second copy and no edited one under the same name (that would be a build of its own)
            assert text.count(prelude) == 1 and text.count(SHARED_NAME) == 1, p.name
            assert PRELUDE_LINE in raw and prelude not in raw, p.name  # the prelude's one copy is its own
        else:
            assert text == raw, p.name
    assert {"relu_ok.py", "relu_wrong.py", "tanh_ok.py"} <= set(users) and len(users) >= 56


def test_the_prelude_line_is_replaced_exactly_once():
    prelude = PRELUDE.read_text()
    body = f'"""Doc."""\nimport torch\n{PRELUDE_LINE}\n\nclass ModelNew:\n    pass\n'
    assert assemble(body) == f'"""Doc."""\nimport torch\n{prelude}\n\nclass ModelNew:\n    pass\n'
    assert assemble("x = 1\n") == "x = 1\n"
    for bad in (body + PRELUDE_LINE,                              # twice
                body.replace(PRELUDE_LINE, "    " + PRELUDE_LINE),  # indented
                body.replace(" the shared", " a shared")):          # an edited marker
        with pytest.raises(ValueError):
            assemble(bad)


def test_as_a_script_it_prints_the_text_the_judge_gets():
    path = ROOT / "tests" / "hacks" / "matmul_operator.py"
    assert PRELUDE_LINE in path.read_text()
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "cases.py"), str(path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == submission(path) == submission("tests/hacks/matmul_operator.py")
    assert submission("relu_ok.py") == assemble((ROOT / "tests" / "submissions" / "relu_ok.py").read_text())
