// Conv2DFusion: ordinary / grouped convolution as an implicit GEMM, and depthwise
// convolution as a direct kernel. Every kernel adds the bias, applies the node's fused
// activation (no parameters, as the reference applies it) and finishes with POST.
//
// Tensors are addressed through element strides (n, h, w, c), so that NHWC and NCHW inputs
// and outputs share the code; the weights are laid out at prepare time (see op_conv2d.py).

// ---------------------------------------------------------------------------------------
// Implicit GEMM: for group g, out[m, g*og + c] = sum_k A[m, k] * B[g, k, c], where m runs
// over the N*OH*OW output pixels, k = (i*kW + j)*gc + ci over the kernel taps and the
// group's gc input channels, and A[m, k] is the input cell that tap reads (0 in padding).
// B is the weight [group, Kp, ogp] padded with zeros to whole tiles (no bounds checks).
// A work-group computes a TM x TN tile of pixels x channels, staging TK-deep slices of A
// and B in local memory; each of its WX x WY work-items computes 4 pixels x 4 channels.
// ---------------------------------------------------------------------------------------

#ifndef TM
#define TM 32
#endif
#ifndef TN
#define TN 32
#endif
#ifndef TK
#define TK 8
#endif
#define WX (TN / 4)
#define WY (TM / 4)
#define THREADS (WX * WY)
#define A_PER (TM * TK / THREADS)        // A cells each work-item stages per slice
#define B_PER (TN * TK / 4 / THREADS)    // B float4s each work-item stages per slice

__kernel __attribute__((reqd_work_group_size(WX, WY, 1)))
void conv_gemm(__global const data_t* x, __global const data_t* w, __global const data_t* bias,
               __global data_t* out,
               int M, int OH, int OW, int H, int W, int gc, int og, int K, int Kp, int ogp,
               int kW, int sh, int sw, int dh, int dw, int pad_top, int pad_left,
               int xsn, int xsh, int xsw, int xsc, int osn, int osh, int osw, int osc,
               int has_bias, int act, POST_PARAMS) {
    __local float As[TK * TM];
    __local float Bs[TK * TN];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int lid = ty * WX + tx;
    const int n0 = get_group_id(0) * TN;   // first output channel of the tile (in the group)
    const int m0 = get_group_id(1) * TM;   // first output pixel of the tile
    const int g = get_group_id(2);

    // The A cells this work-item stages: tap row kk of pixels lid / TK + r * (THREADS / TK).
    const int kk = lid % TK;
    int ih0[A_PER], iw0[A_PER], base[A_PER];
    for (int r = 0; r < A_PER; ++r) {
        int m = m0 + lid / TK + r * (THREADS / TK);
        if (m < M) {
            int ow = m % OW, t = m / OW;
            int oh = t % OH, n = t / OH;
            ih0[r] = oh * sh - pad_top;
            iw0[r] = ow * sw - pad_left;
            base[r] = n * xsn + g * gc * xsc;
        } else {
            ih0[r] = -(1 << 29);  // reads nothing: out of every row
            iw0[r] = 0;
            base[r] = 0;
        }
    }
    const __global data_t* wg = w + (size_t)g * Kp * ogp + n0;

    float4 acc[4] = {(float4)(0.0f), (float4)(0.0f), (float4)(0.0f), (float4)(0.0f)};
    for (int k0 = 0; k0 < Kp; k0 += TK) {
        int k = k0 + kk;
        if (k < K) {
            int ci = k % gc, tap = k / gc;
            int i = tap / kW, j = tap - (tap / kW) * kW;
            int di = i * dh, dj = j * dw, dc = ci * xsc;
            for (int r = 0; r < A_PER; ++r) {
                int ih = ih0[r] + di, iw = iw0[r] + dj;
                float v = 0.0f;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
                    v = LD(x, base[r] + ih * xsh + iw * xsw + dc);
                }
                As[kk * TM + lid / TK + r * (THREADS / TK)] = v;
            }
        } else {
            for (int r = 0; r < A_PER; ++r) {
                As[kk * TM + lid / TK + r * (THREADS / TK)] = 0.0f;
            }
        }
        for (int r = 0; r < B_PER; ++r) {
            int f = lid + r * THREADS;
            int row = f / (TN / 4), col = (f % (TN / 4)) * 4;
            vstore4(LD4(0, wg + (size_t)(k0 + row) * ogp + col), 0, Bs + row * TN + col);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int q = 0; q < TK; ++q) {
            float4 a = vload4(0, As + q * TM + ty * 4);
            float4 b = vload4(0, Bs + q * TN + tx * 4);
            acc[0] = mad((float4)(a.s0), b, acc[0]);
            acc[1] = mad((float4)(a.s1), b, acc[1]);
            acc[2] = mad((float4)(a.s2), b, acc[2]);
            acc[3] = mad((float4)(a.s3), b, acc[3]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    const int c0 = n0 + tx * 4;
    for (int p = 0; p < 4; ++p) {
        int m = m0 + ty * 4 + p;
        if (m >= M) break;
        int ow = m % OW, t = m / OW;
        int oh = t % OH, n = t / OH;
        int pix = n * osn + oh * osh + ow * osw;
        float vals[4] = {acc[p].s0, acc[p].s1, acc[p].s2, acc[p].s3};
        for (int e = 0; e < 4; ++e) {
            int c = c0 + e;
            if (c >= og) break;
            int oc = g * og + c;
            float v = vals[e];
            if (has_bias) v += LD(bias, oc);
            v = activate(v, act, 0.0f, 0.0f, 0.0f, 0);
            int idx = pix + oc * osc;
            ST(out, idx, POST(v, idx));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Depthwise, NHWC, channel multiplier 1, C % 4 == 0: a work-item computes 4 channels of 2
// horizontally adjacent output pixels (the weight of a tap is read once for both).
// w: [kH, kW, C]. One work-item per (n, oh, pair of ow, channel quad), flattened.
// ---------------------------------------------------------------------------------------

__kernel void depthwise4(__global const data_t* x, __global const data_t* w,
                         __global const data_t* bias, __global data_t* out,
                         int total, int C4, int OW2, int OH, int OW, int H, int W, int kH, int kW,
                         int sh, int sw, int dh, int dw, int pad_top, int pad_left,
                         int has_bias, int act, POST_PARAMS) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int c4 = gid % C4, t = gid / C4;
    int owp = t % OW2;
    t /= OW2;
    int oh = t % OH, n = t / OH;
    const int C = C4 * 4;
    int ow0 = owp * 2;
    int second = ow0 + 1 < OW;
    float4 acc0 = (float4)(0.0f), acc1 = (float4)(0.0f);
    const __global data_t* xn = x + (size_t)n * H * W * C;
    for (int i = 0; i < kH; ++i) {
        int ih = oh * sh - pad_top + i * dh;
        if (ih < 0 || ih >= H) continue;
        const __global data_t* row = xn + (size_t)ih * W * C;
        for (int j = 0; j < kW; ++j) {
            float4 wv = LD4(c4, w + (i * kW + j) * C);
            int iw = ow0 * sw - pad_left + j * dw;
            if (iw >= 0 && iw < W) acc0 = mad(LD4(c4, row + iw * C), wv, acc0);
            iw += sw;
            if (second && iw >= 0 && iw < W) acc1 = mad(LD4(c4, row + iw * C), wv, acc1);
        }
    }
    float4 b = has_bias ? LD4(c4, bias) : (float4)(0.0f);
    for (int p = 0; p < 1 + second; ++p) {
        float4 a = (p == 0 ? acc0 : acc1) + b;
        float vals[4] = {a.s0, a.s1, a.s2, a.s3};
        int idx = ((n * OH + oh) * OW + ow0 + p) * C + c4 * 4;
        for (int e = 0; e < 4; ++e) {
            float v = activate(vals[e], act, 0.0f, 0.0f, 0.0f, 0);
            ST(out, idx + e, POST(v, idx + e));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Depthwise, any layout and channel multiplier mult (output channel oc reads input channel
// oc / mult): one output element per work-item. w: [kH, kW, outC].
// ---------------------------------------------------------------------------------------

__kernel void depthwise(__global const data_t* x, __global const data_t* w,
                        __global const data_t* bias, __global data_t* out,
                        int total, int OC, int mult, int OH, int OW, int H, int W, int kH, int kW,
                        int sh, int sw, int dh, int dw, int pad_top, int pad_left,
                        int xsn, int xsh, int xsw, int xsc, int osn, int osh, int osw, int osc,
                        int has_bias, int act, POST_PARAMS) {
    int gid = get_global_id(0);
    if (gid >= total) return;
    int oc = gid % OC, t = gid / OC;
    int ow = t % OW;
    t /= OW;
    int oh = t % OH, n = t / OH;
    const __global data_t* xc = x + n * xsn + (oc / mult) * xsc;
    float acc = 0.0f;
    for (int i = 0; i < kH; ++i) {
        int ih = oh * sh - pad_top + i * dh;
        if (ih < 0 || ih >= H) continue;
        for (int j = 0; j < kW; ++j) {
            int iw = ow * sw - pad_left + j * dw;
            if (iw < 0 || iw >= W) continue;
            acc = mad(LD(xc, ih * xsh + iw * xsw), LD(w, (i * kW + j) * OC + oc), acc);
        }
    }
    if (has_bias) acc += LD(bias, oc);
    acc = activate(acc, act, 0.0f, 0.0f, 0.0f, 0);
    int idx = n * osn + oh * osh + ow * osw + oc * osc;
    ST(out, idx, POST(acc, idx));
}
