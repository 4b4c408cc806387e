// Prepended to every program of the GPU driver: the storage type of float tensors,
// activations (hdi.md 6.12, with the decisions of drivers/cpu/activations.py) and the fused
// epilogue. Comparisons are written so that NaN passes through as numpy's maximum/clip let it.

// Float tensors are stored as data_t: float, or half in float16 mode (-DNNRT_HALF; ops whose
// tensors are float16). Half is storage only (vload_half / vstore_half_rte: core OpenCL, no
// cl_khr_fp16): every kernel computes in float32 and rounds once when it stores (semantics.md
// "Float16 mode"). Op-internal scratch (partial sums, states) stays float. LD4 reads four.
// RH(x) rounds a float to the nearest half value (ties to even), kept as a float: where an
// epilogue absorbed a node, the absorbed node reads its producer's rounded output, as it
// would have from memory.
#ifdef NNRT_HALF
#define data_t half
#define LD(p, i) vload_half((i), (p))
#define LD4(i, p) vload_half4((i), (p))
#define ST(p, i, v) vstore_half_rte((v), (i), (p))
inline float round_half(float x) {
    ushort bits;
    vstore_half_rte(x, 0, (__private half*)&bits);
    return vload_half(0, (__private const half*)&bits);
}
#define RH(x) round_half(x)
#else
#define data_t float
#define LD(p, i) ((p)[i])
#define LD4(i, p) vload4((i), (p))
#define ST(p, i, v) ((p)[i] = (v))
#define RH(x) (x)
#endif

#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_SIGMOID 2
#define ACT_RELU6 3
#define ACT_ELU 4
#define ACT_LEAKY_RELU 5
#define ACT_ABS 6
#define ACT_RELU1 7
#define ACT_SOFTSIGN 8
#define ACT_SOFTPLUS 9
#define ACT_TANH 10
#define ACT_SELU 11
#define ACT_HSWISH 12
#define ACT_HSIGMOID 13
#define ACT_THRESHOLDRELU 14
#define ACT_LINEAR 15
#define ACT_HARD_TANH 16
#define ACT_SIGN 17
#define ACT_SWISH 18
#define ACT_GELU 19

inline float clip_nan(float x, float lo, float hi) {
    return x < lo ? lo : (x > hi ? hi : x);
}

// alpha: ELU / LEAKY_RELU / THRESHOLDRELU; lo, hi: HARD_TANH; approx: GELU's tanh form.
inline float activate(float x, int act, float alpha, float lo, float hi, int approx) {
    switch (act) {
    case ACT_RELU: return x < 0.0f ? 0.0f : x;
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-x));
    case ACT_RELU6: return clip_nan(x, 0.0f, 6.0f);
    case ACT_ELU: return x < 0.0f ? alpha * (exp(x) - 1.0f) : x;
    case ACT_LEAKY_RELU: return x < 0.0f ? alpha * x : x;
    case ACT_ABS: return fabs(x);
    case ACT_RELU1: return clip_nan(x, 0.0f, 1.0f);
    case ACT_SOFTSIGN: return x / (1.0f + fabs(x));
    case ACT_SOFTPLUS: return (x < 0.0f ? 0.0f : x) + log1p(exp(-fabs(x)));
    case ACT_TANH: return tanh(x);
    case ACT_SELU: return 1.05070098f * (x < 0.0f ? 1.67326324f * (exp(x) - 1.0f) : x);
    case ACT_HSWISH: return x * clip_nan(x + 3.0f, 0.0f, 6.0f) / 6.0f;
    case ACT_HSIGMOID: return clip_nan((x + 3.0f) / 6.0f, 0.0f, 1.0f);
    case ACT_THRESHOLDRELU: return clip_nan(x, 0.0f, alpha);
    case ACT_HARD_TANH: return clip_nan(x, lo, hi);
    case ACT_SIGN: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);
    case ACT_SWISH: return x / (1.0f + exp(-x));
    case ACT_GELU:
        if (approx) {
            return 0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
        }
        return 0.5f * x * (1.0f + erf(x * 0.7071067811865476f));
    default: return x;  // NO_ACTIVATION, LINEAR
    }
}

// The epilogue the plan may fuse after an operator: + residual (same shape as the output,
// indexed like it), then an activation. Kernels that accept one declare POST_PARAMS last
// and finish each output element with POST(value, output_index).
#define POST_PARAMS __global const data_t* post_res, int post_has_res, int post_act, \
    float post_alpha, float post_lo, float post_hi, int post_approx
#define POST(v, i) activate(post_has_res ? RH(RH(v) + LD(post_res, i)) : RH(v), post_act, \
    post_alpha, post_lo, post_hi, post_approx)

// Two strided operands read at the coordinates of one dense index i: table = rank,
// dims[rank], a_strides[rank], b_strides[rank] (elements; 0 along a broadcast axis). Rank 0
// means both are dense over the same shape: both at i.
inline int2 pair_offsets(__global const int* table, int i) {
    int rank = table[0];
    if (rank == 0) return (int2)(i, i);
    int rest = i;
    int2 off = (int2)(0, 0);
    for (int d = rank - 1; d >= 0; --d) {
        int dim = table[1 + d];
        int coord = rest % dim;
        rest /= dim;
        off.x += coord * table[1 + rank + d];
        off.y += coord * table[1 + 2 * rank + d];
    }
    return off;
}
