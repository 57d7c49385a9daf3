set -u
export PYTHONPATH=$PWD/tools:$PWD/tests/python
t0=$(date +%s)
{ [ -d build-gpu ] && cmake --build build-gpu --target parity_bench > $OUT/build.log 2>&1; } || { OUT=$OUT scripts/gpu_build.sh python3 $PWD/.gpuhdr > $OUT/build.log 2>&1 && cmake --build build-gpu --target parity_bench >> $OUT/build.log 2>&1; } || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
python3 - <<'PY' 2>/dev/null
import sys, torch
sys.path.insert(0, "tests/python")
import custom_op_model
from parity_capture import capture
class One(torch.nn.Module):
    def forward(self, x): return custom_op_model.scaled_gelu(x, 0.5)
for shape in ((16,64),(1024,1024)):
    capture(One(), (torch.randn(*shape),), f"/tmp/one-{shape[0]}", name="one")
PY
for d in 16 1024; do
  python3 scripts/.wprof_tmp.py /tmp/w.sock 2> $OUT/wprof-$d.err &
  wp=$!
  while [ ! -S /tmp/w.sock ]; do sleep 0.2; done
  PARITY_WORKER_SOCKET=/tmp/w.sock build-gpu/parity_bench interp /tmp/one-$d --iters 300 --import custom_op_model 2>&1 | tail -2
  kill -TERM $wp; wait $wp 2>/dev/null; rm -f /tmp/w.sock
  grep -v Warn $OUT/wprof-$d.err | grep -v "return cls"
done
python3 - <<'PY'
import torch, time, statistics, ctypes, mmap, os
n = 4 << 20
f = open("/dev/shm/cp-test", "w+b"); f.truncate(n); m = mmap.mmap(f.fileno(), n)
src = torch.randn(n // 4)
dst = torch.frombuffer(m, dtype=torch.float32)
torch.set_num_threads(1)
for _ in range(10): dst.copy_(src)
s=[]
for _ in range(100):
    t=time.perf_counter(); dst.copy_(src); s.append(time.perf_counter()-t)
print("1-thread copy 4 MB into shm: %.0f us" % (statistics.median(s)*1e6))
os.unlink("/dev/shm/cp-test")
PY
echo "all $(( $(date +%s) - t0 )) s"
