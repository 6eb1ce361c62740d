"""What a CUDA output slot lets a candidate reach: the whole segment its block was cut from.

The reference worker shares each output slot with the candidate through a CUDA IPC handle
(harness.make_slots). The handle names the caching allocator's segment, and the candidate maps all
of it. Here the worker's side makes a small slot and then a small tensor of its own (as the
reference's outputs of a check are made while the candidate waits), with and without the slots'
own memory pool (harness.slot_pool); a child process, given the slot alone, writes at the other
tensor's offset from the slot with cudaMemcpy (what native code in a submission could do) when the
two share a segment. Then the memory an evaluation's pool of ReLU-sized slots held is given back
the way the worker does (drop, ipc_collect, empty_cache).

    python experiments/slot_segments.py --device cuda
    python experiments/slot_segments.py --device cpu     # says why there is nothing to measure
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernel_env import harness  # noqa: E402

CHILD = r"""
import base64, ctypes, json, pickle, sys
import torch
w, delta = json.loads(sys.argv[1]), int(sys.argv[2])
fn, args = pickle.loads(base64.b64decode(w["cuda_ipc"]))
slot = fn(*args)
src = torch.tensor([7.0], dtype=torch.float32)
rt = ctypes.CDLL("libcudart.so")
rc = rt.cudaMemcpy(ctypes.c_void_p(slot.data_ptr() + delta), ctypes.c_void_p(src.data_ptr()), 4, 1)  # HostToDevice
torch.cuda.synchronize()
print(json.dumps({"cudaMemcpy": rc}))
"""


def segment_of(ptr: int) -> int | None:
    for seg in torch.cuda.memory_snapshot():
        if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
            return seg["address"]
    return None


def share(slot: torch.Tensor) -> dict:
    """The slot's wire entry, as make_slots makes it (the IPC counter left as torch makes it)."""
    import base64
    import pickle
    from torch.multiprocessing.reductions import reduce_tensor
    fn, a = reduce_tensor(slot)
    return {"cuda_ipc": base64.b64encode(pickle.dumps((fn, tuple(a)))).decode()}


def one(pooled: bool, device: torch.device) -> dict:
    """A one-number slot (a loss), then a tensor of the worker's own; the child writes at the second's
    offset from the first when they share a segment."""
    pool = harness.slot_pool(device) if pooled else None
    if pooled:
        slots, wire, counters = harness.make_slots([{"dtype": "float32", "shape": [1]}], 1, device, Path("."), pool)
        slot, entry = slots[0][0], wire[0][0]
    else:  # as make_slots made a slot before it had a pool: the allocator's shared segments
        slot = torch.empty(1, dtype=torch.float32, device=device)
        entry, counters = share(slot), []
    own = torch.full((1,), 42.0, device=device)
    torch.cuda.synchronize()
    same = segment_of(slot.data_ptr()) == segment_of(own.data_ptr())
    out = {"pooled": pooled, "same_segment": same, "offset_bytes": own.data_ptr() - slot.data_ptr()}
    if same:
        r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(entry), str(out["offset_bytes"])],
                           capture_output=True, text=True, timeout=120)
        out["child"] = (r.stdout.strip().splitlines() or [r.stderr[-300:]])[-1]
        out["own_tensor_after"] = own.item()  # 42.0 unless the child reached it
    harness.release_slot_users(counters)
    return out


def give_back(device: torch.device, gib: float) -> dict:
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved(device)
    pool = harness.slot_pool(device)
    side = int(gib * (1 << 30)) // 4
    slots, wire, counters = harness.make_slots([{"dtype": "float32", "shape": [side]}], 7, device, Path("."), pool)
    held = torch.cuda.memory_reserved(device)
    harness.release_slot_users(counters)
    del slots, wire, pool
    import gc
    gc.collect()
    torch.cuda.ipc_collect()
    torch.cuda.empty_cache()
    return {"slots_gib": round(7 * gib, 2), "reserved_before_gib": round(before / (1 << 30), 3),
            "reserved_with_slots_gib": round(held / (1 << 30), 3),
            "reserved_after_gib": round(torch.cuda.memory_reserved(device) / (1 << 30), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--gib", type=float, default=0.25, help="size of each of the 7 slots given back")
    args = ap.parse_args()
    if args.device == "cpu":
        print(json.dumps({"device": "cpu", "note": "CPU slots are files of their own: no segments to share"}))
        return
    device = torch.device("cuda", 0)
    torch.zeros(1, device=device)
    rows = [one(False, device), one(True, device)]
    rows.append(give_back(device, args.gib))
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
