"""The kernel_env server: OpenEnv's FastAPI app behind a gate, and the `serve` entry point.

    python -m kernel_env.server.app --host 127.0.0.1 --port 8000 [--kernelbench-dir D] ...
    kernel-env serve ...                  (cli.py calls add_serve_arguments + serve)

One process, one event loop, one Judge shared by every session (uvicorn --workers would split the
GPU pool and the session table, so there is no such option). The Gate, a plain ASGI wrapper, adds
what OpenEnv 0.10 lacks:
- auth: `Authorization: Bearer <token>` on every route except /health (HTTP 401; a WebSocket
  handshake is refused with 401 before any session exists);
- only the routes this service supports (/ws, /health, /stats, /schema, /metadata): OpenEnv's
  stateless POST /reset|/step and /mcp make no sense for multi-turn episodes;
- WebSocket input checks answered with an error frame, the session surviving: messages over
  --max-message-bytes, binary frames, non-object JSON, unknown message types (uvicorn's own
  ws_max_size, 4x larger, is the hard cap: beyond it the socket is closed with 1009);
- a reader that notices a closed socket at once and cancels the session's in-flight judge call
  (see environment.DisconnectWatch), so leaving clients free their GPU/CPU work and their slot.
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

from fastapi import FastAPI
from openenv.core.env_server.http_server import HTTPEnvServer
from starlette.responses import JSONResponse

from ..judge.config import JudgeConfig
from ..models import KernelAction, KernelObservation, KernelState
from ..tasks import TaskError, TaskSet
from .environment import WATCH, DisconnectWatch, EnvSettings, KernelEnvironment, Shared
from .reward import RewardConfig

log = logging.getLogger("kernel_env.server")

TOKEN_ENV = "KERNEL_ENV_TOKEN"
ROUTES = ("/ws", "/health", "/stats", "/schema", "/metadata")
OPEN_ROUTES = ("/health",)           # readiness probes need no token and reveal nothing
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
    if not isinstance(obj, dict):
        return "INVALID_MESSAGE", "a message must be a JSON object with a 'type' field"
    if obj.get("type") not in MESSAGE_TYPES:
        return "UNKNOWN_TYPE", f"unknown message type {str(obj.get('type'))[:40]!r}: use {', '.join(MESSAGE_TYPES)}"
    return None


class Gate:
    """Pure ASGI wrapper around the FastAPI app (see the module docstring)."""

    def __init__(self, app, token: Optional[str], max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
        self.app = app
        self._expected = f"Bearer {token}".encode() if token else None
        self.max_message_bytes = max_message_bytes

    def _authorized(self, scope) -> bool:
        if self._expected is None:
            return True
        got = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
        return hmac.compare_digest(got, self._expected)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)  # lifespan
        path = scope.get("path", "")
        if path not in ROUTES:
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


def build_app(shared: Shared, make_judge: Callable[[], object], *, max_sessions: int = 256,
              token: Optional[str] = None, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
              stats_interval_s: float = 60.0) -> Gate:
    """The ASGI app. The judge is made at startup, on the server's loop, and closed at shutdown."""
    app = FastAPI(title="kernel_env", docs_url=None, redoc_url=None, openapi_url=None)
    server = HTTPEnvServer(functools.partial(KernelEnvironment, shared), KernelAction, KernelObservation,
                           max_concurrent_envs=max_sessions, env_name="kernel_env", state_cls=KernelState)
    server.register_routes(app, mode="production")  # no stateless /reset|/step|/state
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
    gate = Gate(app, token, max_message_bytes)
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
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _device_and_gpus(args) -> tuple[str, tuple[int, ...]]:
    device = args.device
    if device == "auto" or (device == "cuda" and not args.gpus):
        import torch  # only here: the server process needs it anyway; package import must not
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not args.gpus:
            return device, tuple(range(torch.cuda.device_count())) or (0,)
    if args.gpus:
        try:
            return device, tuple(int(g) for g in args.gpus.split(",") if g.strip())
        except ValueError:
            raise SystemExit(f"--gpus: expected comma-separated integers, got {args.gpus!r}")
    return device, (0,)


def serve(args: argparse.Namespace) -> None:
    import uvicorn

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

    def make_judge():
        from ..judge import Judge  # imported late: the judge pulls in its scheduling machinery
        return Judge(judge_cfg, tasks)

    app = build_app(Shared(tasks, settings), make_judge, max_sessions=args.max_sessions, token=token,
                    max_message_bytes=max_message_bytes, stats_interval_s=args.stats_interval_s)
    log.info("kernel_env: %d tasks (%d train, %d eval) from %s; device %s%s; max %d sessions, %d turns; policy "
             "%s; auth %s", len(tasks.tasks), len(tasks.ids("train")), len(tasks.ids("eval")), tasks.root, device,
             f" gpus {list(gpus)}" if device == "cuda" else "", args.max_sessions, args.max_turns,
             judge_cfg.policy, "on" if token else "OFF")
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                ws_max_size=4 * max_message_bytes, timeout_graceful_shutdown=30)


def main(argv=None) -> None:
    parser = add_serve_arguments(argparse.ArgumentParser(prog="python -m kernel_env.server.app",
                                                         description="Serve kernel_env over OpenEnv."))
    serve(parser.parse_args(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
