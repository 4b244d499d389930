"""Where autofuse loses to Inductor on breadth categories: per-program time and per-kernel profile."""
import os, sys, json, time, statistics
import torch, torch.nn as nn, torch.nn.functional as F
import autofuse

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
dev = "cuda"
OUT = os.environ.get("OUT", "out")

def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3))))

class Fn(nn.Module):
    def __init__(self, f, mods=()):
        super().__init__(); self.f = f; self.mods = nn.ModuleList(mods)
    def forward(self, *a): return self.f(self, *a)

def progs():
    r = lambda *s, dt=torch.float32: torch.randn(*s, device=dev, dtype=dt)
    yield "conv2d_relu", Fn(lambda m, x: torch.relu(m.mods[0](x) * 2.0 + 1.0), [nn.Conv2d(64, 64, 3, padding=1)]), [r(32, 64, 128, 128)]
    yield "conv3d_add_sig", Fn(lambda m, x: torch.sigmoid(m.mods[0](x)) + 0.5, [nn.Conv3d(16, 32, 3, padding=1)]), [r(8, 16, 32, 64, 64)]
    yield "convT2d_tanh", Fn(lambda m, x: torch.tanh(m.mods[0](x)), [nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1)]), [r(16, 64, 64, 64)]
    yield "conv2d_groupnorm", Fn(lambda m, x: m.mods[1](m.mods[0](x)), [nn.Conv2d(32, 64, 3, padding=1), nn.GroupNorm(8, 64)]), [r(32, 32, 128, 128)]
    yield "conv3d_instnorm", Fn(lambda m, x: m.mods[1](m.mods[0](x)), [nn.Conv3d(16, 32, 3, padding=1), nn.InstanceNorm3d(32)]), [r(8, 16, 32, 64, 64)]
    yield "softmax_dim0", Fn(lambda m, x: torch.softmax(x, 0)), [r(4096, 16384)]
    yield "softmax_dim1_of3", Fn(lambda m, x: torch.softmax(x, 1)), [r(64, 1024, 1024)]
    yield "layernorm_chw", Fn(lambda m, x: F.layer_norm(x, x.shape[1:])), [r(128, 64, 32, 32)]

def bench(f, args, reps=30):
    for _ in range(3): f(*args)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record(); f(*args); e.record(); e.synchronize(); ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)

def kernels(f, args):
    from torch.profiler import profile, ProfilerActivity
    f(*args); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        f(*args); torch.cuda.synchronize()
    rows = []
    for ev in p.key_averages():
        if ev.device_type.name == "CUDA" and ev.self_device_time_total > 0:
            rows.append((ev.key[:70], round(ev.self_device_time_total, 1), ev.count))
    return sorted(rows, key=lambda r: -r[1])[:6]

table = []
log = open(os.path.join(OUT, "breadth_log.txt"), "w")
for name, m, args in progs():
    m = m.to(dev).eval()
    row = {"name": name}
    with torch.no_grad():
        ref = m(*args)
        from autofuse.schedule.heuristics import Heuristics
        variants = {"eager": m, "inductor": torch.compile(m),
                    "af_cl": autofuse.compile(m, heuristics=Heuristics(conv_layout="channels_last"), use_db=False),
                    "af_given": autofuse.compile(m, heuristics=Heuristics(conv_layout="as_given"), use_db=False)}
        for v, f in variants.items():
            try:
                t0 = time.time(); out = f(*args); torch.cuda.synchronize(); ct = time.time() - t0
                err = (out.float() - ref.float()).abs().max().item()
                row[v] = bench(f, args); row[v + "_err"] = err
                print(f"== {name} {v}: {row[v]:.1f} us, compile {ct:.1f}s, err {err:.2e}", file=log)
                for k in kernels(f, args): print("   ", k, file=log)
            except Exception as e:
                row[v] = float("nan"); print(f"== {name} {v}: FAIL {type(e).__name__}: {str(e)[:300]}", file=log)
        if True:
            try:
                rep = autofuse.explain(m, args)
                print(str(rep)[:3000], file=log)
            except Exception as e:
                print("explain failed", e, file=log)
    log.flush()
    table.append(row)
    torch._dynamo.reset()
print(f"{'program':22s} {'eager':>9s} {'inductor':>9s} {'af_cl':>9s} {'af_given':>9s}")
for r in table:
    print(f"{r['name']:22s} {r['eager']:9.1f} {r['inductor']:9.1f} {r['af_cl']:9.1f} {r['af_given']:9.1f}")
json.dump(table, open(os.path.join(OUT, "breadth.json"), "w"), indent=1)
