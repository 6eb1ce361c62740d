"""TRUSTED: does importing a submission run any code of its own? Read from the source alone.

The build stage imports a submission in a process without a GPU (builds.py) so that what its import
does (compiles, loops, crashes, C++ static initializers) happens outside the device slot. A source
whose module level only imports torch, Triton and a few standard modules, binds names to literals and
defines functions and classes (a Triton kernel, typically) does nothing there: its functions' bodies
run at the first forward, inside the slot, whichever process imported it first. Such a source skips
the build stage, and with it a process with torch imported (~2 CPU-s of a busy box) and the wait for a
CPU build slot behind other submissions' compiles.

A source whose import also makes load_inline calls, with literal arguments only (strings, numbers,
lists, and names bound once to such values before the call), runs none of its own Python there either:
what those calls build is known from the source (`load_inline_calls`). The judge compiles them itself
(builds.py) and the run process, in the device slot, loads the builds; no build process imports it.
The modules those builds make are the submission's native code (their static initializers), which
then first runs in the run process, under the import's deadline.

Inert, at module level and in class bodies: docstrings, `pass`; imports of the modules in
INERT_MODULES; `name = value` and `name: T = value`; function definitions and classes without a
metaclass or decorators. Values, defaults, annotations, bases and decorator arguments are literals,
names, attributes of imported modules, displays and arithmetic of those, lambdas, and calls of
INERT_CALLS only; decorators are those of INERT_DECORATORS. Anything else (any other call, a loop, a
comprehension, an `if`, `with`, `try`, attribute access on the module's own objects, which could run a
descriptor) is not inert, and the build stage imports the source as before.
"""
from __future__ import annotations

import ast

# modules whose import is the run process's own (already imported) or trivial
INERT_MODULES = ("torch", "torch.nn", "torch.nn.functional", "triton", "triton.language", "math", "typing",
                 "__future__")
# decorators that only wrap or record the function (Triton's JIT parses its source; nothing runs)
INERT_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit",
                              "torch.no_grad", "torch.inference_mode", "staticmethod", "classmethod", "property"})
# calls that only make a value: Triton's configurations and constants, the decorators' factories, a
# device's or a dtype's description, Triton's integer helpers (their arguments are checked too)
INERT_CALLS = INERT_DECORATORS | {"triton.Config", "triton.language.constexpr", "torch.device", "torch.finfo",
                                  "torch.iinfo", "triton.cdiv", "triton.next_power_of_2"}
# builtins that run nothing of the submission's when used as a decorator, base or generic
_BUILTINS = frozenset({"staticmethod", "classmethod", "property", "object", "list", "tuple", "dict", "set", "type",
                       "frozenset", "int", "float", "bool", "str"})


# where load_inline comes from, and what its call is called through an import of it
BUILD_MODULE = "torch.utils.cpp_extension"
LOAD_INLINE = BUILD_MODULE + ".load_inline"
# characters the literal values read from one source may add up to (a name used twice counts twice):
# `B = A + A`, `C = B + B`, ... doubles a string each line, and a list of one name repeated makes a
# call's arguments as long again; the judge reads them in its own process. Sources are at most 256 KB
LITERAL_CHARS = 4 << 20


def is_inert(tree: ast.Module) -> bool:
    """True when importing the module runs none of the submission's own code (module docstring)."""
    return _walk(tree, None)


def load_inline_calls(tree: ast.Module) -> list[tuple[list, dict]] | None:
    """The load_inline calls importing the module makes, in order, as (positional, keyword) arguments,
    when they and the inert statements above are all it runs at import; [] when it makes none (inert),
    None when it runs anything else or an argument is not a literal."""
    calls: list = []
    return calls if _walk(tree, calls) else None


def _walk(tree: ast.Module, calls: list | None) -> bool:
    scope = _Scope(_bound_names(tree.body), calls)
    try:
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                scope.imports(stmt)
            elif calls is not None and _build_call(stmt, scope):
                pass
            else:
                _statement(stmt, scope)
                if calls is not None:
                    scope.remember(stmt)
    except (_NotInert, RecursionError):
        return False
    return True


class _NotInert(Exception):
    pass


def _bound_names(body: list) -> set:
    """Names the module or its class bodies bind themselves (a decorator or a module path spelled with
    one of them would be the submission's own object)."""
    out = set()
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            out.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out.add(stmt.target.id)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            out.add(stmt.name)
            out |= _bound_names(stmt.body)
    return out


class _Scope:
    """What the module's names stand for: imported modules and objects (name -> dotted path), and the
    names it binds itself; with `calls` (a list: load_inline calls are looked for), the load_inline
    calls found and the literal values of names the module binds once."""

    def __init__(self, own: set, calls: list | None = None):
        self.aliases: dict[str, str] = {}
        self.own = own
        self.calls = calls
        self.literals: dict = {}
        self.bound: set = set()  # module-level names bound so far (a second binding drops its literal)
        self.chars = 0  # of the literal values read so far

    def charge(self, value):
        """Count what a literal value adds (its characters, a list's items' in all); _NotInert past
        LITERAL_CHARS."""
        self.chars += sum(len(x) if type(x) is str else 8 for x in (value if type(value) is list else [value]))
        if self.chars > LITERAL_CHARS:
            raise _NotInert
        return value

    def remember(self, stmt: ast.stmt) -> None:
        """After an inert module-level statement: a name bound to a literal value, once, stands for it."""
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            targets, value = [], None
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.rebind(stmt.name)
        for t in targets:
            if isinstance(t, ast.Name):
                first = t.id not in self.bound
                self.rebind(t.id)
                if first and len(targets) == 1:
                    try:
                        self.literals[t.id] = _literal(value, self)
                    except _NotInert:
                        pass

    def rebind(self, name: str) -> None:
        self.literals.pop(name, None)
        self.bound.add(name)

    def imports(self, stmt) -> None:
        """Record what an import binds; _NotInert for a module not in INERT_MODULES."""
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if not (_module_ok(a.name) or self._builds(a.name)):
                    raise _NotInert
                head = a.asname or a.name.split(".")[0]
                self.aliases[head] = a.name if a.asname else head
                self.rebind(head)
            return
        if stmt.level or not stmt.module or not (_module_ok(stmt.module) or self._builds(stmt.module)):
            raise _NotInert
        for a in stmt.names:
            if a.name == "*":
                raise _NotInert
            self.aliases[a.asname or a.name] = f"{stmt.module}.{a.name}"
            self.rebind(a.asname or a.name)

    def _builds(self, module: str) -> bool:
        """load_inline's module, where calls of it are looked for (every candidate process has it imported)."""
        return self.calls is not None and module in (BUILD_MODULE, "torch.utils")

    def dotted(self, node: ast.AST) -> str | None:
        """The dotted path of `a.b.c` whose head is an imported name (through the import's alias), or
        a builtin the module does not bind itself; None otherwise."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id in self.own:
            return None
        head = self.aliases.get(node.id)
        if head is None and not parts and node.id in _BUILTINS:
            head = node.id
        return None if head is None else ".".join([head, *reversed(parts)])


def _build_call(stmt: ast.stmt, scope: _Scope) -> bool:
    """`name = load_inline(...)` (or the call alone) with literal arguments: recorded in scope.calls.
    False for any other statement; _NotInert for a call of load_inline that is not literal."""
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
    if not isinstance(value, ast.Call) or scope.dotted(value.func) != LOAD_INLINE:
        return False
    if isinstance(stmt, ast.Assign) and not (len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        raise _NotInert
    if any(k.arg is None for k in value.keywords) or any(isinstance(a, ast.Starred) for a in value.args):
        raise _NotInert  # **kwargs, *args
    scope.calls.append(([_literal(a, scope) for a in value.args],
                        {k.arg: _literal(k.value, scope) for k in value.keywords}))
    if isinstance(stmt, ast.Assign):
        scope.rebind(stmt.targets[0].id)
    return True


def _literal(node: ast.expr, scope: _Scope):
    """The value of a literal argument: a constant, a list or tuple of them, strings joined with `+`,
    a name the module bound once to such a value before; _NotInert for anything else."""
    if isinstance(node, ast.Constant) and type(node.value) in (str, int, float, bool, type(None)):
        return node.value  # already in the parsed source
    if isinstance(node, (ast.List, ast.Tuple)):  # of plain values: what load_inline takes
        items = [_literal(e, scope) for e in node.elts]
        if any(isinstance(e, ast.Starred) for e in node.elts) or any(type(x) is list for x in items):
            raise _NotInert
        return scope.charge(items)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, scope), _literal(node.right, scope)
        if type(left) is str and type(right) is str and len(left) + len(right) <= LITERAL_CHARS:
            return scope.charge(left + right)
        raise _NotInert
    if isinstance(node, ast.Name) and node.id in scope.literals:
        return scope.charge(scope.literals[node.id])
    raise _NotInert


def _module_ok(name: str) -> bool:
    return name in INERT_MODULES or name.startswith("triton.language.")


def _statement(stmt: ast.stmt, scope: _Scope) -> None:
    if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
        return
    if isinstance(stmt, ast.Assign):
        if not all(isinstance(t, ast.Name) for t in stmt.targets):
            raise _NotInert
        _value(stmt.value, scope)
        return
    if isinstance(stmt, ast.AnnAssign):
        if not isinstance(stmt.target, ast.Name):
            raise _NotInert
        _value(stmt.annotation, scope)
        if stmt.value is not None:
            _value(stmt.value, scope)
        return
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if getattr(stmt, "type_params", None):
            raise _NotInert
        for d in stmt.decorator_list:
            _decorator(d, scope)
        _arguments(stmt.args, scope)
        if stmt.returns is not None:
            _value(stmt.returns, scope)
        return  # the body runs when called, not at import
    if isinstance(stmt, ast.ClassDef):
        if stmt.keywords or stmt.decorator_list or getattr(stmt, "type_params", None):
            raise _NotInert  # a metaclass or a decorator runs at class creation
        for b in stmt.bases:  # an imported class: a base of the module's own runs its __init_subclass__
            if scope.dotted(b) is None:
                raise _NotInert
        for s in stmt.body:  # a class body runs at import
            _statement(s, scope)
        return
    raise _NotInert


def _arguments(args: ast.arguments, scope: _Scope) -> None:
    for d in [*args.defaults, *args.kw_defaults]:
        if d is not None:
            _value(d, scope)
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if a is not None and a.annotation is not None:
            _value(a.annotation, scope)


def _decorator(d: ast.expr, scope: _Scope) -> None:
    target = d.func if isinstance(d, ast.Call) else d
    if scope.dotted(target) not in INERT_DECORATORS:
        raise _NotInert
    if isinstance(d, ast.Call):
        _call_args(d, scope)


def _call_args(call: ast.Call, scope: _Scope) -> None:
    for a in call.args:
        _value(a, scope)
    for k in call.keywords:
        _value(k.value, scope)


_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


def _small_number(node: ast.expr) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.LShift, ast.Pow)):  # 1 << 16, 2 ** 20
        return (isinstance(node.left, ast.Constant) and _small_number(node.left) and isinstance(node.right, ast.Constant)
                and type(node.right.value) is int and 0 <= node.right.value <= 64)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _ARITHMETIC) and _small_number(node.left) and _small_number(node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _small_number(node.operand)
    return (isinstance(node, ast.Constant) and type(node.value) in (int, float)
            and abs(node.value) <= 2 ** 31)


def _value(node: ast.expr, scope: _Scope) -> None:
    """_NotInert unless evaluating `node` at import runs none of the submission's code."""
    if isinstance(node, ast.Constant):
        return
    if isinstance(node, ast.Name):
        return  # a lookup in the module or builtins runs nothing
    if isinstance(node, ast.Attribute):
        # only through imported modules, or of what an inert call made (torch.finfo(...).max): an
        # attribute of the module's own class could be a descriptor
        if isinstance(node.value, ast.Call):
            _value(node.value, scope)
        elif scope.dotted(node) is None:
            raise _NotInert
        return
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for e in node.elts:
            if isinstance(e, ast.Starred):
                raise _NotInert
            _value(e, scope)
        return
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _NotInert  # **mapping
        for x in [*node.keys, *node.values]:
            _value(x, scope)
        return
    if isinstance(node, ast.UnaryOp):
        _value(node.operand, scope)
        return
    if isinstance(node, ast.BinOp):
        # arithmetic of small numbers (10 ** 10 ** 10 or "x" * 10 ** 10 would run or allocate without
        # end); `|` of types (int | None)
        if isinstance(node.op, ast.BitOr):
            _value(node.left, scope)
            _value(node.right, scope)
            return
        if not _small_number(node):
            raise _NotInert
        return
    if isinstance(node, ast.Lambda):
        _arguments(node.args, scope)  # its body runs when called
        return
    if isinstance(node, ast.Subscript):
        # typing's generics and the builtins' (Optional[int], tuple[int, ...]); another class's
        # __class_getitem__ is its own code
        base = node.value
        if scope.dotted(base) is None:
            raise _NotInert
        _value(node.slice, scope)
        return
    if isinstance(node, ast.Call):
        if scope.dotted(node.func) not in INERT_CALLS:
            raise _NotInert
        _call_args(node, scope)
        return
    raise _NotInert
