"""TRUSTED side: the code that decides verdicts. Nothing here imports or executes candidate code;
candidate code only ever runs in a separate process started by `sandbox.py` (see kernel_env/candidate/)."""
from .config import JudgeConfig
from .verdict import Verdict, Stage, ErrorKind

__all__ = ["JudgeConfig", "Verdict", "Stage", "ErrorKind", "Judge"]


def __getattr__(name):  # Judge pulls in asyncio machinery; import it lazily
    if name == "Judge":
        from .service import Judge
        return Judge
    raise AttributeError(name)
