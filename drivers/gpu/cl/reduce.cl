// ReduceFusion: x seen as kept coordinates (one per output) x reduced coordinates.
// t (int table): nk, nr, kept dims[nk], kept strides[nk], reduced dims[nr], reduced
// strides[nr] (elements of x; adjacent dims of one kind merged on the host).
// pre: 0 none, 1 x*x, 2 |x|, 3 x != 0 (as 1 / 0); post: 0 none, 1 / count, 2 sqrt; then
// * coeff. One kernel pair per combining operation (sum, prod, max, min).

#define RED_WG 256

// The two passes of a chunked reduction meet in a float scratch buffer: the first pass is
// built with -DSCRATCH_OUT, the second with -DSCRATCH_IN (in float16 mode the model's own
// tensors are half, the partial results float).
#ifdef SCRATCH_IN
#define in_t float
#define LD_IN(p, i) ((p)[i])
#else
#define in_t data_t
#define LD_IN(p, i) LD(p, i)
#endif
#ifdef SCRATCH_OUT
#define out_t float
#define ST_OUT(p, i, v) ((p)[i] = (v))
#else
#define out_t data_t
#define ST_OUT(p, i, v) ST(p, i, v)
#endif

#define PRE_NONE 0
#define PRE_SQUARE 1
#define PRE_ABS 2
#define PRE_NONZERO 3
#define POST_MEAN 1
#define POST_SQRT 2

inline float max_nan(float a, float b) {  // numpy's maximum / minimum: NaN wins
    return (a != a) ? a : ((b > a || b != b) ? b : a);
}
inline float min_nan(float a, float b) {
    return (a != a) ? a : ((b < a || b != b) ? b : a);
}

inline float pre_op(float v, int pre) {
    return pre == PRE_SQUARE ? v * v
         : pre == PRE_ABS ? fabs(v)
         : pre == PRE_NONZERO ? (v != 0.0f ? 1.0f : 0.0f) : v;
}

inline float post_op(float v, int post, float count, float coeff) {
    v = post == POST_MEAN ? v / count : (post == POST_SQRT ? sqrt(v) : v);
    return v * coeff;
}

// Element offset of mixed-radix index idx over dims/strides[n].
inline int offset_of(int idx, __global const int* dims, __global const int* strides, int n) {
    int off = 0;
    for (int d = n - 1; d >= 0; --d) {
        int q = idx / dims[d];
        off += (idx - q * dims[d]) * strides[d];
        idx = q;
    }
    return off;
}

#define COMBINE_SUM(a, b) ((a) + (b))
#define COMBINE_PROD(a, b) ((a) * (b))
#define COMBINE_MAX(a, b) max_nan(a, b)
#define COMBINE_MIN(a, b) min_nan(a, b)

// NAME_group: one work-group of RED_WG per (output, chunk): group g reduces chunk g % chunks
// of output g / chunks into out[g], work-items striding over the chunk, then a tree
// reduction in local memory. Global size outs * chunks * RED_WG.
// NAME_thread: one work-item per output looping over all R reduced cells (short reductions).
#define REDUCE_KERNELS(NAME, IDENTITY, COMBINE)                                            \
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))                               \
void NAME##_group(__global const in_t* x, __global out_t* out, __global const int* t,      \
                  int R, int chunks, int pre, int post, float count, float coeff) {        \
    __local float part[RED_WG];                                                            \
    const int g = get_group_id(0), lid = get_local_id(0);                                  \
    const int o = g / chunks, c = g % chunks;                                              \
    const int per = (R + chunks - 1) / chunks;                                             \
    const int r0 = c * per, r1 = min(R, r0 + per);                                         \
    const int nk = t[0], nr = t[1];                                                        \
    const int base = offset_of(o, t + 2, t + 2 + nk, nk);                                  \
    __global const int* rd = t + 2 + 2 * nk;                                               \
    float acc = IDENTITY;                                                                  \
    for (int r = r0 + lid; r < r1; r += RED_WG) {                                          \
        float v = pre_op(LD_IN(x, base + offset_of(r, rd, rd + nr, nr)), pre);             \
        acc = COMBINE(acc, v);                                                             \
    }                                                                                      \
    part[lid] = acc;                                                                       \
    barrier(CLK_LOCAL_MEM_FENCE);                                                          \
    for (int s = RED_WG / 2; s > 0; s >>= 1) {                                             \
        if (lid < s) part[lid] = COMBINE(part[lid], part[lid + s]);                        \
        barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    }                                                                                      \
    if (lid == 0) ST_OUT(out, g, post_op(part[0], post, count, coeff));                    \
}                                                                                          \
__kernel void NAME##_thread(__global const in_t* x, __global out_t* out,                   \
                            __global const int* t, int outs, int R, int pre, int post,     \
                            float count, float coeff) {                                    \
    const int o = get_global_id(0);                                                        \
    if (o >= outs) return;                                                                 \
    const int nk = t[0], nr = t[1];                                                        \
    const int base = offset_of(o, t + 2, t + 2 + nk, nk);                                  \
    __global const int* rd = t + 2 + 2 * nk;                                               \
    float acc = IDENTITY;                                                                  \
    for (int r = 0; r < R; ++r) {                                                          \
        float v = pre_op(LD_IN(x, base + offset_of(r, rd, rd + nr, nr)), pre);             \
        acc = COMBINE(acc, v);                                                             \
    }                                                                                      \
    ST_OUT(out, o, post_op(acc, post, count, coeff));                                             \
}

REDUCE_KERNELS(reduce_sum, 0.0f, COMBINE_SUM)
REDUCE_KERNELS(reduce_prod, 1.0f, COMBINE_PROD)
REDUCE_KERNELS(reduce_max, -INFINITY, COMBINE_MAX)
REDUCE_KERNELS(reduce_min, INFINITY, COMBINE_MIN)
