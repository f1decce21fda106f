/*
 * The portable kernel dialect, OpenCL C 1.2 flavour.
 *
 * The kernel bodies (kvrt_elem.h, kvrt_tokens.h, kvrt_pages.h,
 * kvrt_decode.h) are written against the macros and types below and never
 * name an API directly.  For OpenCL the build concatenates this file and the
 * bodies into one string embedded in kvrt-opencl (no #include at run time).
 */
#define KVRT_KERNEL __kernel void
#define KVRT_GLOBAL __global
#define KVRT_LOCAL __local
#define KVRT_FN static inline

typedef uchar kvrt_u8;
typedef ushort kvrt_u16;
typedef uint kvrt_u32;
typedef int kvrt_i32;
typedef ulong kvrt_u64;
typedef long kvrt_i64;
typedef uint4 kvrt_u128;

/* One-dimensional launches only: work-group index, count, work-item index. */
#define KVRT_GROUP_ID ((kvrt_u64)get_group_id(0))
#define KVRT_NUM_GROUPS ((kvrt_u64)get_num_groups(0))
#define KVRT_LOCAL_ID ((kvrt_u32)get_local_id(0))
#define KVRT_LOCAL_SIZE ((kvrt_u32)get_local_size(0))
#define KVRT_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)

/* Dynamic local memory: a trailing __local kernel argument in OpenCL (sized
 * by clSetKernelArg), an extern __shared__ array in CUDA/HIP. */
#define KVRT_SHARED_PARAM , __local kvrt_u64 *kvrt_shared
#define KVRT_SHARED_DECL

/* OpenCL 1.2 has no sub-group functions: reductions across lanes go
 * through local memory. */
#define KVRT_HAS_SHUFFLE 0

#define KVRT_AS_FLOAT(u) as_float(u)
#define KVRT_AS_UINT(f) as_uint(f)
#define KVRT_EXPF(x) exp(x)
#define KVRT_FMAXF(a, b) fmax((a), (b))

/* vload_half/vstore_half_rte are core OpenCL 1.2 built-ins: they read and
 * write IEEE half in memory without cl_khr_fp16, so fp16 caches work on
 * every device (PoCL has no cl_khr_fp16). */
#define KVRT_LOAD_F16(p) vload_half(0, (const __global half *)(p))
#define KVRT_STORE_F16(p, v) vstore_half_rte((v), 0, (__global half *)(p))
