// Max / average pooling, NHWC or NCHW (nchw flag), with the node's fused activation and the
// plan's epilogue. Average pooling divides by the window's real (unpadded) cells.
// geo: N, H, W, C, OH, OW, kh, kw, stride_h, stride_w, pad_top, pad_left.

inline float max_nan(float a, float b) {  // numpy's maximum: NaN from either side wins
    return (a != a) ? a : ((b > a || b != b) ? b : a);
}

// One work-item per output element; the window (a few cells) is looped over.
__kernel void pool_window(__global const data_t* x, __global data_t* out, int total,
                          __global const int* geo, int nchw, int is_max, int act,
                          POST_PARAMS) {
    int i = get_global_id(0);
    if (i >= total) return;
    const int H = geo[1], W = geo[2], C = geo[3], OH = geo[4], OW = geo[5];
    int n, c, oh, ow, t;
    if (nchw) {
        ow = i % OW; t = i / OW; oh = t % OH; t /= OH; c = t % C; n = t / C;
    } else {
        c = i % C; t = i / C; ow = t % OW; t /= OW; oh = t % OH; n = t / OH;
    }
    const int sh = nchw ? W : W * C, sw = nchw ? 1 : C;
    const int base = nchw ? (n * C + c) * H * W : n * H * W * C + c;
    const int h0 = oh * geo[8] - geo[10], w0 = ow * geo[9] - geo[11];
    const int hs = max(h0, 0), he = min(h0 + geo[6], H);
    const int ws = max(w0, 0), we = min(w0 + geo[7], W);
    float acc = is_max ? -INFINITY : 0.0f;
    for (int h = hs; h < he; ++h) {
        __global const data_t* row = x + base + h * sh;
        for (int w = ws; w < we; ++w) {
            float v = LD(row, w * sw);
            acc = is_max ? max_nan(acc, v) : acc + v;
        }
    }
    if (!is_max) acc *= 1.0f / (float)((he - hs) * (we - ws));
    float v = activate(acc, act, 0.0f, 0.0f, 0.0f, 0);
    ST(out, i, POST(v, i));
}

// A window covering the whole H x W plane (global pooling): work-group (LX, LY), LX
// channels side by side (NHWC: adjacent addresses), LY lanes striding over the plane's
// cells, then a tree reduction over the lanes in local memory. LX * LY <= 256, LY a power
// of two. Global (C rounded up to LX, LY, N). The output [N, C] (flat in both layouts).
__kernel void pool_plane(__global const data_t* x, __global data_t* out, int C, int cells,
                         int nchw, int is_max, int act, POST_PARAMS) {
    __local float part[256];
    const int lx = get_local_id(0), ly = get_local_id(1);
    const int LX = get_local_size(0), LY = get_local_size(1);
    const int c = get_global_id(0), n = get_global_id(2);
    const int cell_step = nchw ? 1 : C;
    const int base = nchw ? (n * C + c) * cells : n * cells * C + c;
    float acc = is_max ? -INFINITY : 0.0f;
    if (c < C) {
        for (int p = ly; p < cells; p += LY) {
            float v = LD(x, base + p * cell_step);
            acc = is_max ? max_nan(acc, v) : acc + v;
        }
    }
    part[ly * LX + lx] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = LY / 2; s > 0; s >>= 1) {
        if (ly < s) {
            float a = part[ly * LX + lx], b = part[(ly + s) * LX + lx];
            part[ly * LX + lx] = is_max ? max_nan(a, b) : a + b;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (ly == 0 && c < C) {
        float v = part[lx];
        if (!is_max) v /= (float)cells;
        v = activate(v, act, 0.0f, 0.0f, 0.0f, 0);
        ST(out, n * C + c, POST(v, n * C + c));
    }
}
