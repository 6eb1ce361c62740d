// Lightest prelude of a load_inline .cu: the Tensor class, dispatch macros and the factory functions
// kernels use to make their outputs. A kernel that calls other at:: functions falls back to torch's
// full headers (fast_build.py).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/full_like.h>
#include "cuda_torch_names.h"
