"""Compile processes serve load_inline calls one after another; each call's ninja build runs in a
sandbox of its own that writes the call's folder and nothing else (judge/builds.py `_ninja`,
candidate/ninja_step.py). A real judge on the CPU: C++ builds of literal load_inline calls, which the
judge sends to its compile processes itself (no build process)."""
import asyncio
import os

import pytest

from kernel_env.judge import Judge, JudgeConfig
from kernel_env.judge.pools import COMPILE
from kernel_env.judge.sandbox import isolation

RELU = "level1/1_Small_ReLU"
# a source the judge reads as inert but for a load_inline call with literal arguments
LITERAL = ("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
           "SRC = '#include <torch/extension.h>\\n// TAG\\ntorch::Tensor relu(torch::Tensor x) {\\n"
           "  auto y = torch::empty_like(x);\\n  const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();\\n"
           "  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0 ? a[i] : 0;\\n  return y;\\n}\\n'\n"
           "_ext = load_inline(name='lit_TAG', cpp_sources=[SRC], functions=['relu']FLAGS)\n"
           "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.relu(x.contiguous())\n")


def literal(tag: str, flags: str = "") -> str:
    """The source with its own kernel (`tag`) and -O2 (the flags of the suite's precompiled header) + `flags`."""
    return LITERAL.replace("TAG", tag).replace("FLAGS", f", extra_cflags=['-O2'{flags}]")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bwrap", "unshare"])
def test_a_compile_process_serves_the_next_call_and_its_compilers_write_only_the_calls_folder(mode, cache_dir, tmp_path):
    try:
        isolation(mode)
    except RuntimeError:
        pytest.skip(f"{mode} does not work on this machine (bwrap: not installed; unshare: needs root)")
    judge = Judge(JudgeConfig(device="cpu", cache_dir=cache_dir, work_dir=tmp_path / "work", build_slots=1,
                              timing_budget_s=0.3, sandbox=mode))
    tag = os.urandom(4).hex()
    # gcc writes its dependency file where -MF says: from the build folder (<call>/torch_extensions/<name>),
    # ../../.. is the compile process's own folder, from which it serves its next calls
    planting = literal(tag + "b", ", '-MD', '-MF', '../../../planted.d'")

    async def main():
        try:
            b = await judge.evaluate(RELU, planting)
            first = list(judge.pools.idle[COMPILE])
            planted = [p for q in first for p in q.workdir.rglob("planted.d")]
            c = await judge.evaluate(RELU, literal(tag + "c"))
            return b, c, first, list(judge.pools.idle[COMPILE]), planted, list(judge.builds.compile_cpu)
        finally:
            await judge.aclose()

    b, c, first, last, planted, cpu = asyncio.run(main())
    assert (b.stage, b.error_kind) == ("build", "build_error") and "planted.d" in b.feedback, b.feedback
    assert not planted
    assert c.correct and c.details.get("build_by") == "judge", c.feedback
    # the process that compiled the first call compiled the next: its torch was imported once
    assert len(first) == 1 and [p.proc.pid for p in last] == [first[0].proc.pid]
    assert len(cpu) == 2 and cpu[0]["start"] > 0.1 and cpu[1]["start"] == 0.0, cpu
    assert all(x["compilers"] > 0.1 for x in cpu), cpu  # the compilers' CPU, as each ninja step said it
    assert not list((tmp_path / "work").rglob("call-*"))  # each call's folder went with it
