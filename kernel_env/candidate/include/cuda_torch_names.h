// The torch:: names a load_inline .cu uses, as torch/types.h defines them, without autograd and the
// C++ frontend (kernel_env/candidate/fast_build.py). Included by the cuda_prelude_*.h headers, the
// shim's too (its at:: names stand in for torch's).
#pragma once
#include <optional>
#ifndef KSHIM_NO_CUDA  // the shim prelude's C++-only check (tests/test_fast_build.py) has no CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#endif

namespace torch {
using namespace at; // NOLINT
using std::nullopt; // NOLINT
using std::optional; // NOLINT
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kUInt16 = at::kUInt16;
constexpr auto kUInt32 = at::kUInt32;
constexpr auto kUInt64 = at::kUInt64;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kU8 = kUInt8;
constexpr auto kU16 = kUInt16;
constexpr auto kU32 = kUInt32;
constexpr auto kU64 = kUInt64;
constexpr auto kI8 = kInt8;
constexpr auto kI16 = kInt16;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
} // namespace torch
