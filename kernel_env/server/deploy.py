"""The server configured from environment variables: what `kernel-env serve` does, without argv.

    python -m kernel_env.server.deploy                      (the Dockerfile's CMD: every setting applied)
    uvicorn kernel_env.server.deploy:app --host H --port P  (any ASGI server: `app` is built at first use)

Each `kernel-env serve` flag --foo-bar is read from KERNEL_ENV_FOO_BAR (--token from KERNEL_ENV_TOKEN,
--max-turns from KERNEL_ENV_MAX_TURNS, --sandbox from KERNEL_ENV_SANDBOX, ...). The mapping is read off
the parser itself (app.add_serve_arguments), so a flag added there is a variable here with no more
code. Switches (--insecure, --start-ahead/--no-start-ahead) take 1/true/yes/on or 0/false/no/off; an
empty variable counts as unset. A container is configured with variables, not argv, and argv is
visible to every process on the machine (`ps`), which a token must not be.

A value that does not convert, or a KERNEL_ENV_ variable that is neither a flag nor one of the
variables other parts read (OTHER_VARIABLES), stops the server with one line naming the variable: a
misspelt setting must not leave the server running on a default. Everything after that is
app.app_from_args, as for `kernel-env serve`: the token rule for non-loopback binds, the sandbox
probed before anything listens, the judge made in the startup hook.

With `python -m`, host, port and uvicorn's WebSocket size cap come from these variables too. Under
another ASGI server its own --host/--port decide where it listens, which the app cannot see; a server
without a token then answers loopback clients only (app.Gate), so a public bind is never open by
accident.
"""
from __future__ import annotations

import argparse
import difflib
import os
from typing import Mapping

from .app import add_serve_arguments, app_from_args

PREFIX = "KERNEL_ENV_"
# KERNEL_ENV_ variables read elsewhere, none of them a serve flag: accepted here and left alone
OTHER_VARIABLES = {
    "KERNEL_ENV_CACHE": "the judge's cache folder when --cache-dir is not given (judge/config.py)",
    "KERNEL_ENV_PCH_VARIANTS": "optimisation levels given a precompiled header (judge/config.py)",
    # set by the judge in its candidate processes' environments (judge/environ.py, candidate/fast_build.py)
    "KERNEL_ENV_PCH_DIR": "the precompiled header's folder, for candidate builds",
    "KERNEL_ENV_BUILT_DIR": "earlier builds a candidate process may load",
    "KERNEL_ENV_CUDA_PRELUDE": "the fast build's prelude, for candidate builds",
    "KERNEL_ENV_BINDING_OBJECTS": "the binding objects the judge published, for compile processes",
    "KERNEL_ENV_TRITON_KEY": "the hash of Triton's install, for candidate run processes",
}
# KERNEL_ENV_DEVICE and KERNEL_ENV_FAST_BUILD are flags here (--device, --fast-build) and also set by
# the judge for candidates, whose environments are made from scratch (sandbox.child_env): the
# server's own values never reach them, nor theirs the server.
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_TYPE_WORDS = {int: "an integer", float: "a number"}


def serve_parser() -> argparse.ArgumentParser:
    return add_serve_arguments(argparse.ArgumentParser(prog="kernel-env serve", add_help=False))


def variable_of(flag: str) -> str:
    """--max-turns -> KERNEL_ENV_MAX_TURNS."""
    return PREFIX + flag.lstrip("-").upper().replace("-", "_")


def flag_variables(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Variable name -> the parser's action, for every long option (a --foo/--no-foo pair is one)."""
    found = {}
    for action in parser._actions:  # argparse keeps no public list of its options
        flag = next((o for o in action.option_strings if o.startswith("--")), None)
        if flag is not None and action.dest != "help":
            found[variable_of(flag)] = action
    return found


def _switch(name: str, raw: str) -> bool:
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise SystemExit(f"{name}={raw!r}: expected one of {', '.join(TRUE_WORDS + FALSE_WORDS)}")


def _converted(name: str, action: argparse.Action, raw: str):
    convert = action.type or str
    try:
        value = convert(raw.strip())
    except (TypeError, ValueError):
        raise SystemExit(f"{name}={raw!r}: expected {_TYPE_WORDS.get(convert, 'a ' + getattr(convert, '__name__', 'value'))}")
    if action.choices is not None and value not in action.choices:
        raise SystemExit(f"{name}={raw!r}: expected one of {', '.join(map(str, action.choices))}")
    return value


def settings_from_environ(environ: Mapping[str, str] | None = None) -> argparse.Namespace:
    """`kernel-env serve`'s parsed arguments, from KERNEL_ENV_* variables (os.environ by default)."""
    environ = os.environ if environ is None else environ
    parser = serve_parser()
    variables = flag_variables(parser)
    unknown = sorted(n for n in environ if n.startswith(PREFIX) and n not in variables and n not in OTHER_VARIABLES)
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, [*variables, *OTHER_VARIABLES], n=1)
        raise SystemExit(f"{name}: not a setting of this server" + (f" (did you mean {close[0]}?)" if close else "")
                         + "; each `kernel-env serve --foo-bar` is KERNEL_ENV_FOO_BAR")
    args = parser.parse_args([])  # every default, as `kernel-env serve` with no flags
    for name, action in variables.items():
        raw = environ.get(name, "")
        if not raw.strip():
            continue
        if action.nargs == 0:  # a switch: store_true/store_false, or a --foo/--no-foo pair
            given = _switch(name, raw)
            if isinstance(action, argparse.BooleanOptionalAction):
                value = given
            else:
                value = action.const if given else action.default
        elif action.nargs in ("+", "*") or isinstance(action.nargs, int):
            value = [_converted(name, action, part) for part in raw.split()]
        else:
            value = _converted(name, action, raw)
        setattr(args, action.dest, value)
    return args


def app_from_environ(environ: Mapping[str, str] | None = None):
    """(the ASGI app, uvicorn.run's keyword arguments) from KERNEL_ENV_* variables."""
    return app_from_args(settings_from_environ(environ))


def __getattr__(name: str):
    # `app` is made when an ASGI server first asks for it, not at import: importing this module to
    # read its mapping (tests, tools) must not load tasks or probe sandboxes
    if name == "app":
        built, _ = app_from_environ()
        globals()["app"] = built
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    import uvicorn

    built, uvicorn_settings = app_from_environ()
    uvicorn.run(built, **uvicorn_settings)


if __name__ == "__main__":
    main()
