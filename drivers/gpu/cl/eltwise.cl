// Element-wise binaries with numpy broadcasting, and activations.
// table: rank, dims[rank], a_strides[rank], b_strides[rank] (elements; 0 where the operand
// is broadcast along that axis). Equal shapes pass rank 0 and index both operands by i.

#define OP_ADD 0
#define OP_SUB 1
#define OP_MUL 2
#define OP_DIV 3
#define OP_MAX 4
#define OP_MIN 5
#define OP_SQUARED_DIFFERENCE 6

inline float binary_op(float x, float y, int op) {
    switch (op) {
    case OP_ADD: return x + y;
    case OP_SUB: return x - y;
    case OP_MUL: return x * y;
    case OP_DIV: return x / y;
    // numpy's maximum / minimum propagate NaN from either side
    case OP_MAX: return (x != x || y != y) ? x + y : fmax(x, y);
    case OP_MIN: return (x != x || y != y) ? x + y : fmin(x, y);
    case OP_SQUARED_DIFFERENCE: return (x - y) * (x - y);
    default: return x;
    }
}

__kernel void binary(__global const float* a, __global const float* b, __global float* out,
                     int n, int op, __global const int* table, int act, POST_PARAMS) {
    int i = get_global_id(0);
    if (i >= n) return;
    int rank = table[0];
    int ia = i, ib = i;
    if (rank > 0) {
        int rest = i;
        ia = 0;
        ib = 0;
        for (int d = rank - 1; d >= 0; --d) {
            int dim = table[1 + d];
            int coord = rest % dim;
            rest /= dim;
            ia += coord * table[1 + rank + d];
            ib += coord * table[1 + 2 * rank + d];
        }
    }
    float v = activate(binary_op(a[ia], b[ib], op), act, 0.0f, 0.0f, 0.0f, 0);
    out[i] = POST(v, i);
}

__kernel void activation(__global const float* x, __global float* out, int n, int act,
                         float alpha, float lo, float hi, int approx) {
    int i = get_global_id(0);
    if (i >= n) return;
    out[i] = activate(x[i], act, alpha, lo, hi, approx);
}
