"""TRUSTED: the judge spread over the nodes of a Ray cluster.

    kernel-env serve --ray auto|local|HOST:PORT ...

The front door (the OpenEnv server: sessions, episodes, rewards) stays one process. Each node of the
cluster runs one `NodeJudge` actor (node_judge.py): today's judge on that node's GPUs (or its CPU on
the CPU device), so a submission's build and its measurement stay on one node and each device slot
stays exclusive. The front door's `ClusterJudge` (router.py) has the judge's API: it screens the
source itself (no process needed), sends the rest to the least queued node, preferring the node that
judged the task last, and runs an evaluation again elsewhere when its node is lost.

Ray is an optional dependency (`pip install -e ".[cluster]"`): nothing here imports it at module level.
"""
from __future__ import annotations

NAMESPACE = "kernel_env"  # the named judge actors live here, shared by every front door of a cluster


def connect(address: str, device: str = "auto") -> str:
    """Join (or, for 'local', start) the Ray cluster and say which device its nodes judge on: `device`
    unless it is 'auto', then 'cuda' when the cluster has GPUs, else 'cpu'."""
    try:
        import ray
    except ImportError:
        raise SystemExit("--ray needs Ray: pip install -e '.[cluster]'") from None
    if not ray.is_initialized():
        _check_reachable(address)
        kw = {"include_dashboard": False} if address == "local" else {}
        try:
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, **kw)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise SystemExit(f"--ray {address}: cannot join the Ray cluster: {e}") from None
    if device == "auto":
        return "cuda" if ray.cluster_resources().get("GPU", 0) > 0 else "cpu"
    return device


def _check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """A head's HOST:PORT that answers no TCP connection stops the server with one line: ray.init
    itself would retry it for minutes, logging warnings."""
    import socket
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return  # auto, local, ray://...: Ray resolves those itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout_s).close()
    except OSError as e:
        raise SystemExit(f"--ray {address}: cannot reach the Ray head there ({e})") from None


def __getattr__(name):  # ClusterJudge without importing Ray at package import
    if name == "ClusterJudge":
        from .router import ClusterJudge
        return ClusterJudge
    raise AttributeError(name)
