// Gather with run-time indices: built with -DT=<element type> -DIDX=<int or long>.
// out[o, j, r] = x[o, idx[j], r] (x viewed as [outer, axis_size, inner]); a negative index
// counts from the end; one outside [-axis_size, axis_size) sets *bad (the run then fails,
// as the reference's does) and writes 0.
__kernel void gather_checked(__global const T* src, __global T* dst, int n, int axis_size,
                             int inner, int n_idx, __global const IDX* idx,
                             __global int* bad) {
    int i = get_global_id(0);
    if (i >= n) return;
    int r = i % inner;
    int t = i / inner;
    int j = t % n_idx;
    int o = t / n_idx;
    long k = (long)idx[j];
    if (k < 0) k += axis_size;
    if (k < 0 || k >= axis_size) {
        *bad = 1;
        dst[i] = (T)0;
        return;
    }
    dst[i] = src[((long)o * axis_size + k) * inner + r];
}
