// Comparisons, logical operators and Select / Where (ops/op_compare.py, ops/op_select.py):
// bool results stored as uchar 0 / 1, numpy broadcasting through the tables of
// pair_offsets (cl/common.cl) and triple_offsets below.
//
// compare: both operands of type TA (-DTA=<OpenCL type>), compared in that type: half
// (-DA_HALF) is read with vload_half (exact in float, so a float comparison is the half
// one), bool (-DA_BOOL) as x != 0. IEEE: every comparison with NaN is false but !=.
// logical: operand a of type TA, b of type TB, each taken as x != 0 (NaN is true, as in C).
// select_values (select is a built-in): values moved as raw bits of type T (-DT=uchar/ushort/uint/ulong).

#ifdef NEED_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#ifdef A_HALF
#define A_STORE half
#define LOAD_A(p, i) vload_half((i), (p))
#elif defined(A_BOOL)
#define A_STORE uchar
#define LOAD_A(p, i) ((p)[i] != 0)
#elif defined(TA)
#define A_STORE TA
#define LOAD_A(p, i) ((p)[i])
#endif

#ifdef B_HALF
#define B_STORE half
#define LOAD_B(p, i) vload_half((i), (p))
#elif defined(TB)
#define B_STORE TB
#define LOAD_B(p, i) ((p)[i])
#endif

#define CMP_EQUAL 0
#define CMP_NOT_EQUAL 1
#define CMP_GREATER 2
#define CMP_GREATER_EQUAL 3
#define CMP_LESS 4
#define CMP_LESS_EQUAL 5

#define LOGICAL_AND 0
#define LOGICAL_OR 1
#define LOGICAL_NOT 2

#ifdef TA
__kernel void compare(__global const A_STORE* a, __global const A_STORE* b,
                      __global uchar* out, int n, int op, __global const int* table) {
    int i = get_global_id(0);
    if (i >= n) return;
    int2 at = pair_offsets(table, i);
    bool r;
    switch (op) {
    case CMP_EQUAL: r = LOAD_A(a, at.x) == LOAD_A(b, at.y); break;
    case CMP_NOT_EQUAL: r = LOAD_A(a, at.x) != LOAD_A(b, at.y); break;
    case CMP_GREATER: r = LOAD_A(a, at.x) > LOAD_A(b, at.y); break;
    case CMP_GREATER_EQUAL: r = LOAD_A(a, at.x) >= LOAD_A(b, at.y); break;
    case CMP_LESS: r = LOAD_A(a, at.x) < LOAD_A(b, at.y); break;
    default: r = LOAD_A(a, at.x) <= LOAD_A(b, at.y); break;
    }
    out[i] = r ? 1 : 0;
}
#endif

#if defined(TA) && defined(TB)
// LOGICAL_NOT reads a only (b is bound to a).
__kernel void logical(__global const A_STORE* a, __global const B_STORE* b,
                      __global uchar* out, int n, int op, __global const int* table) {
    int i = get_global_id(0);
    if (i >= n) return;
    int2 at = pair_offsets(table, i);
    bool x = LOAD_A(a, at.x) != 0;
    bool r;
    if (op == LOGICAL_NOT) {
        r = !x;
    } else {
        bool y = LOAD_B(b, at.y) != 0;
        r = op == LOGICAL_AND ? (x && y) : (x || y);
    }
    out[i] = r ? 1 : 0;
}
#endif

#ifdef T
// Three strided operands read at the coordinates of one dense index i: table = rank,
// dims[rank], then the strides of the condition, x1 and x2 (0 along broadcast axes).
inline int3 triple_offsets(__global const int* table, int i) {
    int rank = table[0];
    int rest = i;
    int3 off = (int3)(0, 0, 0);
    for (int d = rank - 1; d >= 0; --d) {
        int dim = table[1 + d];
        int coord = rest % dim;
        rest /= dim;
        off.x += coord * table[1 + rank + d];
        off.y += coord * table[1 + 2 * rank + d];
        off.z += coord * table[1 + 3 * rank + d];
    }
    return off;
}

// out = cond ? x1 : x2; a rank-0 table means all three are dense over the output's shape.
__kernel void select_values(__global const uchar* cond, __global const T* x1, __global const T* x2,
                     __global T* out, int n, __global const int* table) {
    int i = get_global_id(0);
    if (i >= n) return;
    int3 at = table[0] == 0 ? (int3)(i, i, i) : triple_offsets(table, i);
    out[i] = cond[at.x] != 0 ? x1[at.y] : x2[at.z];
}
#endif
