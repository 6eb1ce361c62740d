// Light prelude of a load_inline .cu: all of ATen (every at:: function), none of the C++ frontend.
#pragma once
#include <ATen/ATen.h>
#include "cuda_torch_names.h"
