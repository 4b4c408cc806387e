// Element-wise binaries with numpy broadcasting, and activations.
// table: as pair_offsets (cl/common.cl) takes it; equal shapes pass rank 0.

#define OP_ADD 0
#define OP_SUB 1
#define OP_MUL 2
#define OP_DIV 3
#define OP_MAX 4
#define OP_MIN 5
#define OP_SQUARED_DIFFERENCE 6
#define OP_MOD 7

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
    case OP_MOD: return fmod(x, y);
    default: return x;
    }
}

__kernel void binary(__global const data_t* a, __global const data_t* b, __global data_t* out,
                     int n, int op, __global const int* table, int act, POST_PARAMS) {
    int i = get_global_id(0);
    if (i >= n) return;
    int2 at = pair_offsets(table, i);
    float v = activate(binary_op(LD(a, at.x), LD(b, at.y), op), act, 0.0f, 0.0f, 0.0f, 0);
    ST(out, i, POST(v, i));
}

__kernel void activation(__global const data_t* x, __global data_t* out, int n, int act,
                         float alpha, float lo, float hi, int approx) {
    int i = get_global_id(0);
    if (i >= n) return;
    ST(out, i, activate(LD(x, i), act, alpha, lo, hi, approx));
}
