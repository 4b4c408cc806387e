// Element-wise unary math and the small per-element operators of op_unary.py, float32.
// One kernel per argument shape: `unary` (x -> y with an op code and up to three float
// parameters), `channel` (x and a per-channel vector: PReLU, BiasAdd, Scale) and `power`
// (PowFusion, both operands broadcast as in eltwise.cl). Every kernel finishes with the
// fused epilogue (POST).
//
// Contraction is off: x * scale + shift is rounded twice, as numpy computes it.
#pragma OPENCL FP_CONTRACT OFF

#define U_ABS 0
#define U_NEG 1
#define U_SQUARE 2
#define U_CEIL 3
#define U_FLOOR 4
#define U_ROUND 5
#define U_COS 6
#define U_SIN 7
#define U_LOG 8
#define U_SQRT 9
#define U_RECIPROCAL 10
#define U_RSQRT 11
#define U_ERF 12
#define U_EXP 13        // p0 scale, p1 shift (each applied only when not 1 / 0): e^z
#define U_EXP_BASE 14   // p0 scale, p1 shift, p2 base: base^z
#define U_CLIP 15       // p0 low, p1 high; NaN stays NaN
#define U_LEAKY_RELU 16 // p0 slope

#define C_PRELU 0
#define C_BIAS_ADD 1
#define C_SCALE 2       // with the scale bias (has_bias) and a fused activation

inline float scale_shift(float x, float scale, float shift) {
    float z = x;
    if (scale != 1.0f) z = z * scale;
    if (shift != 0.0f) z = z + shift;
    return z;
}

inline float unary_op(float x, int op, float p0, float p1, float p2) {
    switch (op) {
    case U_ABS: return fabs(x);
    case U_NEG: return -x;
    case U_SQUARE: return x * x;
    case U_CEIL: return ceil(x);
    case U_FLOOR: return floor(x);
    case U_ROUND: return rint(x);  // half to even, as numpy's rint
    case U_COS: return cos(x);
    case U_SIN: return sin(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_RECIPROCAL: return 1.0f / x;
    case U_RSQRT: return 1.0f / sqrt(x);  // 1/sqrt: rsqrt(-0) = -inf as numpy gives
    case U_ERF: return erf(x);
    case U_EXP: return exp(scale_shift(x, p0, p1));
    case U_EXP_BASE: return pow(p2, scale_shift(x, p0, p1));
    case U_CLIP: return x != x ? x : fmin(fmax(x, p0), p1);
    case U_LEAKY_RELU: return x >= 0.0f ? x : p0 * x;
    default: return x;
    }
}

__kernel void unary(__global const data_t* x, __global data_t* out, int n, int op, float p0,
                    float p1, float p2, POST_PARAMS) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = unary_op(LD(x, i), op, p0, p1, p2);
    ST(out, i, POST(v, i));
}

// Channel c of element i is (i / inner) % channels; w (and bias for Scale) has `channels`
// values (1 for a shared PReLU slope).
__kernel void channel(__global const data_t* x, __global const data_t* w,
                      __global const data_t* bias, __global data_t* out, int n, int op,
                      int inner, int channels, int has_bias, int act, POST_PARAMS) {
    int i = get_global_id(0);
    if (i >= n) return;
    int c = (i / inner) % channels;
    float v = LD(x, i), wc = LD(w, c);
    switch (op) {
    case C_PRELU:
        v = v >= 0.0f ? v : v * wc;
        break;
    case C_BIAS_ADD:
        v = v + wc;
        break;
    default:  // C_SCALE
        v = v * wc;
        if (has_bias) v = v + LD(bias, c);
        v = activate(v, act, 0.0f, 0.0f, 0.0f, 0);
        break;
    }
    ST(out, i, POST(v, i));
}

// (scale * x + shift) ^ e. table: rank, dims[rank], x_strides[rank], e_strides[rank]
// (rank 0: equal shapes, both indexed by i).
__kernel void power(__global const data_t* x, __global const data_t* e, __global data_t* out,
                    int n, __global const int* table, float scale, float shift, POST_PARAMS) {
    int i = get_global_id(0);
    if (i >= n) return;
    int2 at = pair_offsets(table, i);
    float v = pow(scale_shift(LD(x, at.x), scale, shift), LD(e, at.y));
    ST(out, i, POST(v, i));
}
