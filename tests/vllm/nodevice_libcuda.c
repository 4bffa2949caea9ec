/* A CUDA driver with no device, for testing vLLM's config code without a GPU.
 *
 * vLLM 0.33.0's CUDA extensions (vllm/_C_stable_libtorch.abi3.so and others)
 * link libcuda.so.1, so vllm.platforms.cuda does not import on a machine
 * without the NVIDIA driver. This library has that soname and defines every
 * driver-API symbol those extensions import; each call reports
 * CUDA_ERROR_NO_DEVICE (100). The tests compile it with gcc and load it before
 * vLLM (tests/vllm/conftest.py), then patch the platform's device queries.
 * Test-only: never part of the package.
 */
#include <stddef.h>

#define CUDA_ERROR_NO_DEVICE 100
typedef int CUresult;

CUresult cuGetErrorString(CUresult error, const char **str) {
    (void)error;
    if (str) *str = "no CUDA-capable device is detected (hisparse_rs test stub)";
    return 0;
}

CUresult cuDriverGetVersion(int *version) {
    if (version) *version = 0;
    return CUDA_ERROR_NO_DEVICE;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                             unsigned long long flags, void *status) {
    (void)symbol; (void)version; (void)flags; (void)status;
    if (pfn) *pfn = NULL;
    return CUDA_ERROR_NO_DEVICE;
}

/* The rest (the symbols vLLM's extensions and Triton's driver module,
 * triton/backends/nvidia/driver.c, import) take arguments the stub never reads (the SysV ABI lets a callee
 * ignore them) and fail the same way. */
#define NO_DEVICE(name) CUresult name(void) { return CUDA_ERROR_NO_DEVICE; }
NO_DEVICE(cuCtxGetCurrent)
NO_DEVICE(cuCtxGetDevice)
NO_DEVICE(cuCtxGetLimit)
NO_DEVICE(cuCtxSetCurrent)
NO_DEVICE(cuCtxSetLimit)
NO_DEVICE(cuDeviceGet)
NO_DEVICE(cuDeviceGetAttribute)
NO_DEVICE(cuDeviceGetCount)
NO_DEVICE(cuDevicePrimaryCtxRetain)
NO_DEVICE(cuFuncGetAttribute)
NO_DEVICE(cuFuncSetAttribute)
NO_DEVICE(cuFuncSetCacheConfig)
NO_DEVICE(cuInit)
NO_DEVICE(cuLaunchKernelEx)
NO_DEVICE(cuMemAddressFree)
NO_DEVICE(cuMemAddressReserve)
NO_DEVICE(cuMemCreate)
NO_DEVICE(cuMemGetAllocationGranularity)
NO_DEVICE(cuMemMap)
NO_DEVICE(cuMemRelease)
NO_DEVICE(cuMemSetAccess)
NO_DEVICE(cuMemUnmap)
NO_DEVICE(cuModuleGetFunction)
NO_DEVICE(cuModuleLoadData)
NO_DEVICE(cuModuleUnload)
NO_DEVICE(cuOccupancyMaxActiveClusters)
NO_DEVICE(cuPointerGetAttribute)
NO_DEVICE(cuPointerGetAttributes)
NO_DEVICE(cuTensorMapEncodeIm2col)
NO_DEVICE(cuTensorMapEncodeTiled)
