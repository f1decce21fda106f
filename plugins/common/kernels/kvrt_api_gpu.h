/*
 * The portable kernel dialect, CUDA and HIP flavour (one header: HIP mirrors
 * the CUDA spellings, only the fp16 header differs).
 */
#if defined(__HIP__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#else
#include <cuda_fp16.h>
#endif

/* Hidden: the module exports only kvrt_plugin_entry; launches go through the
 * kernel table, never through dlsym. */
#define KVRT_KERNEL extern "C" __global__ __attribute__((visibility("hidden"))) void
#define KVRT_GLOBAL
#define KVRT_LOCAL
#define KVRT_FN static __device__ __forceinline__

typedef unsigned char kvrt_u8;
typedef unsigned short kvrt_u16;
typedef unsigned int kvrt_u32;
typedef int kvrt_i32;
typedef unsigned long long kvrt_u64;
typedef long long kvrt_i64;
typedef uint4 kvrt_u128;

#define KVRT_GROUP_ID ((kvrt_u64)blockIdx.x)
#define KVRT_NUM_GROUPS ((kvrt_u64)gridDim.x)
#define KVRT_LOCAL_ID ((kvrt_u32)threadIdx.x)
#define KVRT_LOCAL_SIZE ((kvrt_u32)blockDim.x)
#define KVRT_BARRIER() __syncthreads()

#define KVRT_SHARED_PARAM
#define KVRT_SHARED_DECL extern __shared__ kvrt_u64 kvrt_shared[];

/* Butterfly exchange inside a warp/wavefront; lane groups never exceed
 * 32 work-items, and every lane of a warp reaches each exchange. */
#define KVRT_HAS_SHUFFLE 1
#if defined(__HIP__) || defined(__HIPCC__)
#define KVRT_SHFL_XOR(v, m) __shfl_xor((v), (int)(m))
#else
#define KVRT_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (int)(m))
#endif

#define KVRT_AS_FLOAT(u) __uint_as_float(u)
#define KVRT_AS_UINT(f) __float_as_uint(f)
#define KVRT_EXPF(x) expf(x)
#define KVRT_FMAXF(a, b) fmaxf((a), (b))

#define KVRT_LOAD_F16(p) __half2float(__ushort_as_half(*(const unsigned short *)(p)))
#define KVRT_STORE_F16(p, v) (*(unsigned short *)(p) = __half_as_ushort(__float2half_rn(v)))
