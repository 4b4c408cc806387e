// Softmax and LogSoftmax along one axis: x seen as [outer, len, inner], row (o, i) holding
// the len values at o*len*inner + k*inner + i. One work-group of SOFTMAX_WG work-items per
// row: a strided pass for the maximum, one for the sum of exp(x - max), each finished by a
// tree reduction in local memory, then the writing pass.

#define SOFTMAX_WG 128

inline float max_nan(float a, float b) {  // numpy's maximum: NaN from either side wins
    return (a != a) ? a : ((b > a || b != b) ? b : a);
}

// The row's maximum (NaN if it holds one), then the sum of exp(x - shift(max)); both
// left in *m and *s for every work-item of the group.
#define ROW_STATS(SHIFT)                                                                  \
    __local float part[SOFTMAX_WG];                                                       \
    const int row = get_group_id(0), lid = get_local_id(0);                               \
    const int base = (row / inner) * len * inner + row % inner;                           \
    __global const data_t* xr = x + base;                                                 \
    __global data_t* yr = out + base;                                                     \
    float m = -INFINITY;                                                                  \
    for (int k = lid; k < len; k += SOFTMAX_WG) m = max_nan(m, LD(xr, k * inner));        \
    part[lid] = m;                                                                        \
    barrier(CLK_LOCAL_MEM_FENCE);                                                         \
    for (int t = SOFTMAX_WG / 2; t > 0; t >>= 1) {                                        \
        if (lid < t) part[lid] = max_nan(part[lid], part[lid + t]);                       \
        barrier(CLK_LOCAL_MEM_FENCE);                                                     \
    }                                                                                     \
    m = SHIFT(part[0]);                                                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                                         \
    float s = 0.0f;                                                                       \
    for (int k = lid; k < len; k += SOFTMAX_WG) s += exp(LD(xr, k * inner) - m);          \
    part[lid] = s;                                                                        \
    barrier(CLK_LOCAL_MEM_FENCE);                                                         \
    for (int t = SOFTMAX_WG / 2; t > 0; t >>= 1) {                                        \
        if (lid < t) part[lid] += part[lid + t];                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                     \
    }                                                                                     \
    s = part[0];

#define KEEP(v) (v)
#define FINITE_OR_ZERO(v) (isfinite(v) ? (v) : 0.0f)  // LogSoftmax: no inf - inf

// One group per row; the global size is rows * SOFTMAX_WG.
__kernel __attribute__((reqd_work_group_size(SOFTMAX_WG, 1, 1)))
void softmax(__global const data_t* x, __global data_t* out, int len, int inner) {
    ROW_STATS(KEEP)
    for (int k = lid; k < len; k += SOFTMAX_WG)
        ST(yr, k * inner, exp(LD(xr, k * inner) - m) / s);
}

__kernel __attribute__((reqd_work_group_size(SOFTMAX_WG, 1, 1)))
void log_softmax(__global const data_t* x, __global data_t* out, int len, int inner) {
    ROW_STATS(FINITE_OR_ZERO)
    const float ls = log(s);
    for (int k = lid; k < len; k += SOFTMAX_WG) ST(yr, k * inner, (LD(xr, k * inner) - m) - ls);
}
