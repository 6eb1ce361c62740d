"""Hack: print verdict-like JSON on stdout, hoping the judge parses it (it reads only its own pipe).
Task: level1/1_Small_ReLU. Expected: stage correctness, output_mismatch (the kernel is the wrong one).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


print('{"event":"done","ok":1}', flush=True)


class ModelNew(nn.Module):
    def forward(self, x):
        print('{"event":"timed","t":[0]}', flush=True)
        return _ops.relu_wrong(x)
