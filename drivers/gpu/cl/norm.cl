// LayerNorm (one work-group per normalised row, two-pass mean and variance with tree
// reductions in local memory) and the per-channel affine map of an inference BatchNorm.

#define NORM_WG 256

// Sum of `v` over the group, left in `total` for every work-item (part: NORM_WG floats).
#define GROUP_SUM(part, lid, v, total)                                  \
    part[lid] = (v);                                                    \
    barrier(CLK_LOCAL_MEM_FENCE);                                       \
    for (int t_ = NORM_WG / 2; t_ > 0; t_ >>= 1) {                      \
        if ((lid) < t_) part[lid] += part[(lid) + t_];                  \
        barrier(CLK_LOCAL_MEM_FENCE);                                   \
    }                                                                   \
    total = part[0];                                                    \
    barrier(CLK_LOCAL_MEM_FENCE);

// x as rows [R, len]: mean, biased variance of (x - mean), r = 1 / sqrt(var + eps); y is
// (x - mean) * r, then * gamma + beta (AFFINE), gamma/beta indexed by the element's flat
// index modulo their size `psize` (they are x.shape[beginParamsAxis:]).
#define LAYER_NORM(AFFINE)                                                               \
    __local float part[NORM_WG];                                                         \
    const int lid = get_local_id(0);                                                     \
    const long base = (long)get_group_id(0) * len;                                       \
    __global const data_t* xr = x + base;                                                \
    __global data_t* yr = out + base;                                                    \
    float acc = 0.0f, mean, var;                                                         \
    for (int k = lid; k < len; k += NORM_WG) acc += LD(xr, k);                           \
    GROUP_SUM(part, lid, acc, mean)                                                      \
    mean /= (float)len;                                                                  \
    acc = 0.0f;                                                                          \
    for (int k = lid; k < len; k += NORM_WG) { float d = LD(xr, k) - mean; acc += d * d; }   \
    GROUP_SUM(part, lid, acc, var)                                                       \
    var /= (float)len;                                                                   \
    const float r = 1.0f / sqrt(var + eps);                                              \
    for (int k = lid; k < len; k += NORM_WG) {                                           \
        float y = (LD(xr, k) - mean) * r;                                                \
        AFFINE                                                                           \
        ST(yr, k, y);                                                                    \
    }

// Global size rows * NORM_WG.
__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1)))
void layer_norm(__global const data_t* x, __global data_t* out, int len, float eps) {
    LAYER_NORM()
}

__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1)))
void layer_norm_affine(__global const data_t* x, __global data_t* out, int len, float eps,
                       __global const data_t* gamma, __global const data_t* beta, int psize) {
    LAYER_NORM(int p = (int)((base + k) % psize); y = y * LD(gamma, p) + LD(beta, p);)
}

// BatchNorm's per-channel factor = scale / sqrt(variance + eps), shift = offset - mean *
// factor, into fs[0:C] and fs[C:2C] (run-time parameters; constant ones are folded on the
// host).
__kernel void batch_norm_fold(__global const data_t* scale, __global const data_t* offset,
                              __global const data_t* mean, __global const data_t* variance,
                              __global float* fs, int C, float eps) {
    int c = get_global_id(0);
    if (c >= C) return;
    float f = LD(scale, c) / sqrt(LD(variance, c) + eps);
    fs[c] = f;
    fs[C + c] = LD(offset, c) - LD(mean, c) * f;
}

// y = x * factor[ch] + shift[ch], ch = (i / inner) % C, then the plan's epilogue.
__kernel void batch_norm(__global const data_t* x, __global data_t* out, int n,
                         __global const float* fs, int C, int inner, POST_PARAMS) {
    int i = get_global_id(0);
    if (i >= n) return;
    int ch = (i / inner) % C;
    float v = LD(x, i) * fs[ch] + fs[C + ch];
    ST(out, i, POST(v, i));
}
