"""kernel_env: an OpenEnv environment that judges LLM-written GPU kernels (KernelBench) for RL.

The exports are loaded on first use: `import kernel_env` (e.g. for `kernel_env.tasks`) stays cheap,
and nothing here imports torch or the OpenEnv server stack until the client or models are asked for.
"""
__all__ = ["KernelAction", "KernelEnv", "KernelObservation", "KernelState"]

_LAZY = {
    "KernelAction": ".models",
    "KernelObservation": ".models",
    "KernelState": ".models",
    "KernelEnv": ".client",
}


def __getattr__(name):
    if name in _LAZY:
        from importlib import import_module
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kernel_env' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
