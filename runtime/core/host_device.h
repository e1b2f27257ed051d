// DLB_HD marks a function that runs on both sides: compiled by nvcc it is __host__ __device__, so
// a CUDA kernel calls it; compiled by the host compiler it is a plain inline function, so tests
// run the very same code on the CPU (docs/cuda.md, "kernel bodies on the host").
#pragma once

#if defined(__CUDACC__)
#define DLB_HD __host__ __device__ inline
#else
#define DLB_HD inline
#endif
