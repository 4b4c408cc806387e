// Data movement (Transpose, Concat, Split, SliceFusion, StridedSlice, Gather, PadFusion,
// Resize): values are moved as raw bits of the element type T, chosen by the host with
// -DT=uchar/ushort/uint/ulong for 1/2/4/8-byte elements, so every dtype moves bit-exactly.
// Only resize_interp computes (float32, whatever T is).
//
// Shape tables are int32: table = rank, dims[rank], then one or two stride rows[rank]
// (elements; may be negative: a reversed strided slice).

#ifndef T
#define T uint
#endif

#define TILE 16

// dst[dst_off + sum c_d * dst_stride_d] = src[src_off + sum c_d * src_stride_d] for every
// coordinate c of dims; table = rank, dims, src_strides, dst_strides.
__kernel void strided_copy(__global const T* src, __global T* dst, int n, int src_off,
                           int dst_off, __global const int* table) {
    int i = get_global_id(0);
    if (i >= n) return;
    int2 at = pair_offsets(table, i);
    dst[dst_off + at.y] = src[src_off + at.x];
}

// out[b, c, r] = in[b, r, c] for in of shape [batch, rows, cols]: a TILE x TILE tile read
// coalesced along cols into local memory, written coalesced along rows.
// Global (round_up(cols, TILE), round_up(rows, TILE), batch), local (TILE, TILE, 1).
__kernel void transpose_tiled(__global const T* src, __global T* dst, int rows, int cols) {
    __local T tile[TILE][TILE + 1];
    int lx = get_local_id(0), ly = get_local_id(1);
    int c0 = get_group_id(0) * TILE, r0 = get_group_id(1) * TILE;
    int b = get_global_id(2);
    int plane = rows * cols;
    __global const T* in = src + b * plane;
    __global T* out = dst + b * plane;
    int r = r0 + ly, c = c0 + lx;
    if (r < rows && c < cols) tile[ly][lx] = in[r * cols + c];
    barrier(CLK_LOCAL_MEM_FENCE);
    int oc = c0 + ly, orow = r0 + lx;  // out row oc (a column of in), out column orow
    if (oc < cols && orow < rows) out[oc * rows + orow] = tile[lx][ly];
}

// Gather along one axis of x viewed as [outer, axis_size, inner]; idx holds n_idx indices
// already in [0, axis_size). out is [outer, n_idx, inner].
__kernel void gather_axis(__global const T* src, __global T* dst, int n, int axis_size,
                          int inner, int n_idx, __global const int* idx) {
    int i = get_global_id(0);
    if (i >= n) return;
    int r = i % inner;
    int t = i / inner;
    int j = t % n_idx;
    int o = t / n_idx;
    dst[i] = src[(o * axis_size + idx[j]) * inner + r];
}

#define PAD_CONSTANT 0
#define PAD_REFLECT 1
#define PAD_SYMMETRIC 2

// out = x padded; table = rank, out_dims, in_dims, before, in_strides (contiguous x).
// The amounts are at most the size - 1 (REFLECT) or the size (SYMMETRIC): one mirror.
__kernel void pad(__global const T* src, __global T* dst, int n, __global const int* table,
                  int mode, ulong fill_bits) {
    int i = get_global_id(0);
    if (i >= n) return;
    int rank = table[0];
    int rest = i, s = 0, inside = 1;
    for (int k = rank - 1; k >= 0; --k) {
        int dim = table[1 + k];
        int c = rest % dim;
        rest /= dim;
        int size = table[1 + rank + k];
        int x = c - table[1 + 2 * rank + k];
        if (x < 0) {
            if (mode == PAD_CONSTANT) inside = 0;
            x = mode == PAD_REFLECT ? -x : -x - 1;
        } else if (x >= size) {
            if (mode == PAD_CONSTANT) inside = 0;
            x = mode == PAD_REFLECT ? 2 * size - 2 - x : 2 * size - 1 - x;
        }
        s += x * table[1 + 3 * rank + k];
    }
    dst[i] = inside ? src[s] : (T)fill_bits;
}

// Resize of a 4-D x whose spatial axes are ah < aw (1, 2 for NHWC; 2, 3 for NCHW).
// table = out_dims[4], in_strides[4], ah, aw. Per output row/column, taps tables of
// K entries each: hidx[K * out_h] (tap-major: hidx[k * out_h + oh]), widx likewise.
__kernel void resize_nearest(__global const T* src, __global T* dst, int n,
                             __global const int* table, __global const int* hidx,
                             __global const int* widx) {
    int i = get_global_id(0);
    if (i >= n) return;
    int ah = table[8], aw = table[9];
    int rest = i, s = 0;
    for (int k = 3; k >= 0; --k) {
        int dim = table[k];
        int c = rest % dim;
        rest /= dim;
        if (k == ah) c = hidx[c];
        else if (k == aw) c = widx[c];
        s += c * table[4 + k];
    }
    dst[i] = src[s];
}

// (Bi)linear / (bi)cubic with K taps per axis and their weights, float32: along H first
// (each of the K columns), then along W, summed in tap order as the reference does.
__kernel void resize_interp(__global const float* src, __global float* dst, int n,
                            __global const int* table, __global const int* hidx,
                            __global const float* hw, __global const int* widx,
                            __global const float* ww, int taps) {
    int i = get_global_id(0);
    if (i >= n) return;
    int ah = table[8], aw = table[9];
    int out_h = table[ah], out_w = table[aw];
    int rest = i, base = 0, oh = 0, ow = 0;
    for (int k = 3; k >= 0; --k) {
        int dim = table[k];
        int c = rest % dim;
        rest /= dim;
        if (k == ah) oh = c;
        else if (k == aw) ow = c;
        else base += c * table[4 + k];
    }
    int sh = table[4 + ah], sw = table[4 + aw];
    float acc = 0.0f;
    for (int kw = 0; kw < taps; ++kw) {
        int col = base + widx[kw * out_w + ow] * sw;
        float v = 0.0f;
        for (int kh = 0; kh < taps; ++kh) {
            v += src[col + hidx[kh * out_h + oh] * sh] * hw[kh * out_h + oh];
        }
        acc += v * ww[kw * out_w + ow];
    }
    dst[i] = acc;
}
