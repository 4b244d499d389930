"""GPU-only failures of the CUDA suite, diagnosed: who is off, and by how much."""
import sys, time, os, signal
import torch
dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
T0 = time.time()
def log(*a):
    print(f"[{time.time() - T0:5.1f}s]", *a, flush=True)

import autofuse
from tests.test_model_families import _build, _main

def families():
    for name in ("funnel", "segformer"):
        for tf32 in (True, False):
            torch.backends.cudnn.allow_tf32 = tf32
            model, inputs = _build(name)
            model = model.eval()
            ref64 = _main(model.double()(**{k: v.double() if v.is_floating_point() else v for k, v in inputs.items()})).float()
            model = model.float().to(dev)
            kw = {k: v.to(dev) for k, v in inputs.items()}
            with torch.no_grad():
                e = _main(model(**kw)).float().cpu()
                torch._dynamo.reset()
                a = _main(autofuse.compile(model, strict=True, use_db=False)(**kw)).float().cpu()
                torch._dynamo.reset()
                i = _main(torch.compile(model)(**kw)).float().cpu()
            err = lambda x: (x - ref64).abs().max().item()
            log(f"{name} cudnn_tf32={tf32}: vs f64 eager {err(e):.2e} autofuse {err(a):.2e} inductor {err(i):.2e}; autofuse-eager {(a - e).abs().max().item():.2e}")

def seed82():
    from tests.randgraph import make_training_case
    from tests.randgraph_train import training_step
    fn, args, src = make_training_case(82, dev)
    e = training_step(fn, args)
    torch._dynamo.reset()
    i = training_step(torch.compile(fn), args)
    torch._dynamo.reset()
    a = training_step(autofuse.compile(fn, strict=True, use_db=False), args)
    log("seed82 eager grads nan:", [None if g is None else torch.isnan(g).sum().item() for g in e.grads])
    log("seed82 inductor:", [None if g is None else torch.isnan(g).sum().item() for g in i.grads])
    log("seed82 autofuse:", [None if g is None else torch.isnan(g).sum().item() for g in a.grads])

def argsort64():
    x = torch.randn(24500 if dev == "cuda" else 3, 1024, device=dev)
    f = lambda x: torch.argsort((x * 1000).long(), dim=-1, stable=True)
    torch._dynamo.reset()
    c = autofuse.compile(f, strict=True, use_db=False)
    log("argsort64 compiling")
    r = c(x)
    if dev == "cuda":
        torch.cuda.synchronize()
    log("argsort64 first call done; equal:", torch.equal(r, f(x)))
    for _ in range(3):
        t = time.time(); c(x); torch.cuda.synchronize() if dev == "cuda" else None
        log(f"argsort64 call {1000 * (time.time() - t):.2f} ms")

for step in sys.argv[2:]:
    try:
        globals()[step]()
    except Exception as ex:
        log(step, "failed:", type(ex).__name__, str(ex)[:300])
