// Reduction, scaling and conversion kernels of package kernels/cuda.
//
// Compiled to PTX by `go generate` (the directive is in doc.go) and embedded in the Go
// package; the driver JIT-compiles the PTX for the GPU at load time. Keep
// the semantics bit-for-bit equal to the CPU loops of package kernels:
//
//   - float Sum and Prod are a single IEEE operation in the element's working
//     precision (float32 for f32, f16 and bf16; float64 for f64), rounded to
//     nearest even; no flush-to-zero, no fused multiply-add;
//   - float Min and Max follow Go's built-in min and max: a NaN operand gives
//     a NaN, and -0 is smaller than +0;
//   - f16 and bf16 are widened to float32 and narrowed back with the same
//     bit manipulations as kernels/half.go (round to nearest even, overflow
//     to Inf, gradual underflow, NaNs made quiet keeping the top payload);
//   - integer Sum and Prod wrap (computed in unsigned arithmetic);
//   - integer Scale is rint(double(x) * factor) saturated to the range.
//
// Every kernel takes its count as an unsigned long long and its factor as a
// double: the Go side passes every scalar as an 8-byte value.
//
// Memory access: each kernel walks its buffers with a grid-stride loop over
// 16-byte vectors (uint4) when the pointers allow it, after a scalar head
// that brings the first pointer to a 16-byte boundary; elements after the
// last whole vector form a scalar tail. When the pointers are misaligned
// relative to each other, the whole range is done with scalar accesses.

#include <stdint.h>

typedef unsigned long long u64;

// ---------------------------------------------------------------------------
// Half-precision conversions (mirror kernels/half.go).

__device__ __forceinline__ float widen_f16(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t rest = (uint32_t)(h & 0x7fffu) << 13;
    if (rest >= (0x7c00u << 13)) {  // Inf or NaN
        if (rest != (0x7c00u << 13)) {
            rest |= 0x00400000u;  // quiet the NaN
        }
        return __uint_as_float(sign | 0x7f800000u | rest);
    }
    // Rebias by multiplying with 2^112; this also normalises subnormals.
    return __uint_as_float(sign | __float_as_uint(__fmul_rn(__uint_as_float(rest), 0x1p112f)));
}

// narrow_f16_rare narrows a non-negative float32 (as bits) that is NaN,
// infinite, too large, or below the normal binary16 range. It is kept out of
// line: it is rarely taken and would bloat every unrolled loop.
__device__ __noinline__ uint16_t narrow_f16_rare(uint32_t abs) {
    const uint32_t overflow = (127u + 16u) << 23;  // 2^16: Inf from here
    const uint32_t half = (127u - 1u) << 23;       // 0.5
    if (abs > 0x7f800000u) {  // NaN: keep the top payload bits, make it quiet
        return (uint16_t)(0x7e00u | ((abs >> 13) & 0x3ffu));
    }
    if (abs >= overflow) {
        return 0x7c00u;
    }
    // Subnormal or zero: adding 0.5 aligns the binary16 subnormal grid with
    // the float32 ulp of 0.5, so the FPU rounds to nearest even for us.
    float sum = __fadd_rn(__uint_as_float(abs), __uint_as_float(half));
    return (uint16_t)(__float_as_uint(sum) - half);
}

__device__ __forceinline__ uint16_t narrow_f16(float f) {
    const uint32_t minNorm = (127u - 14u) << 23;  // 2^-14: smallest normal binary16
    const uint32_t rebias = (127u - 15u) << 23;
    uint32_t b = __float_as_uint(f);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
    uint32_t abs = b & 0x7fffffffu;
    if (abs - minNorm < (30u << 23)) {  // inside [2^-14, 2^16): a normal result
        // Round half to even on the 13 dropped bits; a carry out of the
        // mantissa bumps the exponent (up to Inf).
        abs = abs - rebias + 0xfffu + ((abs >> 13) & 1u);
        return sign | (uint16_t)(abs >> 13);
    }
    return sign | narrow_f16_rare(abs);
}

__device__ __forceinline__ float widen_bf16(uint16_t h) {
    return __uint_as_float((uint32_t)h << 16);
}

__device__ __forceinline__ uint16_t narrow_bf16(float f) {
    uint32_t b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) {  // NaN: rounding could make it Inf
        return (uint16_t)(b >> 16) | 0x0040u;
    }
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

// ---------------------------------------------------------------------------
// Element types. Each has a storage type S (what sits in memory) and a
// working type W (what arithmetic is done in), with load and store between
// them.

struct F32 {
    typedef float S;
    typedef float W;
    static __device__ __forceinline__ W load(S x) { return x; }
    static __device__ __forceinline__ S store(W x) { return x; }
};
struct F64 {
    typedef double S;
    typedef double W;
    static __device__ __forceinline__ W load(S x) { return x; }
    static __device__ __forceinline__ S store(W x) { return x; }
};
struct F16 {
    typedef uint16_t S;
    typedef float W;
    static __device__ __forceinline__ W load(S x) { return widen_f16(x); }
    static __device__ __forceinline__ S store(W x) { return narrow_f16(x); }
};
struct BF16 {
    typedef uint16_t S;
    typedef float W;
    static __device__ __forceinline__ W load(S x) { return widen_bf16(x); }
    static __device__ __forceinline__ S store(W x) { return narrow_bf16(x); }
};
struct I32 {
    typedef int32_t S;
    typedef int32_t W;
    typedef uint32_t U;
    static __device__ __forceinline__ W load(S x) { return x; }
    static __device__ __forceinline__ S store(W x) { return x; }
    static __device__ __forceinline__ S lo() { return (int32_t)0x80000000u; }
    static __device__ __forceinline__ S hi() { return 0x7fffffff; }
};
struct I64 {
    typedef int64_t S;
    typedef int64_t W;
    typedef uint64_t U;
    static __device__ __forceinline__ W load(S x) { return x; }
    static __device__ __forceinline__ S store(W x) { return x; }
    static __device__ __forceinline__ S lo() { return (int64_t)0x8000000000000000ull; }
    static __device__ __forceinline__ S hi() { return 0x7fffffffffffffffll; }
};
struct U8 {
    typedef uint8_t S;
    typedef uint8_t W;
    typedef uint8_t U;
    static __device__ __forceinline__ W load(S x) { return x; }
    static __device__ __forceinline__ S store(W x) { return x; }
    static __device__ __forceinline__ S lo() { return 0; }
    static __device__ __forceinline__ S hi() { return 255; }
};

// ---------------------------------------------------------------------------
// Operators on working values.

__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
// Integers wrap: compute in the unsigned type of the same width.
__device__ __forceinline__ int32_t add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
__device__ __forceinline__ int64_t add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
__device__ __forceinline__ uint8_t add(uint8_t a, uint8_t b) { return (uint8_t)(a + b); }
__device__ __forceinline__ int32_t mul(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }
__device__ __forceinline__ int64_t mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
__device__ __forceinline__ uint8_t mul(uint8_t a, uint8_t b) { return (uint8_t)((uint32_t)a * (uint32_t)b); }

// Go's min and max on floats: a NaN in either operand wins; of two zeros
// min prefers -0 and max prefers +0 (by OR-ing / AND-ing the sign bits).
__device__ __forceinline__ float fmin_go(float x, float y) {
    if (y != y || y < x) return y;
    if (x != x || x < y || x != 0.0f) return x;
    return __uint_as_float(__float_as_uint(x) | __float_as_uint(y));
}
__device__ __forceinline__ float fmax_go(float x, float y) {
    if (y != y || y > x) return y;
    if (x != x || x > y || x != 0.0f) return x;
    return __uint_as_float(__float_as_uint(x) & __float_as_uint(y));
}
__device__ __forceinline__ double fmin_go(double x, double y) {
    if (y != y || y < x) return y;
    if (x != x || x < y || x != 0.0) return x;
    return __longlong_as_double(__double_as_longlong(x) | __double_as_longlong(y));
}
__device__ __forceinline__ double fmax_go(double x, double y) {
    if (y != y || y > x) return y;
    if (x != x || x > y || x != 0.0) return x;
    return __longlong_as_double(__double_as_longlong(x) & __double_as_longlong(y));
}
template <typename W> __device__ __forceinline__ W imin(W a, W b) { return b < a ? b : a; }
template <typename W> __device__ __forceinline__ W imax(W a, W b) { return b > a ? b : a; }

__device__ __forceinline__ float mn(float a, float b) { return fmin_go(a, b); }
__device__ __forceinline__ double mn(double a, double b) { return fmin_go(a, b); }
__device__ __forceinline__ int32_t mn(int32_t a, int32_t b) { return imin(a, b); }
__device__ __forceinline__ int64_t mn(int64_t a, int64_t b) { return imin(a, b); }
__device__ __forceinline__ uint8_t mn(uint8_t a, uint8_t b) { return imin(a, b); }
__device__ __forceinline__ float mx(float a, float b) { return fmax_go(a, b); }
__device__ __forceinline__ double mx(double a, double b) { return fmax_go(a, b); }
__device__ __forceinline__ int32_t mx(int32_t a, int32_t b) { return imax(a, b); }
__device__ __forceinline__ int64_t mx(int64_t a, int64_t b) { return imax(a, b); }
__device__ __forceinline__ uint8_t mx(uint8_t a, uint8_t b) { return imax(a, b); }

struct OpSum {
    template <typename W> static __device__ __forceinline__ W apply(W a, W b) { return add(a, b); }
};
struct OpMin {
    template <typename W> static __device__ __forceinline__ W apply(W a, W b) { return mn(a, b); }
};
struct OpMax {
    template <typename W> static __device__ __forceinline__ W apply(W a, W b) { return mx(a, b); }
};
struct OpProd {
    template <typename W> static __device__ __forceinline__ W apply(W a, W b) { return mul(a, b); }
};

// ---------------------------------------------------------------------------
// Element-wise functors used by the traversal below.

// Reduce: d = op(d, s).
template <typename T, typename Op> struct Reducer {
    typedef typename T::S S;
    __device__ __forceinline__ S operator()(S d, S s) const {
        return T::store(Op::apply(T::load(d), T::load(s)));
    }
};

// Scale of float types: x * factor in the working precision.
template <typename T> struct FloatScaler {
    typedef typename T::S S;
    typename T::W factor;
    __device__ __forceinline__ S operator()(S x) const { return T::store(mul(T::load(x), factor)); }
};

// Scale of integer types: round half to even, saturate (kernels/scale.go).
// (double)T::hi() is exact for int32 and uint8 and is 2^63 for int64, so the
// comparisons pick exactly the products that do not fit.
template <typename T> struct IntScaler {
    typedef typename T::S S;
    double factor;
    __device__ __forceinline__ S operator()(S x) const {
        double v = rint(__dmul_rn((double)x, factor));
        if (v >= (double)T::hi()) return T::hi();
        if (v <= (double)T::lo()) return T::lo();
        return (S)v;
    }
};

// ---------------------------------------------------------------------------
// Traversal. V elements of S make one 16-byte vector.

template <typename S> struct Vec {
    static const int V = 16 / sizeof(S);
    union U {
        uint4 v;
        S e[V];
    };
};

__device__ __forceinline__ u64 thread_index() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ u64 thread_count() { return (u64)gridDim.x * blockDim.x; }

// Number of elements of size sz before p reaches a 16-byte boundary.
__device__ __forceinline__ u64 head_elems(const void *p, unsigned sz) {
    return ((16u - ((uintptr_t)p & 15u)) & 15u) / sz;
}

// Unrolling of the vector loops: the loads of Unroll<S>::N vectors are
// issued before any store, which keeps more bytes in flight per thread. The
// 1- and 2-byte types, whose per-element work is larger (half conversions),
// unroll less to keep the code small.
template <typename S> struct Unroll {
    static const int N = sizeof(S) >= 4 ? 4 : 2;
};

// binary_map applies d[i] = f(d[i], s[i]) for i < n.
template <typename S, typename F>
__device__ __forceinline__ void binary_map(S *d, const S *s, u64 n, F f) {
    typedef typename Vec<S>::U VU;
    const int V = Vec<S>::V;
    const int UNROLL = Unroll<S>::N;
    const u64 tid = thread_index(), stride = thread_count();
    u64 head = head_elems(d, sizeof(S));
    if ((((uintptr_t)d ^ (uintptr_t)s) & 15u) != 0 || head >= n || n - head < (u64)V) {
        for (u64 i = tid; i < n; i += stride) d[i] = f(d[i], s[i]);
        return;
    }
    if (tid < head) d[tid] = f(d[tid], s[tid]);
    uint4 *dv = (uint4 *)(d + head);
    const uint4 *sv = (const uint4 *)(s + head);
    const u64 nv = (n - head) / V;
    u64 i = tid;
    for (; i + (UNROLL - 1) * stride < nv; i += UNROLL * stride) {
        VU a[UNROLL], b[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            a[u].v = dv[i + u * stride];
            b[u].v = sv[i + u * stride];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
#pragma unroll
            for (int k = 0; k < V; k++) a[u].e[k] = f(a[u].e[k], b[u].e[k]);
            dv[i + u * stride] = a[u].v;
        }
    }
    for (; i < nv; i += stride) {
        VU a, b;
        a.v = dv[i];
        b.v = sv[i];
#pragma unroll
        for (int k = 0; k < V; k++) a.e[k] = f(a.e[k], b.e[k]);
        dv[i] = a.v;
    }
    const u64 done = head + nv * V;
    if (tid < n - done) d[done + tid] = f(d[done + tid], s[done + tid]);
}

// unary_map applies d[i] = f(d[i]) for i < n.
template <typename S, typename F>
__device__ __forceinline__ void unary_map(S *d, u64 n, F f) {
    typedef typename Vec<S>::U VU;
    const int V = Vec<S>::V;
    const int UNROLL = Unroll<S>::N;
    const u64 tid = thread_index(), stride = thread_count();
    u64 head = head_elems(d, sizeof(S));
    if (head >= n || n - head < (u64)V) {
        for (u64 i = tid; i < n; i += stride) d[i] = f(d[i]);
        return;
    }
    if (tid < head) d[tid] = f(d[tid]);
    uint4 *dv = (uint4 *)(d + head);
    const u64 nv = (n - head) / V;
    u64 i = tid;
    for (; i + (UNROLL - 1) * stride < nv; i += UNROLL * stride) {
        VU a[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) a[u].v = dv[i + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
#pragma unroll
            for (int k = 0; k < V; k++) a[u].e[k] = f(a[u].e[k]);
            dv[i + u * stride] = a[u].v;
        }
    }
    for (; i < nv; i += stride) {
        VU a;
        a.v = dv[i];
#pragma unroll
        for (int k = 0; k < V; k++) a.e[k] = f(a.e[k]);
        dv[i] = a.v;
    }
    const u64 done = head + nv * V;
    if (tid < n - done) d[done + tid] = f(d[done + tid]);
}

// Vector types of the conversions: 4 floats or 4 halves.
template <typename S> struct Vec4;
template <> struct Vec4<float> { typedef uint4 T; };
template <> struct Vec4<uint16_t> { typedef uint2 T; };

// convert_map converts n elements: d[i] = f(s[i]), where one of D and S is
// float and the other a 2-byte half type. Vectors are 4 elements: 16 bytes
// of float and 8 bytes of half.
template <typename D, typename S, typename F>
__device__ __forceinline__ void convert_map(D *d, const S *s, u64 n, F f) {
    const u64 tid = thread_index(), stride = thread_count();
    // Align the float side to 16 bytes; the half side must then be at 8.
    const void *wide = sizeof(D) == 4 ? (const void *)d : (const void *)s;
    const void *narrow = sizeof(D) == 4 ? (const void *)s : (const void *)d;
    u64 head = head_elems(wide, 4);
    if (head >= n || n - head < 4 || (((uintptr_t)narrow + 2 * head) & 7u) != 0) {
        for (u64 i = tid; i < n; i += stride) d[i] = f(s[i]);
        return;
    }
    if (tid < head) d[tid] = f(s[tid]);
    const u64 nv = (n - head) / 4;
    for (u64 i = tid; i < nv; i += stride) {
        union {
            typename Vec4<S>::T v;
            S e[4];
        } in;
        union {
            typename Vec4<D>::T v;
            D e[4];
        } out;
        in.v = ((const typename Vec4<S>::T *)(s + head))[i];
#pragma unroll
        for (int k = 0; k < 4; k++) out.e[k] = f(in.e[k]);
        ((typename Vec4<D>::T *)(d + head))[i] = out.v;
    }
    const u64 done = head + nv * 4;
    if (tid < n - done) d[done + tid] = f(s[done + tid]);
}

// ---------------------------------------------------------------------------
// Entry points. Names: reduce_<dtype>_<op>, scale_<dtype>, <from>_to_<to>.

#define REDUCE(name, T, Op)                                                              \
    extern "C" __global__ void reduce_##name(T::S *d, const T::S *s, u64 n) {            \
        binary_map(d, s, n, Reducer<T, Op>());                                           \
    }
#define REDUCE_ALL(name, T)        \
    REDUCE(name##_sum, T, OpSum)   \
    REDUCE(name##_min, T, OpMin)   \
    REDUCE(name##_max, T, OpMax)   \
    REDUCE(name##_prod, T, OpProd)

REDUCE_ALL(f32, F32)
REDUCE_ALL(f64, F64)
REDUCE_ALL(f16, F16)
REDUCE_ALL(bf16, BF16)
REDUCE_ALL(i32, I32)
REDUCE_ALL(i64, I64)
REDUCE_ALL(u8, U8)

// Float scaling: the factor is rounded to the working precision first, as
// the CPU does (float32(factor) for f32, f16 and bf16).
#define SCALE_FLOAT(name, T)                                                   \
    extern "C" __global__ void scale_##name(T::S *d, u64 n, double factor) {   \
        FloatScaler<T> f;                                                      \
        f.factor = (T::W)factor;                                               \
        unary_map(d, n, f);                                                    \
    }
#define SCALE_INT(name, T)                                                     \
    extern "C" __global__ void scale_##name(T::S *d, u64 n, double factor) {   \
        IntScaler<T> f;                                                        \
        f.factor = factor;                                                     \
        unary_map(d, n, f);                                                    \
    }

SCALE_FLOAT(f32, F32)
SCALE_FLOAT(f64, F64)
SCALE_FLOAT(f16, F16)
SCALE_FLOAT(bf16, BF16)
SCALE_INT(i32, I32)
SCALE_INT(i64, I64)
SCALE_INT(u8, U8)

struct ToF16 {
    __device__ __forceinline__ uint16_t operator()(float x) const { return narrow_f16(x); }
};
struct FromF16 {
    __device__ __forceinline__ float operator()(uint16_t x) const { return widen_f16(x); }
};
struct ToBF16 {
    __device__ __forceinline__ uint16_t operator()(float x) const { return narrow_bf16(x); }
};
struct FromBF16 {
    __device__ __forceinline__ float operator()(uint16_t x) const { return widen_bf16(x); }
};

extern "C" __global__ void f32_to_f16(uint16_t *d, const float *s, u64 n) { convert_map(d, s, n, ToF16()); }
extern "C" __global__ void f16_to_f32(float *d, const uint16_t *s, u64 n) { convert_map(d, s, n, FromF16()); }
extern "C" __global__ void f32_to_bf16(uint16_t *d, const float *s, u64 n) { convert_map(d, s, n, ToBF16()); }
extern "C" __global__ void bf16_to_f32(float *d, const uint16_t *s, u64 n) { convert_map(d, s, n, FromBF16()); }
