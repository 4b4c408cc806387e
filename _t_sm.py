import sys, numpy as np, pyopencl as cl
from nnrt.drivers.gpu.kernel import cl_source
ctx = cl.create_some_context(False); q = cl.CommandQueue(ctx)
src = cl_source("softmax")
prg = cl.Program(ctx, src).build()
x = (np.random.default_rng(0).standard_normal(7)*3).astype(np.float32)
mf = cl.mem_flags
xb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
ob = cl.Buffer(ctx, mf.READ_WRITE, x.nbytes)
k = cl.Kernel(prg, ["softmax","log_softmax"][int(sys.argv[1])])
k.set_args(xb, ob, np.int32(7), np.int32(1))
cl.enqueue_nd_range_kernel(q, k, (128,), (128,))
out = np.empty_like(x); cl.enqueue_copy(q, out, ob); q.finish(); print(out)
