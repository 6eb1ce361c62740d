// Shim prelude of a load_inline .cu (fast_build.py, KERNEL_ENV_CUDA_PRELUDE=shim): the torch API that
// kernels' host functions use, declared without one c10 or ATen header, so nvcc parses a few hundred
// lines instead of torch's tens of thousands. Every call goes out to cuda_prelude_shim_bridge.inc,
// which main.cpp includes after torch/extension.h: the work is done by torch itself.
//
// at::Tensor here has torch's layout (one TensorImpl pointer, torch's "undefined" singleton for none),
// so values pass between this file and main.cpp unchanged. The members both definitions may emit
// under one name (constructors, destructor, assignments, zero_) do what torch's do: the dynamic
// linker may bind either. Nothing else shares a symbol with torch: the other classes are kshim::
// classes under torch's names (aliases), the free functions have internal linkage (static).
// A kernel that uses anything not declared here, or includes another torch header (its definitions
// clash with these), does not compile; fast_build then builds it with the `core` prelude.
#pragma once
#include <algorithm>  // what torch's headers bring in and kernels use without including it
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#ifndef KSHIM_NO_CUDA
#include <cuda.h>
#include <cuda_runtime.h>
#endif
// torch's own header-only pieces, the very definitions torch's headers use (no clash, no other header):
// c10::Half / c10::BFloat16 with their arithmetic and conversions, and the tensor accessors' templates.
// They are most of what nvcc parses here (three times: cudafe++, cicc, the host compiler), so a .cu that
// names neither leaves them out: fast_build.py defines KSHIM_NO_HALF / KSHIM_NO_ACCESSOR from its text.
#include <cstring>
#include <torch/headeronly/macros/Macros.h>
#ifndef KSHIM_NO_HALF
#include <torch/headeronly/util/Half.h>
#include <torch/headeronly/util/BFloat16.h>
#endif
#ifndef KSHIM_NO_ACCESSOR
#include <torch/headeronly/core/TensorAccessor.h>
#endif

namespace c10 {
using std::nullopt;
using std::optional;  // as torch: c10::optional is std::optional
// torch's values (torch/headeronly/core/ScalarType.h); tests/test_fast_build.py checks them
enum class ScalarType : int8_t { Byte = 0, Char = 1, Short = 2, Int = 3, Long = 4, Half = 5, Float = 6, Double = 7,
                                 ComplexHalf = 8, ComplexFloat = 9, ComplexDouble = 10, Bool = 11, BFloat16 = 15,
                                 UInt16 = 27, UInt32 = 28, UInt64 = 29 };
enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
enum class Layout : int8_t { Strided = 0 };
using DeviceIndex = int8_t;
constexpr DeviceType kCUDA = DeviceType::CUDA;
constexpr DeviceType kCPU = DeviceType::CPU;

static inline std::ostream& operator<<(std::ostream& o, ScalarType t) {  // torch's names, for messages
  switch (t) {
    case ScalarType::Byte: return o << "Byte";
    case ScalarType::Char: return o << "Char";
    case ScalarType::Short: return o << "Short";
    case ScalarType::Int: return o << "Int";
    case ScalarType::Long: return o << "Long";
    case ScalarType::Half: return o << "Half";
    case ScalarType::Float: return o << "Float";
    case ScalarType::Double: return o << "Double";
    case ScalarType::Bool: return o << "Bool";
    case ScalarType::BFloat16: return o << "BFloat16";
    case ScalarType::ComplexHalf: return o << "ComplexHalf";
    case ScalarType::ComplexFloat: return o << "ComplexFloat";
    case ScalarType::ComplexDouble: return o << "ComplexDouble";
    case ScalarType::UInt16: return o << "UInt16";
    case ScalarType::UInt32: return o << "UInt32";
    case ScalarType::UInt64: return o << "UInt64";
    default: return o << "ScalarType(" << static_cast<int>(t) << ")";
  }
}
}  // namespace c10

namespace kshim {
using c10::DeviceType;
using c10::DeviceIndex;
using c10::ScalarType;
struct Device {
  DeviceType type_ = DeviceType::CPU;
  DeviceIndex index_ = -1;
  Device() = default;
  Device(DeviceType t, DeviceIndex i = -1) : type_(t), index_(i) {}
  DeviceType type() const { return type_; }
  DeviceIndex index() const { return index_; }
  bool has_index() const { return index_ >= 0; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};
class IntArrayRef {  // a view of int64 values, like c10::ArrayRef<int64_t>
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
 public:
  IntArrayRef() = default;
  IntArrayRef(const int64_t& one) : data_(&one), size_(1) {}
  IntArrayRef(const int64_t* d, size_t n) : data_(d), size_(n) {}
  IntArrayRef(std::initializer_list<int64_t> l) : data_(l.begin()), size_(l.size()) {}
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}
  const int64_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  int64_t operator[](size_t i) const { return data_[i]; }
  int64_t front() const { return data_[0]; }
  int64_t back() const { return data_[size_ - 1]; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(data_, data_ + size_); }
  bool equals(IntArrayRef o) const { return size_ == o.size_ && std::equal(begin(), end(), o.begin()); }
};
static inline bool operator==(IntArrayRef a, IntArrayRef b) { return a.equals(b); }  // as c10::ArrayRef's
static inline bool operator!=(IntArrayRef a, IntArrayRef b) { return !a.equals(b); }

struct TensorOptions {  // what the factories below are given: dtype, device, layout
  ScalarType dtype_ = ScalarType::Float;
  Device device_;
  bool has_dtype_ = false, has_device_ = false;
  TensorOptions() = default;
  TensorOptions(ScalarType t) : dtype_(t), has_dtype_(true) {}
  TensorOptions(Device d) : device_(d), has_device_(true) {}
  TensorOptions(DeviceType t) : device_(t), has_device_(true) {}
  TensorOptions dtype(ScalarType t) const { TensorOptions o = *this; o.dtype_ = t; o.has_dtype_ = true; return o; }
  TensorOptions device(Device d) const { TensorOptions o = *this; o.device_ = d; o.has_device_ = true; return o; }
  TensorOptions device(DeviceType t, DeviceIndex i = -1) const { return device(Device(t, i)); }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }
};
}  // namespace kshim

namespace c10 {
using Device = kshim::Device;
using IntArrayRef = kshim::IntArrayRef;
using TensorOptions = kshim::TensorOptions;
static inline TensorOptions dtype(ScalarType t) { return TensorOptions(t); }
static inline TensorOptions device(Device d) { return TensorOptions(d); }
}  // namespace c10

namespace at {
using namespace c10;
class Tensor;
}  // namespace at

// Defined in cuda_prelude_shim_bridge.inc (main.cpp) with torch's own types. Only at::Tensor (the same
// layout on both sides) and plain values cross: this file's Device, TensorOptions and ScalarType are
// not torch's classes, so they travel as int8 fields.
namespace kshim {
void* undefined();
void retain(void* impl);
void release(void* impl);
int64_t dim(const at::Tensor& t);
int64_t size(const at::Tensor& t, int64_t d);
int64_t stride(const at::Tensor& t, int64_t d);
int64_t numel(const at::Tensor& t);
const int64_t* sizes(const at::Tensor& t, size_t* n);
const int64_t* strides(const at::Tensor& t, size_t* n);
int8_t scalar_type(const at::Tensor& t);
void device(const at::Tensor& t, int8_t* type, int8_t* index);
bool is_contiguous(const at::Tensor& t);
bool defined(const at::Tensor& t);
int64_t element_size(const at::Tensor& t);
void* data_ptr(const at::Tensor& t, int8_t expected);
void contiguous(const at::Tensor& t, at::Tensor* out);
void clone(const at::Tensor& t, at::Tensor* out);
void view(const at::Tensor& t, const int64_t* s, size_t n, at::Tensor* out);
void reshape(const at::Tensor& t, const int64_t* s, size_t n, at::Tensor* out);
void to_dtype(const at::Tensor& t, int8_t dtype, at::Tensor* out);
void zero_(const at::Tensor& t);
void fill_(const at::Tensor& t, double v);
void copy_(const at::Tensor& t, const at::Tensor& src);
// factories: kind 0 empty, 1 zeros, 2 ones, 3 full (value); dtype/device_type < 0: not given
void make(int kind, const int64_t* s, size_t n, int8_t dtype, int8_t device_type, int8_t device_index,
          double value, at::Tensor* out);
void make_like(int kind, const at::Tensor& t, int8_t dtype, int8_t device_type, int8_t device_index,
               double value, at::Tensor* out);
[[noreturn]] void not_implemented(const std::string& msg);  // TORCH_CHECK_NOT_IMPLEMENTED's failure
[[noreturn]] void index_error(const std::string& msg);      // TORCH_CHECK_INDEX's failure
[[noreturn]] void check_failed(const char* func, const char* file, uint32_t line, const char* cond,
                               const std::string& msg);
#ifndef KSHIM_NO_CUDA
cudaStream_t current_stream(int8_t device);
cudaDeviceProp* device_properties(int8_t device);
void cuda_check(cudaError_t err, const char* file, const char* func, uint32_t line);
int8_t exchange_device(int8_t device);
void set_device(int8_t device);
#endif
template <typename T> struct scalar_of;
template <> struct scalar_of<uint8_t> { static constexpr c10::ScalarType v = c10::ScalarType::Byte; };
template <> struct scalar_of<int8_t> { static constexpr c10::ScalarType v = c10::ScalarType::Char; };
template <> struct scalar_of<int16_t> { static constexpr c10::ScalarType v = c10::ScalarType::Short; };
template <> struct scalar_of<int32_t> { static constexpr c10::ScalarType v = c10::ScalarType::Int; };
template <> struct scalar_of<int64_t> { static constexpr c10::ScalarType v = c10::ScalarType::Long; };
template <> struct scalar_of<float> { static constexpr c10::ScalarType v = c10::ScalarType::Float; };
template <> struct scalar_of<double> { static constexpr c10::ScalarType v = c10::ScalarType::Double; };
template <> struct scalar_of<bool> { static constexpr c10::ScalarType v = c10::ScalarType::Bool; };
#ifndef KSHIM_NO_HALF
template <> struct scalar_of<c10::Half> { static constexpr c10::ScalarType v = c10::ScalarType::Half; };
template <> struct scalar_of<c10::BFloat16> { static constexpr c10::ScalarType v = c10::ScalarType::BFloat16; };
#endif
inline std::string str() { return std::string(); }
template <typename... A> std::string str(const A&... a) {
  std::ostringstream o;
  (void)std::initializer_list<int>{((o << a), 0)...};
  return o.str();
}
}  // namespace kshim

#define TORCH_CHECK(cond, ...)                                                                           \
  do {                                                                                                   \
    if (!(cond)) ::kshim::check_failed(__func__, __FILE__, static_cast<uint32_t>(__LINE__), #cond,       \
                                       ::kshim::str(__VA_ARGS__));                                       \
  } while (0)

namespace kshim {
template <size_t N, typename index_t>
struct IndexBoundsCheck {  // ATen's at::detail::IndexBoundsCheck, failing as TORCH_CHECK_INDEX does
  IndexBoundsCheck(index_t i) {
    if (!(0 <= i && i < index_t{N}))
      index_error(str("Index ", i, " is not within bounds of a tensor of dimension ", N));
  }
};
}  // namespace kshim

namespace at {  // ATen/core/TensorAccessor.h's names over the same header-only templates
#ifndef KSHIM_NO_ACCESSOR
using torch::headeronly::DefaultPtrTraits;
#if defined(__CUDACC__) || defined(__HIPCC__)
using torch::headeronly::RestrictPtrTraits;
#endif
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
using TensorAccessorBase = torch::headeronly::detail::TensorAccessorBase<IntArrayRef, T, N, PtrTraits, index_t>;
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
using TensorAccessor = torch::headeronly::detail::TensorAccessor<IntArrayRef, T, N, PtrTraits, index_t>;
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
using GenericPackedTensorAccessorBase =
    torch::headeronly::detail::GenericPackedTensorAccessorBase<kshim::IndexBoundsCheck<N, index_t>, T, N, PtrTraits, index_t>;
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
using GenericPackedTensorAccessor = torch::headeronly::detail::GenericPackedTensorAccessor<
    TensorAccessor<T, N - 1, PtrTraits, index_t>, kshim::IndexBoundsCheck<N, index_t>, T, N, PtrTraits, index_t>;
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
using PackedTensorAccessor32 = GenericPackedTensorAccessor<T, N, PtrTraits, int32_t>;
template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
using PackedTensorAccessor64 = GenericPackedTensorAccessor<T, N, PtrTraits, int64_t>;
#endif

template <typename T> struct OpMathType { using type = T; };  // ATen/OpMathType.h, for the types declared here
#ifndef KSHIM_NO_HALF
template <> struct OpMathType<c10::Half> { using type = float; };
template <> struct OpMathType<c10::BFloat16> { using type = float; };
#endif
template <typename T> using opmath_type = typename OpMathType<T>::type;

class Tensor {
  void* impl_;  // torch's intrusive_ptr<TensorImpl>: the pointer, never null (the undefined singleton)
  template <typename F> static Tensor made(F f) { Tensor t; f(&t); return t; }
 public:
  Tensor() : impl_(kshim::undefined()) {}
  Tensor(const Tensor& o) : impl_(o.impl_) { kshim::retain(impl_); }
  Tensor(Tensor&& o) noexcept : impl_(o.impl_) { o.impl_ = kshim::undefined(); }
  ~Tensor() { kshim::release(impl_); }
  Tensor& operator=(const Tensor& o) & { Tensor(o).swap(*this); return *this; }
  Tensor& operator=(Tensor&& o) & noexcept { Tensor(std::move(o)).swap(*this); return *this; }
  void swap(Tensor& o) noexcept { std::swap(impl_, o.impl_); }

  bool defined() const { return kshim::defined(*this); }
  int64_t dim() const { return kshim::dim(*this); }
  int64_t ndimension() const { return dim(); }
  int64_t size(int64_t d) const { return kshim::size(*this, d); }
  int64_t stride(int64_t d) const { return kshim::stride(*this, d); }
  int64_t numel() const { return kshim::numel(*this); }
  IntArrayRef sizes() const { size_t n; const int64_t* p = kshim::sizes(*this, &n); return IntArrayRef(p, n); }
  IntArrayRef strides() const { size_t n; const int64_t* p = kshim::strides(*this, &n); return IntArrayRef(p, n); }
  ScalarType scalar_type() const { return static_cast<ScalarType>(kshim::scalar_type(*this)); }
  ScalarType dtype() const { return scalar_type(); }
  Device device() const { int8_t t, i; kshim::device(*this, &t, &i); return Device(static_cast<DeviceType>(t), i); }
  int64_t get_device() const { Device d = device(); return d.is_cuda() ? d.index() : -1; }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_contiguous() const { return kshim::is_contiguous(*this); }
  int64_t element_size() const { return kshim::element_size(*this); }
  TensorOptions options() const { return TensorOptions(scalar_type()).device(device()); }
  void* data_ptr() const { return kshim::data_ptr(*this, -1); }
  template <typename T> T* data_ptr() const { return static_cast<T*>(kshim::data_ptr(*this, static_cast<int8_t>(kshim::scalar_of<T>::v))); }
  template <typename T> const T* const_data_ptr() const { return data_ptr<T>(); }
  template <typename T> T* mutable_data_ptr() const { return data_ptr<T>(); }
#ifndef KSHIM_NO_ACCESSOR
  // TensorBase's accessors: the same checks, messages and templates (rvalues deleted, as there)
  template <typename T, size_t N> TensorAccessor<T, N> accessor() const& {
    static_assert(N > 0, "accessor is used for indexing tensor, for scalars use *data_ptr<T>()");
    TORCH_CHECK(dim() == N, "TensorAccessor expected ", N, " dims but tensor has ", dim());
    return TensorAccessor<T, N>(const_cast<T*>(data_ptr<std::remove_const_t<T>>()), sizes().data(), strides().data());
  }
  template <typename T, size_t N> TensorAccessor<T, N> accessor() && = delete;
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
  GenericPackedTensorAccessor<T, N, PtrTraits, index_t> generic_packed_accessor() const& {
    static_assert(N > 0, "accessor is used for indexing tensor, for scalars use *data_ptr<T>()");
    TORCH_CHECK(dim() == N, "TensorAccessor expected ", N, " dims but tensor has ", dim());
    T* ptr = const_cast<T*>(data_ptr<std::remove_const_t<T>>());
    return GenericPackedTensorAccessor<T, N, PtrTraits, index_t>(static_cast<typename PtrTraits<T>::PtrType>(ptr),
                                                                  sizes().data(), strides().data());
  }
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits, typename index_t = int64_t>
  GenericPackedTensorAccessor<T, N> generic_packed_accessor() && = delete;
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
  PackedTensorAccessor32<T, N, PtrTraits> packed_accessor32() const& {
    TORCH_CHECK(numel() <= static_cast<int64_t>(std::numeric_limits<int32_t>::max()),
                "numel needs to be smaller than int32_t max; otherwise, please use packed_accessor64");
    return generic_packed_accessor<T, N, PtrTraits, int32_t>();
  }
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
  PackedTensorAccessor32<T, N, PtrTraits> packed_accessor32() && = delete;
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
  PackedTensorAccessor64<T, N, PtrTraits> packed_accessor64() const& {
    return generic_packed_accessor<T, N, PtrTraits, int64_t>();
  }
  template <typename T, size_t N, template <typename U> class PtrTraits = DefaultPtrTraits>
  PackedTensorAccessor64<T, N, PtrTraits> packed_accessor64() && = delete;
#endif
  Tensor contiguous() const { return made([&](Tensor* o) { kshim::contiguous(*this, o); }); }
  Tensor clone() const { return made([&](Tensor* o) { kshim::clone(*this, o); }); }
  Tensor view(IntArrayRef s) const { return made([&](Tensor* o) { kshim::view(*this, s.data(), s.size(), o); }); }
  Tensor reshape(IntArrayRef s) const { return made([&](Tensor* o) { kshim::reshape(*this, s.data(), s.size(), o); }); }
  Tensor to(ScalarType d) const { return made([&](Tensor* o) { kshim::to_dtype(*this, static_cast<int8_t>(d), o); }); }
  const Tensor& zero_() const { kshim::zero_(*this); return *this; }
  const Tensor& fill_(double v) const { kshim::fill_(*this, v); return *this; }
  const Tensor& copy_(const Tensor& src) const { kshim::copy_(*this, src); return *this; }
};

namespace detail {
static inline int8_t dt(const TensorOptions& o) { return o.has_dtype_ ? static_cast<int8_t>(o.dtype_) : -1; }
static inline int8_t dv(const TensorOptions& o) { return o.has_device_ ? static_cast<int8_t>(o.device_.type_) : -1; }
static inline Tensor make(int kind, IntArrayRef s, const TensorOptions& o, double v) {
  Tensor t;
  kshim::make(kind, s.data(), s.size(), dt(o), dv(o), o.device_.index_, v, &t);
  return t;
}
static inline Tensor make_like(int kind, const Tensor& x, const TensorOptions& o, double v) {
  Tensor t;
  kshim::make_like(kind, x, dt(o), dv(o), o.device_.index_, v, &t);
  return t;
}
}  // namespace detail
static inline std::optional<Device> device_of(const Tensor& t) {  // ATen/DeviceGuard.h's
  if (t.defined()) return t.device();
  return std::nullopt;
}
static inline Tensor empty(IntArrayRef s, TensorOptions o = {}) { return detail::make(0, s, o, 0); }
static inline Tensor zeros(IntArrayRef s, TensorOptions o = {}) { return detail::make(1, s, o, 0); }
static inline Tensor ones(IntArrayRef s, TensorOptions o = {}) { return detail::make(2, s, o, 0); }
static inline Tensor full(IntArrayRef s, double v, TensorOptions o = {}) { return detail::make(3, s, o, v); }
static inline Tensor empty_like(const Tensor& x, TensorOptions o = {}) { return detail::make_like(0, x, o, 0); }
static inline Tensor zeros_like(const Tensor& x, TensorOptions o = {}) { return detail::make_like(1, x, o, 0); }
static inline Tensor ones_like(const Tensor& x, TensorOptions o = {}) { return detail::make_like(2, x, o, 0); }
static inline Tensor full_like(const Tensor& x, double v, TensorOptions o = {}) { return detail::make_like(3, x, o, v); }

constexpr auto kByte = ScalarType::Byte;
constexpr auto kChar = ScalarType::Char;
constexpr auto kShort = ScalarType::Short;
constexpr auto kInt = ScalarType::Int;
constexpr auto kLong = ScalarType::Long;
constexpr auto kHalf = ScalarType::Half;
constexpr auto kFloat = ScalarType::Float;
constexpr auto kDouble = ScalarType::Double;
constexpr auto kBool = ScalarType::Bool;
constexpr auto kBFloat16 = ScalarType::BFloat16;
constexpr auto kUInt16 = ScalarType::UInt16;
constexpr auto kUInt32 = ScalarType::UInt32;
constexpr auto kUInt64 = ScalarType::UInt64;
}  // namespace at

#ifndef KSHIM_NO_CUDA
namespace kshim {
struct Stream {  // c10::cuda::CUDAStream, as far as kernels use it
  cudaStream_t s_;
  operator cudaStream_t() const { return s_; }
  cudaStream_t stream() const { return s_; }
};
class DeviceGuard {  // c10::cuda::CUDAGuard: this device until the end of the scope
  int8_t prev_;
 public:
  explicit DeviceGuard(c10::Device d) : prev_(exchange_device(d.index())) {}
  explicit DeviceGuard(int8_t index) : prev_(exchange_device(index)) {}
  ~DeviceGuard() { set_device(prev_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
};
class OptionalDeviceGuard {  // c10::cuda::OptionalCUDAGuard: a device only when given one
  int8_t prev_ = 0;
  bool set_ = false;
 public:
  OptionalDeviceGuard() = default;
  explicit OptionalDeviceGuard(c10::Device d) : prev_(exchange_device(d.index())), set_(true) {}
  explicit OptionalDeviceGuard(std::optional<c10::Device> d) {
    if (d.has_value()) { prev_ = exchange_device(d->index()); set_ = true; }
  }
  ~OptionalDeviceGuard() { if (set_) set_device(prev_); }
  OptionalDeviceGuard(const OptionalDeviceGuard&) = delete;
  OptionalDeviceGuard& operator=(const OptionalDeviceGuard&) = delete;
};
}  // namespace kshim
namespace c10 {
namespace cuda {
using CUDAStream = kshim::Stream;
using CUDAGuard = kshim::DeviceGuard;
using OptionalCUDAGuard = kshim::OptionalDeviceGuard;
static inline CUDAStream getCurrentCUDAStream(int8_t device = -1) { return CUDAStream{kshim::current_stream(device)}; }
}  // namespace cuda
}  // namespace c10
namespace at {
namespace cuda {
using c10::cuda::CUDAStream;
using c10::cuda::CUDAGuard;
using c10::cuda::OptionalCUDAGuard;
using c10::cuda::getCurrentCUDAStream;
static inline cudaDeviceProp* getCurrentDeviceProperties() { return kshim::device_properties(-1); }
static inline cudaDeviceProp* getDeviceProperties(int8_t device) { return kshim::device_properties(device); }
}  // namespace cuda
}  // namespace at
#define C10_CUDA_CHECK(EXPR)                                                                \
  do {                                                                                      \
    const cudaError_t __err = EXPR;                                                         \
    ::kshim::cuda_check(__err, __FILE__, __func__, static_cast<uint32_t>(__LINE__));        \
  } while (0)
#define AT_CUDA_CHECK(EXPR) C10_CUDA_CHECK(EXPR)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())
#endif


// ATen/Dispatch.h's switch: the same cases in the same order, scalar_t torch's C++ type, the same
// NotImplementedError text for a type not listed
namespace kshim {
template <c10::ScalarType S> struct cpp_type;
template <> struct cpp_type<c10::ScalarType::Byte> { using t = uint8_t; };
template <> struct cpp_type<c10::ScalarType::Char> { using t = int8_t; };
template <> struct cpp_type<c10::ScalarType::Short> { using t = int16_t; };
template <> struct cpp_type<c10::ScalarType::Int> { using t = int32_t; };
template <> struct cpp_type<c10::ScalarType::Long> { using t = int64_t; };
#ifndef KSHIM_NO_HALF
template <> struct cpp_type<c10::ScalarType::Half> { using t = c10::Half; };
#endif
template <> struct cpp_type<c10::ScalarType::Float> { using t = float; };
template <> struct cpp_type<c10::ScalarType::Double> { using t = double; };
template <> struct cpp_type<c10::ScalarType::Bool> { using t = bool; };
#ifndef KSHIM_NO_HALF
template <> struct cpp_type<c10::ScalarType::BFloat16> { using t = c10::BFloat16; };
#endif
}  // namespace kshim
#define AT_PRIVATE_CASE_TYPE_USING_HINT(enum_type, HINT, ...)                     \
  case enum_type: {                                                               \
    using HINT [[maybe_unused]] = typename ::kshim::cpp_type<enum_type>::t;      \
    return __VA_ARGS__();                                                         \
  }
#define AT_DISPATCH_CASE(enum_type, ...) AT_PRIVATE_CASE_TYPE_USING_HINT(enum_type, scalar_t, __VA_ARGS__)
#define AT_DISPATCH_SWITCH(TYPE, NAME, ...)                                                         \
  [&] {                                                                                             \
    const auto& the_type = TYPE;                                                                    \
    constexpr const char* at_dispatch_name = NAME;                                                  \
    ::c10::ScalarType _st = the_type;                                                               \
    switch (_st) {                                                                                  \
      __VA_ARGS__                                                                                   \
      default:                                                                                      \
        ::kshim::not_implemented(::kshim::str('"', at_dispatch_name, "\" not implemented for '", _st, "'")); \
    }                                                                                               \
  }()
#define AT_DISPATCH_CASE_FLOATING_TYPES(...) \
  AT_DISPATCH_CASE(at::ScalarType::Double, __VA_ARGS__) AT_DISPATCH_CASE(at::ScalarType::Float, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...) AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__))
#define AT_DISPATCH_CASE_FLOATING_TYPES_AND_HALF(...) \
  AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__) AT_DISPATCH_CASE(at::ScalarType::Half, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES_AND_HALF(TYPE, NAME, ...) \
  AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_FLOATING_TYPES_AND_HALF(__VA_ARGS__))
#define AT_DISPATCH_CASE_REDUCED_FLOATING_TYPES(...) \
  AT_DISPATCH_CASE(at::ScalarType::Half, __VA_ARGS__) AT_DISPATCH_CASE(at::ScalarType::BFloat16, __VA_ARGS__)
#define AT_DISPATCH_REDUCED_FLOATING_TYPES(TYPE, NAME, ...) \
  AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_REDUCED_FLOATING_TYPES(__VA_ARGS__))
#define AT_DISPATCH_CASE_FLOATING_TYPES_AND(SCALARTYPE, ...) \
  AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__) AT_DISPATCH_CASE(SCALARTYPE, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES_AND(SCALARTYPE, TYPE, NAME, ...) \
  AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_FLOATING_TYPES_AND(SCALARTYPE, __VA_ARGS__))
#define AT_DISPATCH_CASE_FLOATING_TYPES_AND2(SCALARTYPE1, SCALARTYPE2, ...) \
  AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__) AT_DISPATCH_CASE(SCALARTYPE1, __VA_ARGS__) AT_DISPATCH_CASE(SCALARTYPE2, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES_AND2(SCALARTYPE1, SCALARTYPE2, TYPE, NAME, ...) \
  AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_FLOATING_TYPES_AND2(SCALARTYPE1, SCALARTYPE2, __VA_ARGS__))
#define AT_DISPATCH_CASE_INTEGRAL_TYPES(...)                                                              \
  AT_DISPATCH_CASE(at::ScalarType::Byte, __VA_ARGS__) AT_DISPATCH_CASE(at::ScalarType::Char, __VA_ARGS__) \
  AT_DISPATCH_CASE(at::ScalarType::Int, __VA_ARGS__) AT_DISPATCH_CASE(at::ScalarType::Long, __VA_ARGS__)  \
  AT_DISPATCH_CASE(at::ScalarType::Short, __VA_ARGS__)
#define AT_DISPATCH_INTEGRAL_TYPES(TYPE, NAME, ...) AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_INTEGRAL_TYPES(__VA_ARGS__))
#define AT_DISPATCH_CASE_ALL_TYPES(...) AT_DISPATCH_CASE_INTEGRAL_TYPES(__VA_ARGS__) AT_DISPATCH_CASE_FLOATING_TYPES(__VA_ARGS__)
#define AT_DISPATCH_ALL_TYPES(TYPE, NAME, ...) AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_ALL_TYPES(__VA_ARGS__))
#define AT_DISPATCH_CASE_ALL_TYPES_AND(SCALARTYPE, ...) AT_DISPATCH_CASE_ALL_TYPES(__VA_ARGS__) AT_DISPATCH_CASE(SCALARTYPE, __VA_ARGS__)
#define AT_DISPATCH_ALL_TYPES_AND(SCALARTYPE, TYPE, NAME, ...) \
  AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_ALL_TYPES_AND(SCALARTYPE, __VA_ARGS__))
#define AT_DISPATCH_CASE_ALL_TYPES_AND2(SCALARTYPE1, SCALARTYPE2, ...) \
  AT_DISPATCH_CASE_ALL_TYPES(__VA_ARGS__) AT_DISPATCH_CASE(SCALARTYPE1, __VA_ARGS__) AT_DISPATCH_CASE(SCALARTYPE2, __VA_ARGS__)
#define AT_DISPATCH_ALL_TYPES_AND2(SCALARTYPE1, SCALARTYPE2, TYPE, NAME, ...) \
  AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE_ALL_TYPES_AND2(SCALARTYPE1, SCALARTYPE2, __VA_ARGS__))

#include "cuda_torch_names.h"  // the torch:: names, as the other preludes give them
