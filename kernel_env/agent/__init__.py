"""The agent's side of kernel_env: what a training or evaluation loop needs around the env client.

- `turns`: the submission in a model answer (`extract_code`) and the next user turn after a judged
  attempt (`feedback_message`).
- `session`: `EnvSession`, one episode that survives the server's infrastructure failing (retries in
  a fresh session that replays the episode; `EnvFailure` when it cannot).
- `local_server`: `LocalEnvServer`, an embedded env server for one run.
- `metrics`: `summarize` and the other numbers over episodes, the episode's return.
- `policies`: models that answer turns (OpenAI-compatible endpoints, vLLM, transformers, replay).
- `episodes`: one multi-turn episode of a policy against the env (held-out evaluation).

Scripts (`baseline_eval.py`, `grpo_kernel.py`, `report.py`) use this package; nothing here imports
a script, the judge or torch at import time.
"""
