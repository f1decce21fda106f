/*
 * The CUDA runtime and HIP runtime, under one set of names.  HIP mirrors the
 * CUDA runtime API call for call, so the host code of kvrt-cuda and kvrt-rocm
 * is one C source compiled twice: with KVRT_GPURT_CUDA (cuda_runtime_api.h,
 * static cudart, never libcuda) or KVRT_GPURT_HIP (hip_runtime_api.h,
 * libamdhip64).  Both headers are plain C.
 */
#ifndef KVRT_GPURT_API_H
#define KVRT_GPURT_API_H

#if defined(KVRT_GPURT_HIP)

#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>

#define GPURT_PLUGIN_NAME "rocm"
#define GPURT_API_NAME "HIP"
#define GPURT_FN(name) "hip" name /* for messages: "hipMalloc" */
#define GPURT_DEVICE_ENV "KVRT_ROCM_DEVICE"
typedef hipError_t gpurt_error;
#define gpurtSuccess hipSuccess
#define gpurtStreamPerThread hipStreamPerThread
#define gpurtMemcpyHostToDevice hipMemcpyHostToDevice
#define gpurtMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpurtMemcpyDeviceToDevice hipMemcpyDeviceToDevice
typedef hipEvent_t gpurt_event;
#define gpurtEventCreate hipEventCreate
#define gpurtEventRecord hipEventRecord
#define gpurtEventSynchronize hipEventSynchronize
#define gpurtEventElapsedTime hipEventElapsedTime
#define gpurtEventDestroy hipEventDestroy
#define gpurtAttrMaxSharedPerBlock hipDeviceAttributeMaxSharedMemoryPerBlock
#define gpurtAttrMaxGridX hipDeviceAttributeMaxGridDimX
#define gpurtAttrMultiProcessors hipDeviceAttributeMultiprocessorCount
#define gpurtAttrCcMajor hipDeviceAttributeComputeCapabilityMajor
#define gpurtAttrCcMinor hipDeviceAttributeComputeCapabilityMinor
#define gpurtGetDeviceCount hipGetDeviceCount
#define gpurtSetDevice hipSetDevice
#define gpurtGetDevice hipGetDevice
#define gpurtDeviceGetAttribute hipDeviceGetAttribute
#define gpurtGetErrorName hipGetErrorName
#define gpurtGetErrorString hipGetErrorString
#define gpurtGetLastError hipGetLastError
#define gpurtMalloc hipMalloc
#define gpurtFree hipFree
#define gpurtMemcpyAsync hipMemcpyAsync
#define gpurtMemsetAsync hipMemsetAsync
#define gpurtStreamSynchronize hipStreamSynchronize
#define gpurtLaunchKernel hipLaunchKernel
typedef hipDeviceProp_t gpurtDeviceProp;
#define gpurtGetDeviceProperties hipGetDeviceProperties
typedef hipPointerAttribute_t gpurtPointerAttributes;
#define gpurtPointerGetAttributes hipPointerGetAttributes
/* ROCm 5.2 names the field memoryType and keeps managed memory apart. */
#define GPURT_POINTER_ON_DEVICE(a) ((a).memoryType == hipMemoryTypeDevice || (a).isManaged)
#define GPURT_POINTER_IS_HOST(a) ((a).memoryType == hipMemoryTypeHost && !(a).isManaged)

#elif defined(KVRT_GPURT_CUDA)

#include <cuda_runtime_api.h>

#define GPURT_PLUGIN_NAME "cuda"
#define GPURT_API_NAME "CUDA"
#define GPURT_FN(name) "cuda" name
#define GPURT_DEVICE_ENV "KVRT_CUDA_DEVICE"
typedef cudaError_t gpurt_error;
#define gpurtSuccess cudaSuccess
#define gpurtStreamPerThread cudaStreamPerThread
#define gpurtMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpurtMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpurtMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
typedef cudaEvent_t gpurt_event;
#define gpurtEventCreate cudaEventCreate
#define gpurtEventRecord cudaEventRecord
#define gpurtEventSynchronize cudaEventSynchronize
#define gpurtEventElapsedTime cudaEventElapsedTime
#define gpurtEventDestroy cudaEventDestroy
#define gpurtAttrMaxSharedPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define gpurtAttrMaxGridX cudaDevAttrMaxGridDimX
#define gpurtAttrMultiProcessors cudaDevAttrMultiProcessorCount
#define gpurtAttrCcMajor cudaDevAttrComputeCapabilityMajor
#define gpurtAttrCcMinor cudaDevAttrComputeCapabilityMinor
#define gpurtGetDeviceCount cudaGetDeviceCount
#define gpurtSetDevice cudaSetDevice
#define gpurtGetDevice cudaGetDevice
#define gpurtDeviceGetAttribute cudaDeviceGetAttribute
#define gpurtGetErrorName cudaGetErrorName
#define gpurtGetErrorString cudaGetErrorString
#define gpurtGetLastError cudaGetLastError
#define gpurtMalloc cudaMalloc
#define gpurtFree cudaFree
#define gpurtMemcpyAsync cudaMemcpyAsync
#define gpurtMemsetAsync cudaMemsetAsync
#define gpurtStreamSynchronize cudaStreamSynchronize
#define gpurtLaunchKernel cudaLaunchKernel
typedef struct cudaDeviceProp gpurtDeviceProp;
#define gpurtGetDeviceProperties cudaGetDeviceProperties
typedef struct cudaPointerAttributes gpurtPointerAttributes;
#define gpurtPointerGetAttributes cudaPointerGetAttributes
#define GPURT_POINTER_ON_DEVICE(a) ((a).type == cudaMemoryTypeDevice || (a).type == cudaMemoryTypeManaged)
#define GPURT_POINTER_IS_HOST(a) ((a).type == cudaMemoryTypeHost)

#else
#error "define KVRT_GPURT_CUDA or KVRT_GPURT_HIP"
#endif

#endif
