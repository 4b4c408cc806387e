// Cast (ops/op_cast.py): y = x converted element by element, with the reference's rules
// (drivers/cpu/ops/op_cast.py). Built with -DSRC=<x's OpenCL type> -DDST=<y's> and one mode:
//   TO_BOOL        y = x != 0 (NaN is true), DST uchar
//   FLOAT_TO_INT   CONVERT = convert_<DST>_sat_rtz: truncation, saturation, NaN -> 0
//   TO_FLOAT       CONVERT = convert_<DST>_rte (int -> float, float <-> double)
//   INT_TO_INT     a C cast: two's-complement wrap
//   TO_HALF        CONVERT = convert_float_rte / convert_double, then vstore_half_rte: one
//                  rounding (an integer beyond 2^24 is beyond half's range either way)
// SRC_HALF: x is float16, read with vload_half (exact in float). half pointers need no
// cl_khr_fp16: vload_half / vstore_half are core OpenCL.

#ifdef NEED_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#ifdef SRC_HALF
#define LOAD_X(i) vload_half((i), x)
#define SRC_STORE half
#else
#define LOAD_X(i) x[i]
#define SRC_STORE SRC
#endif

#ifdef TO_HALF
#define DST_STORE half
#else
#define DST_STORE DST
#endif

__kernel void cast(__global const SRC_STORE* x, __global DST_STORE* y, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
#if defined(TO_BOOL)
    y[i] = LOAD_X(i) != 0 ? 1 : 0;
#elif defined(TO_HALF)
    vstore_half_rte(CONVERT(LOAD_X(i)), i, y);
#elif defined(INT_TO_INT)
    y[i] = (DST)LOAD_X(i);
#else
    y[i] = CONVERT(LOAD_X(i));
#endif
}
