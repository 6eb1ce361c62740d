// What a load_inline main.cpp needs when its cpp_sources only declare the kernels' functions: the
// Tensor class, torch's pybind11 casters and error translation (torch::wrap_pybind_function), the
// torch:: names, and what cuda_prelude_shim_bridge.inc calls. torch/extension.h brings the whole C++
// frontend, whose pending template instantiations cost ~7 s in every file that includes it, even
// through a precompiled header (judge/prebuild.py precompiles this one too; fast_build.py).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zero.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/impl/InlineDeviceGuard.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>
#ifndef KSHIM_NO_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif
#include "cuda_torch_names.h"  // torch::Tensor, torch::kFloat32, torch::Dtype, ... (as torch/types.h)
