// Quantised (int8 / uint8) kernels (ops/op_quantized.py), with semantics.md's arithmetic:
// r = (q - zeroPoint) * scale. Sums of products accumulate exactly in int32 (zero points
// subtracted first, the int32 bias added as it is: its scale is inputScale x weightScale),
// then ONE requantisation per output value: real = acc * (inputScale x weightScale[c]) (the
// product taken on the host in float64), the node's activation (ReLU / ReLU6) on the real
// value, q = rint(real / outputScale) + outputZero (ties to even), saturated to [lo, hi].
// real_t is double where the device has cl_khr_fp64 (-DNNRT_FP64): then the result is the
// float64 computation exactly; float otherwise (within one step, which semantics.md allows).
// Types: -DXT / -DWT / -DBT / -DOT name the quantised inputs' and the output's OpenCL types
// (char for INT8, uchar for UINT8). Tensors are NHWC; dense unless strides say otherwise.

#ifdef NNRT_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real_t;
#else
typedef float real_t;
#endif
#ifndef XT
#define XT char
#endif
#ifndef WT
#define WT char
#endif
#ifndef BT
#define BT char
#endif
#ifndef OT
#define OT char
#endif
#ifndef SRC
#define SRC float
#endif
#ifndef DST
#define DST char
#endif

// The activation (ACT_NONE / ACT_RELU / ACT_RELU6, cl/common.cl), then rint(real / scale)
// + zero saturated: the clamp happens in real_t, so no value overflows the int.
inline int requantise(real_t real, int act, real_t out_scale, int out_zero, int lo, int hi) {
    if (act == ACT_RELU) {
        real = real < 0 ? 0 : real;
    } else if (act == ACT_RELU6) {
        real = real < 0 ? 0 : (real > 6 ? 6 : real);
    }
    real_t q = rint(real / out_scale) + (real_t)out_zero;
    return (int)clamp(q, (real_t)lo, (real_t)hi);
}

// QuantDTypeCast: quantise (float -> q), dequantise (q -> float) or requantise (q -> q),
// per tensor (count 1) or per channel (index (i / inner) % count). SRC_Q / DST_Q: that side
// is quantised (SRC / DST its type); SRC_HALF / DST_HALF: a float16 side (vload_half /
// vstore_half_rte: one rounding from real_t). As the reference (drivers/cpu/ops/
// op_quant_dtype_cast.py): scale 0 quantises to zeroPoint, NaN to zeroPoint, ±inf saturates.
#ifdef SRC_HALF
#define LOAD_X(i) vload_half((i), x)
#define SRC_STORE half
#else
#define LOAD_X(i) x[i]
#define SRC_STORE SRC
#endif
#ifdef DST_HALF
#define DST_STORE half
#else
#define DST_STORE DST
#endif

__kernel void quant_cast(__global const SRC_STORE* x, __global DST_STORE* y, int n,
                         __global const real_t* src_scale, __global const int* src_zero,
                         int src_count, int src_inner,
                         __global const real_t* dst_scale, __global const int* dst_zero,
                         int dst_count, int dst_inner, int lo, int hi) {
    int i = get_global_id(0);
    if (i >= n) return;
#ifdef SRC_Q
    int cs = src_count > 1 ? (i / src_inner) % src_count : 0;
    real_t real = ((real_t)x[i] - (real_t)src_zero[cs]) * src_scale[cs];
#else
    real_t real = (real_t)LOAD_X(i);
#endif
#ifdef DST_Q
    int cd = dst_count > 1 ? (i / dst_inner) % dst_count : 0;
    real_t scale = dst_scale[cd], zero = (real_t)dst_zero[cd];
    real_t q = (scale != 0 ? real / scale : 0) + zero;
    q = rint(q);
    if (isnan(q)) q = zero;
    y[i] = (DST)clamp(q, (real_t)lo, (real_t)hi);
#elif defined(DST_HALF)
    vstore_half_rte(real, i, y);
#else
    y[i] = (DST)real;  // the default rounding mode: to nearest even, once
#endif
}

// Convolution, NHWC, grouped (depthwise is group == C with og = the channel multiplier):
// one work-item per output value (n, oh, ow, oc); the weight as the model gives it,
// [OC, kh, kw, gc]. Padded cells are real 0 (q == xzero): they add nothing, so they are
// skipped. geo: N, H, W, C, OH, OW, OC, kh, kw, sh, sw, dh, dw, pad_top, pad_left, gc, og.
__kernel void qconv(__global const XT* x, __global const WT* w, __global const int* bias,
                    __global OT* out, __global const real_t* mult, __global const int* wzero,
                    __global const int* geo, int total, int xzero, int has_bias, int act,
                    real_t out_scale, int out_zero, int lo, int hi) {
    int i = get_global_id(0);
    if (i >= total) return;
    const int H = geo[1], W = geo[2], C = geo[3], OH = geo[4], OW = geo[5], OC = geo[6];
    const int KH = geo[7], KW = geo[8], gc = geo[15], og = geo[16];
    int oc = i % OC, t = i / OC;
    int ow = t % OW; t /= OW;
    int oh = t % OH; int n = t / OH;
    const int h0 = oh * geo[9] - geo[13], w0 = ow * geo[10] - geo[14];
    const int c0 = (oc / og) * gc;
    const int wz = wzero[oc];
    __global const WT* wrow = w + oc * KH * KW * gc;
    int acc = 0;
    for (int kh = 0; kh < KH; ++kh) {
        int h = h0 + kh * geo[11];
        if (h < 0 || h >= H) continue;
        for (int kw = 0; kw < KW; ++kw) {
            int ww = w0 + kw * geo[12];
            if (ww < 0 || ww >= W) continue;
            __global const XT* px = x + ((n * H + h) * W + ww) * C + c0;
            __global const WT* pw = wrow + (kh * KW + kw) * gc;
            for (int c = 0; c < gc; ++c) {
                acc += ((int)px[c] - xzero) * ((int)pw[c] - wz);
            }
        }
    }
    if (has_bias) acc += bias[oc];
    out[i] = (OT)requantise((real_t)acc * mult[oc], act, out_scale, out_zero, lo, hi);
}

// A batched matrix product: out[b, m, j] = Σ_k (a[b, m, k] - azero) (w[b, k, j] - wzero[j])
// (+ bias[j]), requantised with mult[j]. Strides in elements: a (batch, row, k), w (batch,
// k, column): transposes and a broadcast operand (batch stride 0) are strides. One
// work-item per output value: global (J, M, batch).
__kernel void qgemm(__global const XT* a, __global const WT* w, __global const int* bias,
                    __global OT* out, __global const real_t* mult, __global const int* wzero,
                    __global const int* geo, int azero, int has_bias, int act,
                    real_t out_scale, int out_zero, int lo, int hi) {
    const int j = get_global_id(0), m = get_global_id(1), b = get_global_id(2);
    const int M = geo[0], J = geo[1], K = geo[2];
    if (j >= J || m >= M) return;
    __global const XT* pa = a + b * geo[3] + m * geo[4];
    __global const WT* pw = w + b * geo[6] + j * geo[8];
    const int as = geo[5], ws = geo[7], wz = wzero[j];
    int acc = 0;
    for (int k = 0; k < K; ++k) {
        acc += ((int)pa[k * as] - azero) * ((int)pw[k * ws] - wz);
    }
    if (has_bias) acc += bias[j];
    out[(b * M + m) * J + j] = (OT)requantise((real_t)acc * mult[j], act, out_scale, out_zero,
                                              lo, hi);
}

// Max / average pooling, NHWC, one work-item per output value. Max is taken on the
// quantised values (dequantisation is monotone), average on the exact int sum of
// (q - xzero) over the window's real cells, divided by their count in real_t.
// geo: N, H, W, C, OH, OW, kh, kw, stride_h, stride_w, pad_top, pad_left.
__kernel void qpool(__global const XT* x, __global OT* out, int total, __global const int* geo,
                    int is_max, int xzero, real_t x_scale, int act, real_t out_scale,
                    int out_zero, int lo, int hi) {
    int i = get_global_id(0);
    if (i >= total) return;
    const int H = geo[1], W = geo[2], C = geo[3], OH = geo[4], OW = geo[5];
    int c = i % C, t = i / C;
    int ow = t % OW; t /= OW;
    int oh = t % OH; int n = t / OH;
    const int h0 = oh * geo[8] - geo[10], w0 = ow * geo[9] - geo[11];
    const int hs = max(h0, 0), he = min(h0 + geo[6], H);
    const int ws = max(w0, 0), we = min(w0 + geo[7], W);
    int acc = is_max ? -1000 : 0;
    for (int h = hs; h < he; ++h) {
        __global const XT* row = x + ((n * H + h) * W) * C + c;
        for (int ww = ws; ww < we; ++ww) {
            int v = (int)row[ww * C];
            acc = is_max ? max(acc, v) : acc + (v - xzero);
        }
    }
    real_t real = is_max ? ((real_t)acc - (real_t)xzero) * x_scale
                         : (real_t)acc * x_scale / (real_t)((he - hs) * (we - ws));
    out[i] = (OT)requantise(real, act, out_scale, out_zero, lo, hi);
}

// Add / Mul with numpy broadcasting (table: pair_offsets, cl/common.cl): each operand
// dequantised in real_t, the sum or product requantised once.
__kernel void qbinary(__global const XT* a, __global const BT* b, __global OT* out, int n,
                      __global const int* table, int is_mul, int azero, real_t a_scale,
                      int bzero, real_t b_scale, int act, real_t out_scale, int out_zero,
                      int lo, int hi) {
    int i = get_global_id(0);
    if (i >= n) return;
    int2 at = pair_offsets(table, i);
    real_t x = ((real_t)a[at.x] - (real_t)azero) * a_scale;
    real_t y = ((real_t)b[at.y] - (real_t)bzero) * b_scale;
    out[i] = (OT)requantise(is_mul ? x * y : x + y, act, out_scale, out_zero, lo, hi);
}
