// LSTM (op_lstm.py): per layer one tiled GEMM for the input projection of every time step
// and direction, then one `lstm_step` launch per time step (both directions in it).
//
// pre [M = seq*batch, N = dirs*4H] = x [M, K] · w [K, N] + bias [N]; direction d's gates
// are columns d*4H + gate*H + j (gate order i, f, g, o).
//
// Contraction is off, so zoneout's z * prev + (1 - z) * new is rounded as numpy rounds
// it; the dot products use mad() (an fma where the device has a fast one).
#pragma OPENCL FP_CONTRACT OFF

#define PM 16        // rows of a projection tile
#define PN 64        // columns of a projection tile (4 per work item)
#define PK 16        // depth of a projection tile

// local size (16, 16): work item (lx, ly) computes row ly, columns lx + 16 r (r < 4).
__kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void lstm_project(__global const data_t* x, __global const data_t* w, int w_off,
                  __global const data_t* bias, int bias_off, __global float* pre,
                  int M, int N, int K) {
    __local float xs[PM][PK + 1];
    __local float ws[PK][PN];
    int lx = get_local_id(0), ly = get_local_id(1);
    int row = get_group_id(1) * PM + ly;
    int col0 = get_group_id(0) * PN;
    int lid = ly * 16 + lx;
    w += w_off;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < K; k0 += PK) {
        // x tile: one element per work item
        int k = k0 + lx;
        xs[ly][lx] = (row < M && k < K) ? LD(x, row * K + k) : 0.0f;
        // w tile: PK x PN, four elements per work item
        for (int e = lid; e < PK * PN; e += 256) {
            int kk = e / PN, cc = e % PN;
            int gk = k0 + kk, gc = col0 + cc;
            ws[kk][cc] = (gk < K && gc < N) ? LD(w, gk * N + gc) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < PK; ++kk) {
            float a = xs[ly][kk];
            for (int r = 0; r < 4; ++r) acc[r] = mad(a, ws[kk][lx + 16 * r], acc[r]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row >= M) return;
    for (int r = 0; r < 4; ++r) {
        int col = col0 + lx + 16 * r;
        if (col < N) pre[row * N + col] = acc[r] + LD(bias, bias_off + col);
    }
}

#define TJ 16   // hidden units of a step tile
#define TB 8    // batch rows of a step tile
#define TK 16   // depth of a step tile (== TJ: one h element loaded per work item)

inline float lstm_sigmoid(float v) {
    return 0.5f * (1.0f + tanh(0.5f * v));  // as the reference: no overflow anywhere
}

// One time step `s` of every direction of a layer: global (H, batch, dirs), local (16, 8, 1).
// Direction d works on time t = s (forward) or seq-1-s (backward). h_{t-1} is read from
// h0 (first step: h0 + h0_off, [dirs, batch, H]) or from the layer output y at the previous
// time step ([seq, batch, dirs*H]); c is read from c_in + c_off and written to
// c_out + c_off ([dirs, batch, H]; in place after the first step). The new h goes to y at
// time t and, at the last step (`last`), to hn + c_off.
// whh: [L*dirs, H, 4H] (transposed W_hh) from whh_off (this layer's first direction).
__kernel __attribute__((reqd_work_group_size(TJ, TB, 1)))
void lstm_step(__global const float* pre, __global const data_t* whh, int whh_off,
               __global const data_t* h0, __global const data_t* c_in, __global data_t* c_out,
               int c_off, __global data_t* y, __global data_t* hn, int seq, int batch, int H,
               int s, int first, int last, float zc, float zc1, float zh, float zh1) {
    __local float hs[TB][TK + 1];
    __local float ws[4][TK][TJ];
    int lj = get_local_id(0), lb = get_local_id(1);
    int j = get_group_id(0) * TJ + lj;
    int b = get_group_id(1) * TB + lb;
    int d = get_global_id(2);
    int dirs = get_global_size(2);
    int lid = lb * TJ + lj;
    int G = 4 * H;
    int t = d == 0 ? s : seq - 1 - s;
    int t_prev = d == 0 ? t - 1 : t + 1;
    // h_{t-1}[b, k] = hp[b * hp_stride + k]
    __global const data_t* hp = first ? h0 + c_off + d * batch * H
                                      : y + t_prev * batch * dirs * H + d * H;
    int hp_stride = first ? H : dirs * H;
    __global const data_t* w = whh + whh_off + d * H * G;
    float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
    for (int k0 = 0; k0 < H; k0 += TK) {
        int k = k0 + lj;
        hs[lb][lj] = (b < batch && k < H) ? LD(hp, b * hp_stride + k) : 0.0f;
        for (int e = lid; e < 4 * TK * TJ; e += TJ * TB) {
            int g = e / (TK * TJ), kk = (e / TJ) % TK, jj = e % TJ;
            int gk = k0 + kk, gj = get_group_id(0) * TJ + jj;
            ws[g][kk][jj] = (gk < H && gj < H) ? LD(w, gk * G + g * H + gj) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TK; ++kk) {
            float hv = hs[lb][kk];
            acc0 = mad(hv, ws[0][kk][lj], acc0);
            acc1 = mad(hv, ws[1][kk][lj], acc1);
            acc2 = mad(hv, ws[2][kk][lj], acc2);
            acc3 = mad(hv, ws[3][kk][lj], acc3);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (j >= H || b >= batch) return;
    __global const float* p = pre + (t * batch + b) * dirs * G + d * G + j;
    float gi = lstm_sigmoid(p[0] + acc0);
    float gf = lstm_sigmoid(p[H] + acc1);
    float gg = tanh(p[2 * H] + acc2);
    float go = lstm_sigmoid(p[3 * H] + acc3);
    int si = c_off + (d * batch + b) * H + j;
    float c_prev = LD(c_in, si);
    float c_new = gf * c_prev + gi * gg;
    float h_new = go * tanh(c_new);
    if (zc != 0.0f) c_new = zc * c_prev + zc1 * c_new;
    if (zh != 0.0f) h_new = zh * LD(hp, b * hp_stride + j) + zh1 * h_new;
    ST(c_out, si, c_new);
    ST(y, (t * batch + b) * dirs * H + d * H + j, h_new);
    if (last) ST(hn, si, h_new);
}

// dst[i] = src[i], i < n: hN, cN = h0, c0 when the sequence is empty.
__kernel void lstm_copy(__global const data_t* src, __global data_t* dst, int n) {
    int i = get_global_id(0);
    if (i < n) ST(dst, i, LD(src, i));
}
