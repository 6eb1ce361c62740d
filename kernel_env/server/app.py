"""The kernel_env server: OpenEnv's FastAPI app behind a gate, and the `serve` entry point.

    python -m kernel_env.server.app --host 127.0.0.1 --port 8000 [--kernelbench-dir D] ...
    kernel-env serve ...                  (cli.py calls add_serve_arguments + serve)
    python -m kernel_env.server.deploy    (the same, configured from KERNEL_ENV_* variables: deploy.py)

One process, one event loop, one Judge shared by every session (uvicorn --workers would split the
GPU pool and the session table, so there is no such option). The Gate, a plain ASGI wrapper, adds
what OpenEnv 0.10 lacks:
- auth: `Authorization: Bearer <token>` on every route except /health and /openapi.json (HTTP 401;
  a WebSocket handshake is refused with 401 before any session exists). Without a token (a loopback
  bind, or an app imported by another ASGI server) only loopback clients are answered (403), unless
  --insecure: an importable app cannot see the address it is bound to, only who is calling;
- only the routes this service supports (ROUTES). OpenEnv's stateless POST /reset|/step|/state are
  not registered (production mode): each would make an environment for one call, and an episode
  here is several judged turns whose state (task, history, turn count) lives in a session; a
  stateless step would have no earlier turns and no session whose disconnect cancels its GPU work;
- /openapi.json, open: `openenv validate --url` reads the API version and decides the server's mode
  (production: no /reset, /step, /state) from its paths. It lists only the routes served here and
  their generic models (the same for every OpenEnv server: no task, session or judge data), so it
  reveals nothing the open source does not; /schema and /metadata stay behind the token;
- /mcp, a minimal MCP server (JSON-RPC 2.0 over HTTP POST, behind the token): initialize, ping and
  tools/list answer, with no tools. OpenEnv's own /mcp is replaced: for an environment without MCP
  tools it answers tools/list with an error, makes a throwaway environment per call, and its
  openenv/session/create keeps sessions with no connection whose closing would end them. Episodes
  are played over /ws; an MCP client learns that from `initialize` and an empty tool list;
- WebSocket input checks answered with an error frame, the session surviving: messages over
  --max-message-bytes, binary frames, non-object JSON, unknown message types (uvicorn's own
  ws_max_size, 4x larger, is the hard cap: beyond it the socket is closed with 1009);
- a reader that notices a closed socket at once and cancels the session's in-flight judge call
  (see environment.DisconnectWatch), so leaving clients free their GPU/CPU work and their slot. A
  step still running 15 s after its client left is logged with the awaits it is in; so is every
  unfinished task when a session outlives the shutdown's 30 s grace period (uvicorn then cuts it).
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import hmac
import ipaddress
import json
import logging
import os
import sys
import time
from dataclasses import MISSING, fields
from typing import Callable, Optional

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcRequest, JsonRpcResponse
from pydantic import ValidationError
from starlette.responses import JSONResponse, Response

from ..judge.config import JudgeConfig
from ..models import KernelAction, KernelObservation, KernelState
from ..tasks import TaskError, TaskSet
from .environment import WATCH, DisconnectWatch, EnvSettings, KernelEnvironment, Shared, where
from .reward import RewardConfig

log = logging.getLogger("kernel_env.server")

TOKEN_ENV = "KERNEL_ENV_TOKEN"
ROUTES = ("/ws", "/health", "/stats", "/schema", "/metadata", "/mcp", "/openapi.json")
WEBSOCKET_ROUTES = ("/ws",)
# readiness probes and the route list need no token and reveal nothing (see the module docstring)
OPEN_ROUTES = ("/health", "/openapi.json")
# what `openenv validate --url` reads from /openapi.json's info.version: the OpenEnv HTTP API this
# server speaks (OpenEnv's own apps declare 1.0.0), not this package's version
OPENENV_HTTP_API_VERSION = "1.0.0"
MCP_PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")  # newest first
MCP_MAX_REQUEST_BYTES = 64 * 1024    # initialize, ping and tools/list are a few hundred bytes
MESSAGE_TYPES = ("reset", "step", "state", "close")
MAX_PENDING = 8                      # unanswered messages before a client is cut off (1 is normal)
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20  # the judge's own code limit is 256 KiB; JSON escaping adds some


def _error_frame(code: str, message: str) -> dict:
    text = json.dumps({"type": "error", "data": {"message": message, "code": code}})
    return {"type": "websocket.send", "text": text}


class _Refusal:
    """An input the gate answers itself, in order, when the app next reads."""

    def __init__(self, code: str, message: str):
        self.frame = _error_frame(code, message)


class _WsConnection:
    def __init__(self, gate: "Gate", scope, receive, send):
        self.gate, self.scope, self.raw_receive, self.raw_send = gate, scope, receive, send
        self.queue: asyncio.Queue = asyncio.Queue()
        self.watch = DisconnectWatch()
        self.closed = False  # the client left, or we closed: later app sends are dropped

    async def run(self) -> None:
        token = WATCH.set(self.watch)  # copied into the app task's context
        try:
            app_task = asyncio.create_task(self.gate.app(self.scope, self.receive, self.send))
        finally:
            WATCH.reset(token)
        pump = asyncio.create_task(self._pump())
        try:
            await asyncio.wait({app_task})
        except asyncio.CancelledError:  # server shutdown: let the session clean up first
            unfinished = "\n".join(where(t) for t in asyncio.all_tasks() if not t.done())
            log.error("a session was still running when the shutdown's grace period ended; where it and the "
                      "server's other unfinished work were:\n%s", unfinished)
            self.watch.client_gone()
            app_task.cancel()
            await asyncio.wait({app_task})
            raise
        finally:
            pump.cancel()
            await asyncio.wait({pump})
        if not app_task.cancelled() and app_task.exception() is not None:
            raise app_task.exception()

    async def _pump(self) -> None:
        """Read the socket continuously (OpenEnv reads only between replies)."""
        limit = self.gate.max_message_bytes
        while True:
            msg = await self.raw_receive()
            kind = msg["type"]
            if kind == "websocket.disconnect":
                self.closed = True
                self.queue.put_nowait(msg)
                self.watch.client_gone()
                return
            if kind == "websocket.receive":
                text, data = msg.get("text"), msg.get("bytes")
                size = len(text.encode()) if text is not None else len(data or b"")
                if size > limit:
                    msg = _Refusal("MESSAGE_TOO_LARGE", f"message of {size} bytes is over this server's "
                                                        f"limit of {limit} bytes")
                elif text is None:
                    msg = _Refusal("INVALID_MESSAGE", "binary frames are not supported: send JSON text")
                if self.queue.qsize() >= MAX_PENDING:  # not following one-request-one-reply: cut off
                    await self._close(1008, "too many unanswered messages")
                    return
            self.queue.put_nowait(msg)

    async def _close(self, code: int, reason: str) -> None:
        if not self.closed:
            self.closed = True
            try:
                await self.raw_send({"type": "websocket.close", "code": code, "reason": reason})
            except Exception:
                pass
        self.queue.put_nowait({"type": "websocket.disconnect", "code": code})
        self.watch.client_gone()

    async def receive(self) -> dict:
        while True:
            msg = await self.queue.get()
            if isinstance(msg, _Refusal):
                await self.send(msg.frame)
                continue
            if msg["type"] == "websocket.receive":
                problem = _check_message(msg["text"])
                if problem is not None:
                    await self.send(_error_frame(*problem))
                    continue
            return msg

    async def send(self, msg: dict) -> None:
        if self.closed:
            return  # nobody to tell: the reply to a cancelled step, the final close
        try:
            await self.raw_send(msg)
        except OSError:  # uvicorn's ClientDisconnected; the pump will see the disconnect too
            self.closed = True


def _check_message(text: str) -> Optional[tuple[str, str]]:
    """Inputs OpenEnv 0.10 would answer by closing the session (or with a traceback-ish message)."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None  # OpenEnv answers INVALID_JSON itself and keeps the session
    except RecursionError:  # `[[[[...`: json gives up on deep nesting with this, not a ValueError
        return "INVALID_JSON", "the message nests too deeply to parse"
    if not isinstance(obj, dict):
        return "INVALID_MESSAGE", "a message must be a JSON object with a 'type' field"
    if obj.get("type") not in MESSAGE_TYPES:
        return "UNKNOWN_TYPE", f"unknown message type {str(obj.get('type'))[:40]!r}: use {', '.join(MESSAGE_TYPES)}"
    return None


class Gate:
    """Pure ASGI wrapper around the FastAPI app (see the module docstring). `loopback_only`: answer
    loopback clients only (a server without a token that was not told --insecure)."""

    def __init__(self, app, token: Optional[str], max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 loopback_only: bool = False):
        self.app = app
        self._expected = f"Bearer {token}".encode() if token else None
        self.max_message_bytes = max_message_bytes
        self.loopback_only = loopback_only

    def _authorized(self, scope) -> bool:
        if self._expected is None:
            return True
        got = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
        return hmac.compare_digest(got, self._expected)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)  # lifespan
        path = scope.get("path", "")
        if self.loopback_only and not _is_loopback((scope.get("client") or ("",))[0]):
            return await self._deny(scope, receive, send, 403, "this server has no token, so it answers loopback "
                                    f"clients only (set ${TOKEN_ENV} on the server, or --insecure)")
        if path not in ROUTES or (scope["type"] == "websocket") != (path in WEBSOCKET_ROUTES):
            return await self._deny(scope, receive, send, 404, f"not found: this server serves {', '.join(ROUTES)}")
        if path not in OPEN_ROUTES and not self._authorized(scope):
            return await self._deny(scope, receive, send, 401, "missing or wrong token "
                                    "(Authorization: Bearer <token>; KernelEnv(token=...) or $KERNEL_ENV_TOKEN)")
        if scope["type"] == "websocket":
            return await _WsConnection(self, scope, receive, send).run()
        return await self.app(scope, receive, send)

    async def _deny(self, scope, receive, send, status: int, message: str):
        body = json.dumps({"detail": message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if scope["type"] == "http":
            return await JSONResponse({"detail": message}, status_code=status)(scope, receive, send)
        if "websocket.http.response" in scope.get("extensions", {}):  # a real HTTP answer to the handshake
            await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})


# -- /mcp ---------------------------------------------------------------------------------------

def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("kernel-rl")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


def _rpc(response: JsonRpcResponse) -> JSONResponse:
    return JSONResponse(response.model_dump())  # JSON-RPC errors travel in a 200 answer


def _mcp_result(request: JsonRpcRequest) -> JsonRpcResponse:
    """The answer to one MCP request. There are no tools: episodes are played over /ws."""
    method, params, rid = request.method, request.params, request.id
    if method == "initialize":
        asked = params.get("protocolVersion")
        return JsonRpcResponse.success({
            "protocolVersion": asked if asked in MCP_PROTOCOL_VERSIONS else MCP_PROTOCOL_VERSIONS[0],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "kernel_env", "version": _package_version()},
            "instructions": "kernel_env offers no MCP tools: an episode (reset, then up to max_turns judged "
                            "steps) is played over the OpenEnv WebSocket /ws; /schema describes its messages.",
        }, rid)
    if method == "ping":
        return JsonRpcResponse.success({}, rid)
    if method == "tools/list":
        return JsonRpcResponse.success({"tools": []}, rid)
    if method == "tools/call":
        return JsonRpcResponse.error_response(JsonRpcErrorCode.INVALID_PARAMS,
                                              f"unknown tool {str(params.get('name'))[:60]!r}: this server has "
                                              "no MCP tools (episodes are played over /ws)", request_id=rid)
    return JsonRpcResponse.error_response(JsonRpcErrorCode.METHOD_NOT_FOUND, f"method not found: {method[:60]!r}",
                                          request_id=rid)


async def mcp_endpoint(request: Request) -> Response:
    """POST /mcp: one JSON-RPC 2.0 request (MCP over HTTP); a notification is accepted with 202."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MCP_MAX_REQUEST_BYTES:
            return _rpc(JsonRpcResponse.error_response(
                JsonRpcErrorCode.INVALID_REQUEST, f"request over {MCP_MAX_REQUEST_BYTES} bytes"))
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        return _rpc(JsonRpcResponse.error_response(JsonRpcErrorCode.PARSE_ERROR))
    if not isinstance(raw, dict):  # MCP 2025-06-18 has no batches
        return _rpc(JsonRpcResponse.error_response(JsonRpcErrorCode.INVALID_REQUEST,
                                                   "expected one JSON-RPC request object"))
    try:
        rpc = JsonRpcRequest(**raw)
    except (ValidationError, TypeError) as e:
        rid = raw.get("id") if isinstance(raw.get("id"), (str, int)) else None
        return _rpc(JsonRpcResponse.error_response(JsonRpcErrorCode.INVALID_REQUEST,
                                                   f"invalid JSON-RPC 2.0 request: {str(e)[:300]}", request_id=rid))
    if "id" not in raw:  # a notification (notifications/initialized, ...): nothing to answer
        return Response(status_code=202)
    return _rpc(_mcp_result(rpc))


# -- the app ---------------------------------------------------------------------------------------

def build_app(shared: Shared, make_judge: Callable[[], object], *, max_sessions: int = 256,
              token: Optional[str] = None, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
              stats_interval_s: float = 60.0, loopback_only: bool = False) -> Gate:
    """The ASGI app. The judge is made at startup, on the server's loop, and closed at shutdown."""
    app = FastAPI(title="kernel_env", version=OPENENV_HTTP_API_VERSION, docs_url=None, redoc_url=None,
                  openapi_url=None)
    server = HTTPEnvServer(functools.partial(KernelEnvironment, shared), KernelAction, KernelObservation,
                           max_concurrent_envs=max_sessions, env_name="kernel_env", state_cls=KernelState)
    server.register_routes(app, mode="production")  # no stateless /reset|/step|/state
    # OpenEnv's /mcp (HTTP and WebSocket) gives way to mcp_endpoint (see the module docstring)
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/mcp"]
    app.add_api_route("/mcp", mcp_endpoint, methods=["POST"], summary="MCP (JSON-RPC 2.0): no tools; play over /ws")
    openapi_document: dict = {}

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi_route() -> dict:
        if not openapi_document:
            openapi_document.update(get_openapi(
                title="kernel_env", version=OPENENV_HTTP_API_VERSION,
                description=f"kernel_env {_package_version()}: GPU kernels for KernelBench problems judged over "
                            "OpenEnv (production mode). Episodes are played over the WebSocket /ws "
                            "(messages reset, step, state, close; /schema).",
                routes=[r for r in app.routes if getattr(r, "path", None) in ROUTES]))
        return openapi_document

    started = time.time()
    background: list[asyncio.Task] = []

    def stats() -> dict:
        judge = shared.judge
        return {"uptime_s": round(time.time() - started, 1),
                "sessions": {"active": server.active_sessions, "max": server.max_concurrent_envs},
                "env": shared.stats(),
                "judge": judge.stats() if judge is not None else None}

    @app.get("/stats")
    async def stats_route() -> dict:
        return stats()

    async def log_stats():
        while True:
            await asyncio.sleep(stats_interval_s)
            s = stats()
            j, e = s["judge"] or {}, s["env"]
            log.info("stats: sessions %d/%d, steps %d (in flight %d, cancelled %d), judge queue %s, evaluations %s, "
                     "build %.1fs, measure %.2fs (means), device busy %s", s["sessions"]["active"],
                     s["sessions"]["max"], e["steps"], e["steps_in_flight"], e["steps_cancelled"],
                     j.get("queue_depth"), j.get("evaluations"), j.get("build_s_mean") or 0.0,
                     j.get("measure_s_mean") or 0.0, json.dumps(j.get("device_busy_frac")))

    async def startup():
        shared.judge = make_judge()
        if hasattr(shared.judge, "start_ahead"):  # idle run processes, reference workers: not in the first step
            shared.judge.start_ahead()
        if stats_interval_s > 0:
            background.append(asyncio.create_task(log_stats()))

    async def shutdown():
        for t in background:
            t.cancel()
        await shared.aclose()
        if shared.judge is not None:
            await shared.judge.aclose()

    app.router.on_startup.append(startup)
    app.router.on_shutdown.append(shutdown)
    gate = Gate(app, token, max_message_bytes, loopback_only)
    gate.http_server = server  # for tests and introspection
    return gate


# -- command line ---------------------------------------------------------------------------------

_JUDGE_FLAGS_SKIP = {"device", "gpus", "cache_dir"}  # they have their own flags below


def _scalar_fields(cls, skip=()):
    for f in fields(cls):
        if f.name not in skip and f.default is not MISSING and isinstance(f.default, (int, float, str)):
            yield f


def add_serve_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p = parser
    p.add_argument("--host", default="127.0.0.1", help="bind address (non-loopback needs a token)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--kernelbench-dir", default=os.environ.get("KERNELBENCH_DIR", ""),
                   help="KernelBench problems (default $KERNELBENCH_DIR, else the built-in small tasks)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="where kernels are built for and timed (auto: cuda if available)")
    p.add_argument("--gpus", default="", help="CUDA device indices, e.g. 0,1 (default: all visible)")
    p.add_argument("--ray", default="", metavar="ADDRESS",
                   help="evaluate in judge actors on a Ray cluster, one per node: 'auto' joins the running "
                        "cluster, 'local' starts one in this process, else the head's HOST:PORT or a ray:// "
                        "address (default: no Ray, this process judges on this box's devices)")
    p.add_argument("--max-turns", type=int, default=4, help="judged turns per episode")
    p.add_argument("--max-sessions", type=int, default=256, help="concurrent WebSocket sessions")
    p.add_argument("--token", default=None, help=f"auth token (prefer ${TOKEN_ENV}: argv is visible in ps)")
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback bind without a token")
    p.add_argument("--max-message-bytes", type=int, default=0,
                   help="largest WebSocket message answered normally (0: max(1 MiB, 4 x --max-code-bytes), "
                        "room for JSON escaping of the largest code the judge accepts)")
    p.add_argument("--cache-dir", default=None, help="judge cache (default $KERNEL_ENV_CACHE or ~/.cache/kernel_env)")
    p.add_argument("--stats-interval-s", type=float, default=60.0, help="log a stats line this often (0: never)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    g = p.add_argument_group("reward (see kernel_env/server/reward.py)")
    for f in _scalar_fields(RewardConfig):
        g.add_argument(f"--reward-{f.name.replace('_', '-')}", dest=f"reward_{f.name}", type=type(f.default),
                       default=f.default, help=f"default {f.default}")
    g = p.add_argument_group("judge limits (see kernel_env/judge/config.py)")
    for f in _scalar_fields(JudgeConfig, _JUDGE_FLAGS_SKIP):
        kw = ({"action": argparse.BooleanOptionalAction} if isinstance(f.default, bool)
              else {"type": type(f.default)})
        g.add_argument(f"--{f.name.replace('_', '-')}", dest=f"judge_{f.name}", default=f.default,
                       help=f"default {f.default}", **kw)
    return parser


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if getattr(address, "ipv4_mapped", None):  # ::ffff:127.0.0.1, a dual-stack socket's IPv4 client
        address = address.ipv4_mapped
    return address.is_loopback


def _device_and_gpus(args) -> tuple[str, tuple[int, ...]]:
    device = args.device
    if device == "auto" or (device == "cuda" and not args.gpus):
        import torch  # only here: the server process needs it anyway; package import must not
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not args.gpus:
            if not torch.cuda.device_count():  # e.g. a container started without its GPUs
                raise SystemExit("--device cuda: no CUDA device is visible to this process (torch "
                                 f"{torch.__version__}, CUDA {torch.version.cuda}); in a container: docker run --gpus ...")
            return device, tuple(range(torch.cuda.device_count()))
    if args.gpus:
        try:
            return device, tuple(int(g) for g in args.gpus.split(",") if g.strip())
        except ValueError:
            raise SystemExit(f"--gpus: expected comma-separated integers, got {args.gpus!r}")
    return device, (0,)


def _check_sandbox(requested: str) -> None:
    """Probe the candidates' sandbox before the server starts (the judge reuses the answer): a sandbox
    asked for by name that cannot run here stops the server with one line, and `auto` finding none
    says so loudly, instead of a traceback in the startup hook or a quiet `none`."""
    from ..judge.sandbox import isolation
    try:
        chosen = isolation(requested)
    except ValueError as e:
        raise SystemExit(f"--sandbox ($KERNEL_ENV_SANDBOX): {e}")
    except RuntimeError as e:
        hint = {"bwrap": "is bubblewrap installed, and may this user make namespaces? in a container that usually "
                         "takes --security-opt seccomp=unconfined, apparmor=unconfined and systempaths=unconfined",
                "unshare": "unshare needs root (CAP_SYS_ADMIN)"}.get(requested, "")
        raise SystemExit(f"--sandbox {requested} ($KERNEL_ENV_SANDBOX): {e} ({hint}); --sandbox none runs candidate "
                         "code with process limits only")
    if chosen == "none" and requested != "none":
        log.warning("no sandbox works here (bwrap, unshare): candidate code runs with process limits only; "
                    "--sandbox bwrap or unshare makes this an error")


def app_from_args(args: argparse.Namespace) -> tuple[Gate, dict]:
    """(the ASGI app, uvicorn.run's keyword arguments) from `kernel-env serve`'s parsed flags. A setting
    that cannot work stops here with one line (SystemExit), before anything listens."""
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if not _is_loopback(args.host) and not token and not args.insecure:
        raise SystemExit(f"refusing to listen on {args.host} without a token: set ${TOKEN_ENV} (or --token), "
                         "or pass --insecure to accept anyone who can reach this port")
    max_message_bytes = args.max_message_bytes or max(DEFAULT_MAX_MESSAGE_BYTES, 4 * args.judge_max_code_bytes)
    if args.max_turns < 1 or args.max_sessions < 1 or max_message_bytes < 1024:
        raise SystemExit("--max-turns and --max-sessions must be >= 1, --max-message-bytes >= 1024")
    try:
        tasks = TaskSet(args.kernelbench_dir or None)
    except TaskError as e:
        raise SystemExit(str(e))
    if args.ray:
        from ..cluster import connect  # Ray is an optional dependency
        device, gpus = connect(args.ray, args.device), (0,)  # each node judges on its own GPUs
    else:
        device, gpus = _device_and_gpus(args)
    judge_kw = {f.name: getattr(args, f"judge_{f.name}") for f in _scalar_fields(JudgeConfig, _JUDGE_FLAGS_SKIP)}
    if args.cache_dir:
        judge_kw["cache_dir"] = args.cache_dir
    try:
        judge_cfg = JudgeConfig(device=device, gpus=gpus, **judge_kw)
        reward = RewardConfig(**{f.name: getattr(args, f"reward_{f.name}") for f in _scalar_fields(RewardConfig)})
        settings = EnvSettings(max_turns=args.max_turns, device=device, reward=reward)
    except ValueError as e:
        raise SystemExit(str(e))
    if not args.ray:  # on Ray each node's judge probes its own
        _check_sandbox(judge_cfg.sandbox)

    def make_judge():
        if args.ray:
            from ..cluster import ClusterJudge
            return ClusterJudge(judge_cfg, tasks)
        from ..judge import Judge  # imported late: the judge pulls in its scheduling machinery
        return Judge(judge_cfg, tasks)

    app = build_app(Shared(tasks, settings), make_judge, max_sessions=args.max_sessions, token=token,
                    max_message_bytes=max_message_bytes, stats_interval_s=args.stats_interval_s,
                    loopback_only=token is None and not args.insecure)
    where = f" on Ray ({args.ray})" if args.ray else f" gpus {list(gpus)}" if device == "cuda" else ""
    log.info("kernel_env: %d tasks (%d train, %d eval) from %s; device %s%s; max %d sessions, %d turns; policy "
             "%s; auth %s", len(tasks.tasks), len(tasks.ids("train")), len(tasks.ids("eval")), tasks.root, device,
             where, args.max_sessions, args.max_turns, judge_cfg.policy,
             "on" if token else "OFF (loopback clients only)" if not args.insecure else "OFF")
    return app, {"host": args.host, "port": args.port, "log_level": args.log_level,
                 "ws_max_size": 4 * max_message_bytes, "timeout_graceful_shutdown": 30}


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    app, uvicorn_settings = app_from_args(args)
    uvicorn.run(app, **uvicorn_settings)


def main(argv=None) -> None:
    parser = add_serve_arguments(argparse.ArgumentParser(prog="python -m kernel_env.server.app",
                                                         description="Serve kernel_env over OpenEnv."))
    serve(parser.parse_args(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
