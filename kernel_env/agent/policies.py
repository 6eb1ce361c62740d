"""Policies: what answers a turn. answer(messages, task_id, turn) -> (text, truncated, completion tokens).

- `OpenAIPolicy`: any OpenAI-compatible chat endpoint (`vllm serve`, SGLang, a hosted API). Uses the
  `openai` package when installed, else plain HTTP. An endpoint that says the context is full raises
  ContextFull (the episode ends, "budget").
- `VLLMPolicy`: a local `vllm.LLM` (only when vllm is importable).
- `TransformersPolicy`: local `generate`, batched across concurrent episodes, any device.
- `ReplayPolicy`: submits files from a folder instead of asking a model (oracle runs, env tests).
  Turn 1 submits `DIR/<task id with "/" replaced by "__">.py` (e.g. `level1__1_Small_ReLU.py`); turn
  k > 1 submits `DIR/<same>.turn<k>.py` if it exists, and the episode ends after the last file.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, Optional

log = logging.getLogger("kernel_env.agent")


class ContextFull(Exception):
    """The conversation no longer fits the model's context: the episode ends ("budget")."""


class NoMoreTurns(Exception):
    """The policy has nothing more to submit (replay ran out of files): the episode ends."""


class Policy:
    """answer(messages, task_id, turn) -> (text, truncated, completion_tokens or None)."""

    name = "policy"

    def answer(self, messages: list[dict], task_id: str, turn: int) -> tuple[str, bool, Optional[int]]:
        raise NotImplementedError

    def has_task(self, task_id: str) -> bool:
        return True

    def close(self) -> None:
        pass


class _Batcher:
    """Collects single requests from episode threads into batches for one batched backend call."""

    def __init__(self, fn: Callable[[list], list], max_batch: int, wait_s: float = 0.05):
        self.fn, self.max_batch, self.wait_s = fn, max(1, max_batch), wait_s
        self.q: queue.Queue = queue.Queue()
        self._t = threading.Thread(target=self._run, daemon=True, name="policy-batcher")
        self._t.start()

    def __call__(self, item):
        fut: Future = Future()
        self.q.put((item, fut))
        return fut.result()

    def _run(self):
        while True:
            batch = [self.q.get()]
            deadline = time.monotonic() + self.wait_s
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.q.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            try:
                outs = self.fn([b[0] for b in batch])
                for (_, fut), out in zip(batch, outs):
                    fut.set_exception(out) if isinstance(out, BaseException) else fut.set_result(out)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting episode threads
                for _, fut in batch:
                    fut.set_exception(e)


class ReplayPolicy(Policy):
    """Submits files from a folder (see the module docstring for the naming)."""

    name = "replay"

    def __init__(self, solutions: str | Path):
        self.dir = Path(solutions)
        if not self.dir.is_dir():
            raise SystemExit(f"--solutions: no such folder {solutions}")

    @staticmethod
    def file_stem(task_id: str) -> str:
        return task_id.replace("/", "__")

    def path(self, task_id: str, turn: int) -> Path:
        stem = self.file_stem(task_id)
        return self.dir / (f"{stem}.py" if turn == 1 else f"{stem}.turn{turn}.py")

    def has_task(self, task_id: str) -> bool:
        return self.path(task_id, 1).is_file()

    def answer(self, messages, task_id, turn):
        p = self.path(task_id, turn)
        if not p.is_file():
            if turn == 1:
                return "", False, 0  # no solution: an empty submission
            raise NoMoreTurns(str(p))  # no further turns for this task
        return f"```python\n{p.read_text()}\n```", False, None


class OpenAIPolicy(Policy):
    """An OpenAI-compatible chat completions endpoint."""

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str = "", max_tokens: int = 2048,
                 temperature: float = 1.0, top_p: float = 1.0, enable_thinking: Optional[bool] = None,
                 timeout_s: float = 600.0, retries: int = 4, use_sdk: Optional[bool] = None):
        self.base_url, self.model = base_url.rstrip("/"), model
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "") or "EMPTY"
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.extra = {} if enable_thinking is None else {"chat_template_kwargs": {"enable_thinking": enable_thinking}}
        self.timeout_s, self.retries = timeout_s, retries
        self._client = None
        if use_sdk is not False:
            try:
                import openai
                self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=timeout_s,
                                             max_retries=0)
            except ImportError:
                if use_sdk:
                    raise
        log.info("openai policy: %s model %s (%s)", self.base_url, model, "openai SDK" if self._client else "urllib")

    @staticmethod
    def _context_error(status: int, message: str) -> bool:
        m = message.lower()
        return status == 400 and any(k in m for k in ("context length", "maximum context", "context_length",
                                                       "too long", "max_tokens", "prompt is too long"))

    def _request(self, messages) -> tuple[str, str, Optional[int]]:
        body = {"model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                "temperature": self.temperature, "top_p": self.top_p, **self.extra}
        if self._client is not None:
            import openai
            try:
                r = self._client.chat.completions.create(
                    model=self.model, messages=messages, max_tokens=self.max_tokens, temperature=self.temperature,
                    top_p=self.top_p, extra_body=self.extra or None)
            except openai.BadRequestError as e:
                if self._context_error(400, str(e)):
                    raise ContextFull(str(e)) from e
                raise
            c = r.choices[0]
            return c.message.content or "", c.finish_reason or "", getattr(r.usage, "completion_tokens", None)
        req = urllib.request.Request(self.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {self.api_key}"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                r = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            if self._context_error(e.code, text):
                raise ContextFull(text) from e
            if 400 <= e.code < 500 and e.code not in (408, 409, 429):
                raise ValueError(f"endpoint refused the request ({e.code}): {text[:500]}") from e
            raise ConnectionError(f"endpoint error {e.code}: {text[:300]}") from e
        c = r["choices"][0]
        return (c.get("message") or {}).get("content") or "", c.get("finish_reason") or "", \
            (r.get("usage") or {}).get("completion_tokens")

    def answer(self, messages, task_id, turn):
        last = None
        for attempt in range(self.retries + 1):
            try:
                text, finish, ntok = self._request(messages)
                return text, finish == "length", ntok
            except (ContextFull, ValueError):
                raise
            except Exception as e:  # connection errors, 5xx, rate limits: retry, then fail loudly
                if type(e).__name__ in ("BadRequestError", "AuthenticationError", "NotFoundError",
                                        "PermissionDeniedError"):
                    raise
                last = e
                if attempt < self.retries:
                    time.sleep(2 * 2**attempt)
        raise RuntimeError(f"model endpoint {self.base_url} failed {self.retries + 1} times: {last}") from last


class TransformersPolicy(Policy):
    """Local `model.generate`, batching the turns of concurrent episodes."""

    name = "transformers"

    def __init__(self, model: str, max_tokens: int = 2048, temperature: float = 1.0, top_p: float = 1.0,
                 enable_thinking: bool = False, batch_size: int = 8, device: str = "auto", dtype: str = "auto",
                 max_context: int = 0):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        self.torch = torch
        tok = AutoTokenizer.from_pretrained(model)
        self.tok = getattr(tok, "tokenizer", tok)
        self.tok.padding_side = "left"
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=dtype).to(device).eval()
        gen_eos = self.model.generation_config.eos_token_id
        gen_eos = [gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])
        self.eos_ids = sorted({self.tok.eos_token_id, *gen_eos} - {None})
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.enable_thinking = enable_thinking
        self.max_context = max_context or getattr(self.model.config, "max_position_embeddings", 0) or 1 << 30
        self._batch = _Batcher(self._generate, batch_size)

    def _generate(self, prompts: list[list[int]]) -> list:
        torch = self.torch
        enc = self.tok.pad({"input_ids": prompts}, return_tensors="pt", padding=True)
        kw = dict(max_new_tokens=self.max_tokens, pad_token_id=self.tok.pad_token_id, eos_token_id=self.eos_ids)
        kw.update(do_sample=True, temperature=self.temperature, top_p=self.top_p) if self.temperature > 0 \
            else kw.update(do_sample=False)
        with torch.no_grad():
            out = self.model.generate(input_ids=enc["input_ids"].to(self.device),
                                      attention_mask=enc["attention_mask"].to(self.device), **kw)
        res = []
        for row in out[:, enc["input_ids"].shape[1]:].tolist():
            cut = next((k for k, t in enumerate(row) if t in self.eos_ids), None)
            ids = row if cut is None else row[:cut + 1]
            res.append((self.tok.decode(ids, skip_special_tokens=True), cut is None, len(ids)))
        return res

    def answer(self, messages, task_id, turn):
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False,
                                           enable_thinking=self.enable_thinking)
        if len(ids) + self.max_tokens > self.max_context:
            raise ContextFull(f"{len(ids)} prompt tokens + {self.max_tokens} > {self.max_context}")
        return self._batch(list(ids))


class VLLMPolicy(Policy):
    """A local vllm.LLM engine, batching the turns of concurrent episodes."""

    name = "vllm"

    def __init__(self, model: str, max_tokens: int = 2048, temperature: float = 1.0, top_p: float = 1.0,
                 enable_thinking: bool = False, batch_size: int = 256, tensor_parallel_size: int = 1,
                 gpu_memory_utilization: float = 0.85, max_context: int = 0):
        try:
            from vllm import LLM, SamplingParams
        except ImportError as e:
            raise SystemExit("--policy vllm needs vllm installed (pip install vllm); or use --policy transformers, "
                             "or `vllm serve` + --policy openai") from e
        kw = {"max_model_len": max_context} if max_context else {}
        self.llm = LLM(model=model, tensor_parallel_size=tensor_parallel_size,
                       gpu_memory_utilization=gpu_memory_utilization, **kw)
        self.tok = self.llm.get_tokenizer()
        self.max_context = self.llm.llm_engine.model_config.max_model_len
        self.params = SamplingParams(max_tokens=max_tokens, temperature=temperature, top_p=top_p)
        self.max_tokens, self.enable_thinking = max_tokens, enable_thinking
        self._batch = _Batcher(self._generate, batch_size, wait_s=0.2)

    def _generate(self, prompts: list[list[int]]) -> list:
        outs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], self.params, use_tqdm=False)
        return [(o.outputs[0].text, o.outputs[0].finish_reason == "length", len(o.outputs[0].token_ids))
                for o in outs]

    def answer(self, messages, task_id, turn):
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                           enable_thinking=self.enable_thinking)
        if len(ids) + self.max_tokens > self.max_context:
            raise ContextFull(f"{len(ids)} prompt tokens + {self.max_tokens} > {self.max_context}")
        return self._batch(list(ids))



def make_policy(a) -> Policy:
    if a.policy == "replay":
        if not a.solutions:
            raise SystemExit("--policy replay needs --solutions DIR")
        return ReplayPolicy(a.solutions)
    if not a.model:
        raise SystemExit(f"--policy {a.policy} needs --model")
    if a.policy == "openai":
        if not a.base_url:
            raise SystemExit("--policy openai needs --base_url (e.g. http://localhost:8001/v1)")
        return OpenAIPolicy(a.base_url, a.model, a.api_key, a.max_tokens, a.temperature, a.top_p, a.enable_thinking)
    think = bool(a.enable_thinking)
    if a.policy == "vllm":
        return VLLMPolicy(a.model, a.max_tokens, a.temperature, a.top_p, think, tensor_parallel_size=a.tensor_parallel_size,
                          max_context=a.max_context)
    return TransformersPolicy(a.model, a.max_tokens, a.temperature, a.top_p, think, batch_size=a.batch_size,
                              device=a.device, dtype=a.dtype, max_context=a.max_context)

