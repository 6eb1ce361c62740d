"""Ordered timing on CUDA: no work of a timed call, on any stream, runs before its start event, and
its end event waits for the work of every stream. Used by harness.time_calls on BOTH sides of the
trust line (candidate and reference are timed alike).

Two properties of CUDA make it:

- One work queue. CUDA_DEVICE_MAX_CONNECTIONS=1 (the judge puts it in the environment of every timed
  process; CUDA reads it when the context is made) gives the context one hardware queue: the GPU
  starts work in the order the host queued it, whatever the stream. A one-thread sleep kernel queued
  before the start event holds that queue while the host queues the call, so the call's first kernel
  starts right after the start event. The host's launch work (Python, torch's dispatch, Triton's
  launcher) is not in the time, and a kernel the call puts on another stream cannot run before the
  start event, as it could with several queues.
- A context event. cuCtxRecordEvent (CUDA 12.5) captures the work queued so far on every stream of
  the context; the timed stream waits for it before the end event. The end is a GPU-side time after
  everything the call queued: no device-wide synchronize, so no host wake-up in the number.

Without ordered timing the start event was recorded on an idle GPU and the end taken after the host
woke from a synchronize: an honest ~10 us ReLU timed 20-60 us depending on the process's CPU, and the
wake-up read a 2.7 ms matmul up to 2 % slow in some processes (experiments/bench_timing_order.py;
docs/design/timing.md).

OrderedTiming checks both properties on the device when it is made: a kernel put on another stream
after the start event must start after it, and the end must wait for a kernel left running on
another stream. Where either fails (the variable not set or set too late, a driver before 12.5),
timing_order() returns the reason and time_calls times the old way.
"""
from __future__ import annotations

import ctypes
import os

import torch

_sleep = torch.cuda._sleep  # bound here, before a submission is imported, like harness's timers
CONNECTIONS_ENV = "CUDA_DEVICE_MAX_CONNECTIONS"
CU_EVENT_DISABLE_TIMING = 2
CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13  # kHz


class Unavailable(RuntimeError):
    """Ordered timing cannot be trusted in this process; the message says why."""


class OrderedTiming:
    def __init__(self, device: torch.device):
        if os.environ.get(CONNECTIONS_ENV) != "1":
            raise Unavailable(f"{CONNECTIONS_ENV} is not 1 in this process")
        try:
            cu = ctypes.CDLL("libcuda.so.1")
            self._record = cu.cuCtxRecordEvent
            self._wait = cu.cuStreamWaitEvent
        except (OSError, AttributeError) as e:
            raise Unavailable(f"the CUDA driver has no cuCtxRecordEvent (12.5 or later): {e}") from None
        self._record.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._wait.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
        self.device = device
        with torch.cuda.device(device):
            torch.cuda.synchronize(device)  # the primary context exists and is current in this thread
            ctx, dev, khz = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_int()
            ev = ctypes.c_void_p()
            if (cu.cuCtxGetCurrent(ctypes.byref(ctx)) or not ctx.value or cu.cuCtxGetDevice(ctypes.byref(dev))
                    or cu.cuDeviceGetAttribute(ctypes.byref(khz), CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev)
                    or cu.cuEventCreate(ctypes.byref(ev), CU_EVENT_DISABLE_TIMING)):
                raise Unavailable("the CUDA driver did not give its context, clock rate or an event")
            self._ctx, self._ev = ctx, ev
            # sleep cycles per microsecond at the GPU's rated clock: at any lower clock a hold lasts longer
            self.cycles_per_us = max(khz.value / 1e3, 1.0)
            self._check()

    def hold(self, us: float) -> None:
        """Queue a one-thread kernel that holds the work queue for about `us` microseconds."""
        _sleep(int(us * self.cycles_per_us))

    def join(self, stream: torch.cuda.Stream) -> None:
        """Make `stream` wait for all work queued so far on every stream of the context."""
        r = self._record(self._ctx, self._ev) or self._wait(ctypes.c_void_p(stream.cuda_stream), self._ev, 0)
        if r:
            raise RuntimeError(f"ordered timing: the CUDA driver refused to join the streams (CUresult {r})")

    def _check(self) -> None:
        """Both properties, on this device, with a kernel on another stream."""
        main, other = torch.cuda.current_stream(self.device), torch.cuda.Stream(self.device)
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        self.hold(200)
        ev[0].record(main)
        with torch.cuda.stream(other):
            _sleep(1)
            ev[1].record(other)
        ev[2].record(main)
        with torch.cuda.stream(other):
            _sleep(int(100 * self.cycles_per_us))
        self.join(main)
        ev[3].record(main)
        torch.cuda.synchronize(self.device)
        if ev[0].elapsed_time(ev[1]) < 0:
            raise Unavailable("a kernel on another stream ran before the start event (more than one work queue)")
        if ev[2].elapsed_time(ev[3]) < 0.09:
            raise Unavailable("the end event did not wait for a kernel left running on another stream")


_ORDERS: dict = {}


def timing_order(device: torch.device) -> OrderedTiming | str:
    """This process's ordered timing on `device`, made and checked once; or why there is none."""
    key = device.index if device.index is not None else torch.cuda.current_device()
    if key not in _ORDERS:
        try:
            _ORDERS[key] = OrderedTiming(torch.device("cuda", key))
        except (RuntimeError, OSError) as e:  # Unavailable, or the device refused a step of the check
            _ORDERS[key] = str(e) or type(e).__name__
    return _ORDERS[key]
