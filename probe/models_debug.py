"""Why bf16 inference of real models fails under autofuse on CUDA: the full traceback."""
import sys, traceback, torch
import autofuse
from benchmarks.models import build
for name in ("gpt2", "bert"):
    b = build(name, tiny=False, train=False, device="cuda")
    model = b.model.to(torch.bfloat16).eval()
    f = autofuse.compile(model, strict=True, use_db=False)
    try:
        with torch.no_grad():
            out = f(**b.inputs)
            ref = model(**b.inputs)
        print(name, "ok", type(out))
    except Exception:
        traceback.print_exc(limit=-14)
    torch._dynamo.reset()
