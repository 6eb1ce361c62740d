"""UNTRUSTED side (runs inside the candidate process): watching what ModelNew.forward does.

The trusted comparison decides whether outputs are right; this decides whether a custom kernel made
them. It runs on the correctness trials and on a few calls picked at random during timing (field
notes §4: torch doing the work, decoy kernels, lazy tensors):

  * every aten op that forward calls is seen through a TorchDispatchMode, from Python and from C++
    (torch::relu inside a load_inline function goes through the dispatcher too);
  * custom kernels are the functions of modules built by load_inline/load, Triton launches and
    operators the submission registered in the dispatcher.

Under the strict policy (kernel_env/compute_policy.py) allocation, views, copies, dtype casts and
random-number generation are allowed and anything that computes (relu, mm, sum, softmax, ...) fails
the run, however it was reached (x.relu(), x @ w, getattr); each output of forward must live in
memory that a kernel received or returned (or a copy or view of such memory).

Under the kernelbench policy PyTorch may compute too, and the watch follows the data instead: memory
a kernel call wrote (its contents differ after the call) or returned new is marked, whatever an op
computes from marked memory is marked, and every output must be marked. A kernel launched on a dummy
tensor, or one that returns its input untouched, marks nothing that PyTorch's answer is made from.

It is a tripwire, not a sandbox: code in this process can defeat it with enough introspection, which
the static checks (judge/checks.py) forbid. The verdict itself never depends on this process alone.
"""
from __future__ import annotations

import contextlib
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernel_env.candidate.share import mark_name, without_dynamo_guard
from kernel_env.compute_policy import KERNELBENCH, STRICT

# aten ops a forward may call around its kernels: they move, shape, cast or allocate data, or draw
# random numbers (dropout masks must match the reference's generator), but do not compute the result.
ALLOWED_OPS = frozenset("""
empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like new_zeros
ones ones_like new_ones full full_like new_full fill_ zero_ scalar_tensor arange lift_fresh lift_fresh_copy
resize_ resize_as_ set_ detach detach_ alias view _unsafe_view _reshape_alias as_strided t transpose
permute expand squeeze unsqueeze slice select split split_with_sizes unsafe_split chunk unbind narrow
diagonal unfold view_as_real view_as_complex movedim clone copy_ _to_copy _copy_from _copy_from_and_resize
contiguous cat stack constant_pad_nd flip roll repeat _local_scalar_dense is_same_size sym_size sym_stride sym_numel sym_storage_offset
record_stream is_pinned _pin_memory _has_compatible_shallow_copy_type
rand rand_like randn randn_like randint randint_like randperm normal normal_ uniform_ bernoulli bernoulli_
random_ exponential_ geometric_ cauchy_ log_normal_
""".split())
# dispatcher namespaces of PyTorch itself (anything else was registered by the submission), and
# namespaces of bookkeeping ops that neither compute nor make data (profiler ranges)
_TORCH_NS = frozenset("aten prims prim quantized _quantized mkldnn fbgemm _c10d_functional c10d rngprims "
                      "inductor higher_order debugprims".split())
_NEUTRAL_NS = frozenset(["profiler"])
# ops whose outputs are copies of their inputs: a copy of kernel-made memory is kernel-made
_COPIES = frozenset("clone copy_ _to_copy _copy_from _copy_from_and_resize contiguous cat stack set_ "
                    "lift_fresh_copy constant_pad_nd flip roll repeat".split())

# in-place ops that write their first argument without reading it
_OVERWRITES = frozenset("copy_ fill_ zero_ set_ resize_ normal_ uniform_ bernoulli_ random_ exponential_ "
                        "geometric_ cauchy_ log_normal_ _copy_from _copy_from_and_resize".split())

_state = threading.local()


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)
    else:
        base = getattr(obj, "base", None)  # Triton TensorDescriptor(base=tensor, ...)
        if isinstance(base, torch.Tensor):
            yield base


def _key(t: torch.Tensor):
    try:
        if t.numel() == 0:
            return None
        return t.untyped_storage().data_ptr()
    except Exception:  # tensors without storage
        return None


def _same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return torch.equal(a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8))
    except RuntimeError:  # a dtype that has no byte view
        return bool(torch.equal(a, b))


@without_dynamo_guard
class Watch(TorchDispatchMode):
    """One watched forward call: the compute ops it called and the memory its kernels touched (strict),
    or the memory holding data computed from its kernels' results (kernelbench)."""

    def __init__(self, policy: str = STRICT):
        super().__init__()
        self.policy = policy
        self.compute: dict[str, int] = {}
        self.kernel_calls = 0
        self.touched: set = set()
        self.made: set = set()  # kernelbench: storages whose data came from a kernel's results
        self._benched: set = set()  # storages a kernel got while the watch was suspended
        self.depth = 0  # inside a kernel call
        self._keep: list = []  # storages held until the call ends, so no address is reused meanwhile
        self.suspended = 0

    # -- custom kernels report here (also called from the wrappers below)
    def before_kernel(self, *objs) -> list | None:
        """Under kernelbench, a copy of every tensor a kernel is about to get: what it wrote shows
        as a change afterwards. The copies are the watch's own work, not the submission's. While the
        watch is suspended (an autotuner benchmarking the submission's kernel on the call's own
        tensors), only each tensor's first launch is compared: the benchmark writes the result, and
        the launch that follows it writes the same bytes again."""
        if self.policy != KERNELBENCH:
            return None
        tensors = [t for t in _tensors(objs) if _key(t) is not None]
        if self.suspended:
            tensors = [t for t in tensors if _key(t) not in self._benched]
            self._benched.update(_key(t) for t in tensors)
        if not tensors:
            return None
        self.suspended += 1
        try:
            return [(t, t.detach().clone()) for t in tensors]
        finally:
            self.suspended -= 1

    @contextlib.contextmanager
    def inside_kernel(self):
        """Ops a kernel call makes itself (ATen from its C++) are its own work: what it wrote is
        compared after the call, not followed op by op."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def kernel(self, args, kwargs, out=None, before: list | None = None) -> None:
        self.kernel_calls += 1
        for obj in (args, kwargs, out):
            self.touch(obj)
        if before is None:
            return
        self.suspended += 1
        try:
            given = set()
            for t, copy in before:
                given.add(_key(t))
                if not _same_bytes(t.detach(), copy):  # the kernel wrote it
                    self.mark(t)
            for t in _tensors(out):  # returned: new memory, or one it was given and wrote
                if _key(t) not in given:
                    self.mark(t)
        finally:
            self.suspended -= 1

    def mark(self, obj) -> None:
        for t in _tensors(obj):
            k = _key(t)
            if k is not None and k not in self.made:
                self.made.add(k)
                self._keep.append(t.untyped_storage())

    def touch(self, obj) -> None:
        for t in _tensors(obj):
            k = _key(t)
            if k is not None and k not in self.touched:
                self.touched.add(k)
                self._keep.append(t.untyped_storage())

    def _overwritten(self, dest: torch.Tensor) -> None:
        """Most of a buffer a kernel touched was overwritten with other data: no longer kernel-made."""
        k = _key(dest)
        if k in self.touched:
            try:
                if dest.numel() * dest.element_size() * 2 >= dest.untyped_storage().nbytes():
                    self.touched.discard(k)
            except Exception:
                pass

    def made_by_kernel(self, t: torch.Tensor) -> bool:
        k = _key(t)
        return k is None or k in (self.made if self.policy == KERNELBENCH else self.touched)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.suspended:
            return out
        ns = getattr(func, "namespace", "aten")
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        if ns in _NEUTRAL_NS:
            return out
        if self.policy == KERNELBENCH:
            if not self.depth:
                self._follow(ns, name, args, kwargs, out)
            return out
        if ns not in _TORCH_NS:  # an operator the submission registered (TORCH_LIBRARY): its kernel
            self.kernel(args, kwargs, out)
        elif name in ALLOWED_OPS:
            if name in _COPIES:
                src = [t for t in _tensors((args[1:], kwargs) if name.endswith("_") else (args, kwargs))
                       if _key(t) is not None]
                if any(self.made_by_kernel(t) for t in src):  # a copy of kernel-made memory
                    self.touch(out)
                    if name.endswith("_") and args:
                        self.touch(args[0])
                elif name == "copy_" and args and isinstance(args[0], torch.Tensor):
                    self._overwritten(args[0])
        else:
            self.compute[f"{ns}.{name}"] = self.compute.get(f"{ns}.{name}", 0) + 1
        return out

    def _follow(self, ns, name, args, kwargs, out) -> None:
        """kernelbench: what an op computes from marked memory is marked; memory overwritten from
        unmarked data (copy_ into it, fill_, out=) is not."""
        if ns not in _TORCH_NS:  # an operator the submission registered: its kernel
            self.kernel(args, kwargs, out)
            self.mark(out)
            return
        overwrites_self = name in _OVERWRITES and bool(args) and isinstance(args[0], torch.Tensor)
        read = (args[1:] if overwrites_self else args, {k: v for k, v in kwargs.items() if k != "out"})
        if any(_key(t) in self.made for t in _tensors(read)):
            self.mark(out)
            if name.endswith("_") and args:
                self.mark(args[0])
            return
        for dest in ([args[0]] if overwrites_self else []) + list(_tensors(kwargs.get("out"))):
            k = _key(dest)
            if k in self.made and dest.numel() * dest.element_size() * 2 >= dest.untyped_storage().nbytes():
                self.made.discard(k)

    def __enter__(self):
        _state.watch = self
        return super().__enter__()

    def __exit__(self, *exc):
        _state.watch = None
        return super().__exit__(*exc)


def current() -> Watch | None:
    return getattr(_state, "watch", None)


def still_active(w: Watch) -> bool:
    """Our mode is still the innermost dispatch mode (nothing popped, disabled or stacked over it)."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    return current() is w and _get_current_dispatch_mode() is w


def _wrap(fn):
    def launch(*args, **kwargs):
        w = current()
        if w is None:
            if _recorder is not None:
                return _recorder.own(mark_name(fn), fn, *args, **kwargs)
            return fn(*args, **kwargs)
        before = w.before_kernel(args, kwargs)
        with w.inside_kernel():
            out = fn(*args, **kwargs)
        w.kernel(args, kwargs, out, before)
        return out
    launch.__name__ = getattr(fn, "__name__", "kernel")
    launch.__doc__ = getattr(fn, "__doc__", None)
    launch._kernel_env_wrapped = True
    return launch


def _wrap_module(mod):
    """The functions of an extension module built by load_inline/load report their calls."""
    if mod is None:
        return mod
    for name in dir(mod):
        if name.startswith("_"):
            continue
        fn = getattr(mod, name, None)
        if callable(fn) and not isinstance(fn, type) and not getattr(fn, "_kernel_env_wrapped", False):
            try:
                setattr(mod, name, _wrap(fn))
            except (AttributeError, TypeError):
                pass
    return mod


def install_extension_hooks() -> None:
    """Before the submission is imported: modules that load_inline/load return are wrapped."""
    from torch.utils import cpp_extension as ce
    for attr in ("load_inline", "load"):
        orig = getattr(ce, attr)

        def loader(*args, _orig=orig, **kwargs):
            return _wrap_module(_orig(*args, **kwargs))
        loader.__name__ = attr
        loader.__doc__ = orig.__doc__
        setattr(ce, attr, loader)


_triton_done = False


def install_triton_hooks() -> None:
    """Triton launches report their arguments; autotuning benchmarks are not watched (the
    benchmark's own statistics use torch). Idempotent; a no-op until the submission imports triton."""
    global _triton_done
    import sys
    if _triton_done or "triton" not in sys.modules:
        return
    _triton_done = True
    classes = []
    try:
        from triton.runtime.jit import JITFunction
        classes.append(JITFunction)
    except Exception:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except Exception:
        pass
    for cls in classes:
        orig = cls.run

        def run(self, *args, _orig=orig, **kwargs):
            w = current()
            if w is None or kwargs.get("warmup", False):
                if _recorder is not None and not kwargs.get("warmup", False):
                    return _recorder.own(mark_name(getattr(self, "fn", None)), _orig, self, *args, **kwargs)
                return _orig(self, *args, **kwargs)
            before = w.before_kernel(args, kwargs)
            with w.inside_kernel():
                out = _orig(self, *args, **kwargs)
            w.kernel(args, kwargs, None, before)
            return out
        cls.run = run
    def unwatched(fn):
        def call(*args, **kwargs):
            w = current()
            if w is not None:
                w.suspended += 1
            try:
                return fn(*args, **kwargs)
            finally:
                if w is not None:
                    w.suspended -= 1
        return call

    # both ways in, across Triton versions: the autotuner's benchmark step and the benchmarker itself
    try:
        from triton.runtime.autotuner import Autotuner
        Autotuner._bench = unwatched(Autotuner._bench)
    except Exception:
        pass
    try:
        import triton.testing
        triton.testing.do_bench = unwatched(triton.testing.do_bench)
    except Exception:
        pass


def check_outputs(outs, device: torch.device) -> str | None:
    """What forward returned: plain tensors (or Python numbers) on the task's device. A Tensor
    subclass could compute lazily when read (after the timed region) or lie about its contents."""
    items = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    for k, t in enumerate(items):
        what = f"output {k}" if len(items) > 1 else "the output"
        if type(t) in (int, float, bool):
            continue
        if type(t) is not torch.Tensor:
            return (f"forward must return torch.Tensor(s); {what} is a {type(t).__module__}.{type(t).__qualname__} "
                    "(Tensor subclasses and lazy objects are not accepted)")
        if t.device.type != device.type:
            return f"{what} is on {t.device}, expected a tensor on {device.type}"
    return None


# why a watched forward does not count, per policy: no kernel ran; an output is not the kernels' work
_NO_KERNEL = {
    STRICT: ("ModelNew.forward ran no custom kernel (no load_inline function call and no Triton launch): "
             "a kernel that is defined but never launched does not count."),
    KERNELBENCH: ("ModelNew.forward ran none of your kernels (no load_inline function call and no Triton launch): "
                  "PyTorch ops may stay around your kernels, but at least one of them must run and compute part "
                  "of the result."),
}
_NOT_MADE = {
    STRICT: ("{what} of ModelNew.forward is not memory that your kernels wrote or returned: the result must "
             "come from your kernel (a decoy kernel, or an output made elsewhere?)."),
    KERNELBENCH: ("{what} of ModelNew.forward was not computed from anything your kernels produced: a kernel "
                  "that writes nothing the result is made from (a decoy on a dummy tensor, or one that returns "
                  "its input unchanged) does not count, however PyTorch computes the answer."),
}


def verdict(w: Watch, outs) -> str | None:
    """Why a watched forward does not count as the submission's kernel, or None. (PyTorch compute is
    recorded under the strict policy only.)"""
    if w.compute:
        ops = ", ".join(f"{k} (x{n})" if n > 1 else k for k, n in sorted(w.compute.items(), key=lambda kv: -kv[1])[:8])
        return ("ModelNew.forward called PyTorch compute ops: " + ops + ". The work must be done by your own "
                "kernel (load_inline or Triton); torch may only allocate, reshape, copy or cast tensors around it.")
    items = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    tensors = [t for t in items if isinstance(t, torch.Tensor)]
    if tensors and w.kernel_calls == 0:
        return _NO_KERNEL[w.policy]
    for k, t in enumerate(tensors):
        if not w.made_by_kernel(t):
            return _NOT_MADE[w.policy].format(what=f"output {k}" if len(tensors) > 1 else "the output")
    return None


_recorder = None


@contextlib.contextmanager
def profiling(recorder):
    """While on, each call of the submission's kernels goes through `recorder.own(name, fn, *args)`,
    which times it (share.py)."""
    global _recorder
    _recorder = recorder
    try:
        yield
    finally:
        _recorder = None
