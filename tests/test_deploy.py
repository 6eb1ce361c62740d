"""The deployment: the app configured from KERNEL_ENV_* variables (kernel_env/server/deploy.py),
openenv.yaml, and the Dockerfile.

No container engine runs where these tests run, so the image is checked from outside: its CMD (parsed
from the Dockerfile, so the two cannot drift apart) runs here as a process with the image's KERNEL_ENV_
settings, on loopback and the CPU device, and `openenv validate --url` is run against it; `openenv
validate .` checks the manifest; the Dockerfile's text is checked for what the image must have. What
only a built image shows (its CUDA torch, bubblewrap inside a container) is not tested here.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import sharing_the_precompiled_header
from test_server import TOKEN, Server, _free_port, processes_using, wait_for

from kernel_env.server.app import ROUTES, TOKEN_ENV, WEBSOCKET_ROUTES
from kernel_env.server.deploy import (OTHER_VARIABLES, flag_variables, serve_parser, settings_from_environ,
                                      variable_of)

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"
OPENENV_CLI = Path(sys.executable).parent / "openenv"
slow = pytest.mark.slow


# -- the Dockerfile, read as the image builder reads it ---------------------------------------

def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continued lines joined."""
    found, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):  # a comment inside a continued instruction
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        instruction, _, arguments = (pending + line).strip().partition(" ")
        found.append((instruction.upper(), arguments.strip()))
        pending = ""
    return found


def dockerfile(instruction: str) -> list[str]:
    return [args for ins, args in dockerfile_instructions() if ins == instruction]


def dockerfile_assignments(instruction: str) -> dict[str, str]:
    """The KEY=VALUE pairs of every ENV (or ARG) instruction."""
    pairs = {}
    for args in dockerfile(instruction):
        for word in shlex.split(args):
            key, _, value = word.partition("=")
            pairs[key] = value
    return pairs


def image_command() -> list[str]:
    (cmd,) = dockerfile("CMD")
    return json.loads(cmd)  # exec form: no shell between the container and the server


def image_settings() -> dict[str, str]:
    return {k: v for k, v in dockerfile_assignments("ENV").items() if k.startswith("KERNEL_ENV_")}


def sandbox_here(requested: str) -> str:
    """The image's sandbox where it works on this machine, else `auto` (bubblewrap is not installed
    everywhere these tests run)."""
    from kernel_env.judge.sandbox import isolation
    try:
        isolation(requested)
        return requested
    except RuntimeError:
        return "auto"


class ImageCommand(Server):
    """The Dockerfile's CMD as a process here, configured as in the image (its KERNEL_ENV_ settings),
    then `settings` on top; the test's own TMPDIR and judge cache, as for test_server's servers.
    `path`: the PATH it gets; `argv`: another command in the same environment ("{port}" filled in)."""

    def __init__(self, root: Path, settings: dict[str, str], path: str | None = None,
                 argv: list[str] | None = None, host: str | None = None):
        self.root, self.port = root, _free_port()
        self.tmp, self.cache = root / "tmp", sharing_the_precompiled_header(root / "cache")
        self.tmp.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_ENV_")}
        env.update(image_settings())
        env.update(TMPDIR=str(self.tmp), KERNEL_ENV_CACHE=str(self.cache), PYTHONPATH=str(REPO),
                   KERNEL_ENV_PORT=str(self.port), KERNEL_ENV_PCH_VARIANTS=os.environ["KERNEL_ENV_PCH_VARIANTS"],
                   PATH=path or f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        env.update(settings)
        self.log = open(root / "server.log", "w")
        argv = [a.format(port=self.port) for a in argv] if argv else image_command()
        self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        host = host or settings.get("KERNEL_ENV_HOST", "127.0.0.1")
        self.url = f"http://{host}:{self.port}"
        self.ws_url = f"ws://{host}:{self.port}/ws"


# on loopback and the CPU device, with nothing started ahead: these checks need no evaluation
LOOPBACK = {"KERNEL_ENV_HOST": "127.0.0.1", "KERNEL_ENV_DEVICE": "cpu", "KERNEL_ENV_START_AHEAD": "0",
            "KERNEL_ENV_STATS_INTERVAL_S": "0"}


def post_json(url: str, payload, token: str | None = None) -> tuple[int, object]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


# -- variables --------------------------------------------------------------------------------

def test_every_serve_flag_is_a_variable():
    parser = serve_parser()
    variables = flag_variables(parser)
    long_options = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    # a --foo/--no-foo pair is one variable; every other option is one
    assert {variable_of(o) for o in long_options if not o.startswith("--no-")} == set(variables)
    assert variables["KERNEL_ENV_MAX_TURNS"].dest == "max_turns"
    assert variables["KERNEL_ENV_SANDBOX"].dest == "judge_sandbox"
    assert variables[TOKEN_ENV].dest == "token"  # the variable the server and the client already read
    assert not set(variables) & set(OTHER_VARIABLES)


def test_variables_convert_as_the_flags_do(tmp_path):
    environ = {"KERNEL_ENV_PORT": "9001", "KERNEL_ENV_INSECURE": "true", "KERNEL_ENV_START_AHEAD": "0",
               "KERNEL_ENV_BYTECODE_CACHE": "on", "KERNEL_ENV_DEVICE": "cpu", "KERNEL_ENV_REWARD_BASE": "0.2",
               "KERNEL_ENV_POLICY": "kernelbench", "KERNEL_ENV_CACHE_DIR": str(tmp_path),
               "KERNEL_ENV_GPUS": "", "KERNEL_ENV_CACHE": str(tmp_path)}  # empty: unset; CACHE: not a flag
    argv = ["--port", "9001", "--insecure", "--no-start-ahead", "--bytecode-cache", "--device", "cpu",
            "--reward-base", "0.2", "--policy", "kernelbench", "--cache-dir", str(tmp_path)]
    assert vars(settings_from_environ(environ)) == vars(serve_parser().parse_args(argv))
    assert vars(settings_from_environ({})) == vars(serve_parser().parse_args([]))


@pytest.mark.parametrize("environ, message", [
    ({"KERNEL_ENV_PORT": "eighty"}, "KERNEL_ENV_PORT='eighty': expected an integer"),
    ({"KERNEL_ENV_REWARD_BASE": "high"}, "KERNEL_ENV_REWARD_BASE='high': expected a number"),
    ({"KERNEL_ENV_DEVICE": "gpu"}, "KERNEL_ENV_DEVICE='gpu': expected one of auto, cuda, cpu"),
    ({"KERNEL_ENV_INSECURE": "maybe"}, "KERNEL_ENV_INSECURE='maybe': expected one of 1, true"),
    ({"KERNEL_ENV_MAX_TURN": "3"}, "KERNEL_ENV_MAX_TURN: not a setting of this server (did you mean "
                                   "KERNEL_ENV_MAX_TURNS?)"),
])
def test_a_bad_setting_is_one_line_naming_it(environ, message):
    with pytest.raises(SystemExit) as e:
        settings_from_environ(environ)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_every_kernel_env_variable_the_code_names_is_known():
    """A KERNEL_ENV_ variable named anywhere in the project is a serve flag or one of deploy's
    OTHER_VARIABLES: otherwise setting it would stop the deployed server as a misspelt setting."""
    variables, named = set(flag_variables(serve_parser())), {}
    exact = re.compile(r"KERNEL_ENV_[A-Z0-9_]*[A-Z0-9]")
    for path in sorted({*REPO.glob("*.py"), *REPO.glob("kernel_env/**/*.py"), *REPO.glob("tests/**/*.py"),
                        *REPO.glob("scripts/*")} - {Path(__file__)}):
        if not path.is_file():
            continue
        if path.suffix == ".py":
            strings = [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
                       and isinstance(n.value, str) and exact.fullmatch(n.value)]
        else:
            strings = exact.findall(path.read_text(errors="replace"))
        for name in strings:
            named.setdefault(name, path.relative_to(REPO))
    unknown = {n: str(p) for n, p in named.items() if n not in variables and n not in OTHER_VARIABLES}
    assert not unknown, f"add these to kernel_env/server/deploy.py OTHER_VARIABLES (or make them flags): {unknown}"


# -- the Dockerfile and the manifest ----------------------------------------------------------

def test_dockerfile_builds_what_the_judge_needs():
    args = dockerfile_assignments("ARG")
    (base,) = dockerfile("FROM")
    base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
    image = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-(?:cudnn-)?devel-ubuntu[\d.]+", base)
    assert image, f"load_inline needs nvcc: a CUDA *devel* base image, not {base}"
    # torch is the CUDA build for the image's CUDA (cu130 on CUDA 13.0), at the project's own pin
    assert args["TORCH_INDEX"].endswith(f"/cu{image.group(1)}{image.group(2)}"), args["TORCH_INDEX"]
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"torch=={args['TORCH_VERSION']}" in pins
    installs = " ".join(dockerfile("RUN"))
    for package in ("bubblewrap", "ninja-build", "g++", "python3-dev"):
        assert re.search(rf"apt-get install[^&]*\s{re.escape(package)}\s", installs + " "), package
    assert "--index-url ${TORCH_INDEX} torch==${TORCH_VERSION}" in installs

    users = dockerfile("USER")
    assert users and users[-1] not in ("root", "0"), "the server and its candidates must not run as root"
    (healthcheck,) = dockerfile("HEALTHCHECK")
    assert re.search(r"\bCMD\b.*/health\b", healthcheck)
    settings = image_settings()
    assert dockerfile("EXPOSE") == [settings["KERNEL_ENV_PORT"]]
    # chosen, not left to `auto` (which falls back to none): bubblewrap, as unshare needs root
    assert settings["KERNEL_ENV_SANDBOX"] == "bwrap"
    assert settings["KERNEL_ENV_DEVICE"] == "cuda"
    assert settings["KERNEL_ENV_HOST"] == "0.0.0.0"
    assert not {TOKEN_ENV, "KERNEL_ENV_INSECURE"} & (set(settings) | set(args)), "never a token or insecure baked in"

    # the CMD runs the env-var app, which is what openenv.yaml names
    assert image_command()[-2:] == ["-m", "kernel_env.server.deploy"]
    assert yaml.safe_load((REPO / "openenv.yaml").read_text())["app"] == "kernel_env.server.deploy:app"
    copied = [word for copy in dockerfile("COPY") for word in shlex.split(copy)[:-1]]
    allowed = [line for line in (REPO / ".dockerignore").read_text().splitlines() if line.startswith("!")]
    for source in copied:
        assert (REPO / source).exists() and {f"!{source}", f"!{source}/"} & set(allowed), source


@slow
def test_openenv_validate_static_passes():
    r = subprocess.run([str(OPENENV_CLI), "validate", ".", "--level", "static", "--json"], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["verdict"] == "pass"
    assert [(c["check_id"], c["status"]) for c in report["results"]] == [("static.manifest", "pass")]


# -- the image's command, run here ------------------------------------------------------------

@slow
def test_image_command_passes_openenv_validate_url(tmp_path):
    settings = {**LOOPBACK, "KERNEL_ENV_SANDBOX": sandbox_here(image_settings()["KERNEL_ENV_SANDBOX"])}
    srv = ImageCommand(tmp_path, settings).wait_ready()
    try:
        r = subprocess.run([str(OPENENV_CLI), "validate", "--url", srv.url, "--json"], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        report = json.loads(r.stdout)
        assert report["passed"] and report["mode"] == "production", report
        assert {c["id"] for c in report["criteria"] if c["passed"]} == {
            "openapi_version_available", "health_endpoint", "metadata_endpoint", "schema_endpoint",
            "mcp_endpoint", "mode_endpoint_consistency"}, report

        # the OpenAPI document lists what the gate serves over HTTP, and nothing stateless
        code, doc = srv.get("/openapi.json")
        assert code == 200 and set(doc["paths"]) == set(ROUTES) - set(WEBSOCKET_ROUTES) - {"/openapi.json"}
        # /mcp speaks MCP's JSON-RPC: no tools, episodes are played over /ws
        mcp = srv.url + "/mcp"
        code, init = post_json(mcp, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                     "params": {"protocolVersion": "2025-06-18", "capabilities": {}}})
        assert code == 200 and init["result"]["protocolVersion"] == "2025-06-18" and "/ws" in init["result"]["instructions"]
        assert post_json(mcp, {"jsonrpc": "2.0", "method": "notifications/initialized"}) == (202, None)
        assert post_json(mcp, {"jsonrpc": "2.0", "id": "t", "method": "tools/list"}) == (
            200, {"jsonrpc": "2.0", "id": "t", "result": {"tools": []}})
        code, call = post_json(mcp, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "step"}})
        assert call["error"]["code"] == -32602 and call["id"] == 3
        assert post_json(mcp, b"{not json")[1]["error"]["code"] == -32700
        assert post_json(mcp, b"[" * 50_000)[1]["error"]["code"] == -32700  # nested too deeply for json
        assert post_json(mcp, {"jsonrpc": "2.0", "id": 4, "method": "resources/list"})[1]["error"]["code"] == -32601
    finally:
        rc = srv.stop()
    assert rc in (0, -15) and "Traceback" not in srv.log_text(), srv.log_text()
    assert wait_for(lambda: not processes_using(srv.root), 20), processes_using(srv.root)


@slow
def test_image_command_with_a_token_opens_only_health_and_the_route_list(tmp_path):
    """What `openenv validate --url` (which sends no credentials) can read of a server with a token:
    /health and /openapi.json; everything that reveals or does something needs the token."""
    settings = {**LOOPBACK, "KERNEL_ENV_SANDBOX": sandbox_here(image_settings()["KERNEL_ENV_SANDBOX"]),
                TOKEN_ENV: TOKEN}
    srv = ImageCommand(tmp_path, settings).wait_ready()
    try:
        assert srv.get("/health")[0] == 200 and srv.get("/openapi.json")[0] == 200
        for path in ("/metadata", "/schema", "/stats"):
            assert (srv.get(path)[0], srv.get(path, TOKEN)[0]) == (401, 200), path
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert post_json(srv.url + "/mcp", ping)[0] == 401
        assert post_json(srv.url + "/mcp", ping, TOKEN) == (200, {"jsonrpc": "2.0", "id": 1, "result": {}})
        assert post_json(srv.url + "/reset", {}, TOKEN)[0] == 404  # OpenEnv's stateless routes stay refused
    finally:
        srv.stop()


@slow
@pytest.mark.parametrize("settings, message", [
    # the image's own settings without a token: the 0.0.0.0 bind is refused
    ({"KERNEL_ENV_DEVICE": "cpu"}, "refusing to listen on 0.0.0.0 without a token"),
    # the image's sandbox where it cannot run: stopped with the reason, not a quiet fall back to none
    ({**LOOPBACK, "KERNEL_ENV_SANDBOX": "bwrap"}, "sandbox 'bwrap' does not work on this machine"),
], ids=["public-bind-without-token", "sandbox-cannot-run"])
def test_image_command_refuses_with_one_line(tmp_path, settings, message):
    # PATH holds only the venv's programs: no bwrap, as in a container without it
    srv = ImageCommand(tmp_path, settings, path=str(Path(sys.executable).parent))
    try:
        assert srv.proc.wait(120) != 0
    finally:
        srv.stop()
    lines = [line for line in srv.log_text().splitlines() if line.strip()]
    assert any(message in line for line in lines) and "Traceback" not in srv.log_text(), srv.log_text()
    assert not [line for line in lines if "Uvicorn running" in line]


def _non_loopback_address() -> str | None:
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address


@slow
def test_app_without_token_under_another_asgi_server_answers_loopback_clients_only(tmp_path):
    """`uvicorn kernel_env.server.deploy:app --host <public>` without a token: the app cannot see the
    bind, so it refuses every client that is not on loopback."""
    address = _non_loopback_address()
    if address is None:
        pytest.skip("no non-loopback IPv4 address here")
    srv = ImageCommand(tmp_path, {**LOOPBACK, "KERNEL_ENV_SANDBOX": "auto"}, host=address,
                       argv=[sys.executable, "-m", "uvicorn", "kernel_env.server.deploy:app", "--host", address,
                             "--port", "{port}"])
    try:
        def answered():
            assert srv.proc.poll() is None, srv.log_text()
            try:
                return srv.get("/health")
            except OSError:
                return None
        code, body = wait_for(answered, 120, 0.3)
        assert code == 403 and "loopback clients only" in body["detail"], (code, body)
    finally:
        srv.stop()
