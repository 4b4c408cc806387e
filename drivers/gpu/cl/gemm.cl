// Batched GEMM: out[batch][m][n] = POST(activate(sum_k A(m,k) * B(k,n) + bias[n]), index)
// for MatMulFusion and FullConnection.
//
// Operands are addressed through strides, so that transposes cost nothing:
//   A(m, k) = a[a_off + m * a_rs + k * a_cs],   B(k, n) = b[b_off + k * b_rs + n * b_cs]
// and the output is dense [batch, M, N]. The batch index (dimension 2 of the NDRange) is
// decomposed with `table`: rank, dims[rank], a_strides[rank], b_strides[rank] (elements;
// 0 where an operand is broadcast along that batch axis); rank 0 means one batch.
//
// gemm: a 64x64 output tile per 16x16 work-group, 4x4 outputs per work-item (rows
// ty + 16 i, columns tx + 16 j: conflict-free local reads, coalesced stores), K in tiles
// of 16 staged in local memory, zero-filled past the edges.
// gemv: small M (a few rows, e.g. batch-1 MLP): one row and 64 columns per 64x4
// work-group, the 4 rows of work-items splitting K, reduced in local memory.

#define TS 64   // output tile (rows and columns) of a work-group
#define TK 16   // K tile staged in local memory
#define WPT 4   // outputs per work-item along each dimension
#define RTS 16  // work-items along each dimension (TS / WPT)


__kernel __attribute__((reqd_work_group_size(RTS, RTS, 1)))
void gemm(__global const data_t* a, __global const data_t* b, __global const data_t* bias,
          __global data_t* out, int M, int N, int K, int a_rs, int a_cs, int b_rs, int b_cs,
          int has_bias, int act, __global const int* table, POST_PARAMS) {
    __local float As[TK][TS + 1];
    __local float Bs[TK][TS];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int tid = ty * RTS + tx;
    const int n0 = get_group_id(0) * TS, m0 = get_group_id(1) * TS;
    const int batch = get_global_id(2);
    const int2 off = pair_offsets(table, batch);
    a += off.x;
    b += off.y;

    float acc[WPT][WPT];
    for (int i = 0; i < WPT; ++i)
        for (int j = 0; j < WPT; ++j) acc[i][j] = 0.0f;

    // Which way consecutive work-items walk a tile when loading it: along the operand's
    // contiguous dimension (uniform over the work-group).
    const int a_k_fast = a_cs == 1;
    const int b_n_fast = b_cs == 1 || b_rs != 1;

    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int i = 0; i < (TS * TK) / (RTS * RTS); ++i) {
            int e = tid + i * RTS * RTS;
            int r = a_k_fast ? e / TK : e % TS;
            int c = a_k_fast ? e % TK : e / TS;
            int m = m0 + r, k = k0 + c;
            As[c][r] = (m < M && k < K) ? LD(a, m * a_rs + k * a_cs) : 0.0f;
        }
        for (int i = 0; i < (TS * TK) / (RTS * RTS); ++i) {
            int e = tid + i * RTS * RTS;
            int r = b_n_fast ? e / TS : e % TK;
            int c = b_n_fast ? e % TS : e / TK;
            int k = k0 + r, n = n0 + c;
            Bs[r][c] = (k < K && n < N) ? LD(b, k * b_rs + n * b_cs) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TK; ++kk) {
            float ar[WPT], br[WPT];
            for (int i = 0; i < WPT; ++i) ar[i] = As[kk][ty + RTS * i];
            for (int j = 0; j < WPT; ++j) br[j] = Bs[kk][tx + RTS * j];
            for (int i = 0; i < WPT; ++i)
                for (int j = 0; j < WPT; ++j) acc[i][j] += ar[i] * br[j];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    const int base = batch * M * N;
    for (int i = 0; i < WPT; ++i) {
        int m = m0 + ty + RTS * i;
        if (m >= M) break;
        for (int j = 0; j < WPT; ++j) {
            int n = n0 + tx + RTS * j;
            if (n >= N) break;
            float v = acc[i][j];
            if (has_bias) v += LD(bias, n);
            v = activate(v, act, 0.0f, 0.0f, 0.0f, 0);
            int index = base + m * N + n;
            ST(out, index, POST(v, index));
        }
    }
}

#define GV_N 64  // columns per work-group
#define GV_K 4   // work-items splitting K per column

__kernel __attribute__((reqd_work_group_size(GV_N, GV_K, 1)))
void gemv(__global const data_t* a, __global const data_t* b, __global const data_t* bias,
          __global data_t* out, int M, int N, int K, int a_rs, int a_cs, int b_rs, int b_cs,
          int has_bias, int act, __global const int* table, POST_PARAMS) {
    __local float part[GV_K][GV_N];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int n = get_group_id(0) * GV_N + tx;
    const int m = get_group_id(1);
    const int batch = get_global_id(2);
    const int2 off = pair_offsets(table, batch);
    a += off.x + m * a_rs;
    b += off.y;

    float acc = 0.0f;
    if (n < N) {
        for (int k = ty; k < K; k += GV_K) acc += LD(a, k * a_cs) * LD(b, k * b_rs + n * b_cs);
    }
    part[ty][tx] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (ty == 0 && n < N) {
        float v = (part[0][tx] + part[1][tx]) + (part[2][tx] + part[3][tx]);
        if (has_bias) v += LD(bias, n);
        v = activate(v, act, 0.0f, 0.0f, 0.0f, 0);
        int index = batch * M * N + m * N + n;
        ST(out, index, POST(v, index));
    }
}
