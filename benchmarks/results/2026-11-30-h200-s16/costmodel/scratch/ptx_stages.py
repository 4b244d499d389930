"""Scratch (session 16): does num_stages change a pointwise kernel's code? Six sampled pointwise
kernels and six persistent reductions of call 2's collection compiled for sm_90 at num_stages 1, 2 and 3: a hash of the PTX with
comments stripped per value, then the diff of one kernel whose hashes differ. Run from the
repository root with PYTHONPATH=."""
import gzip, json, re, hashlib
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from costmodel.compiled import _jit_function, gpu_module_source, _launch, default_signature, _not_interpreted
seen=0
with gzip.open('costmodel/data/h200-2026-11-30-s16.jsonl.gz','rt') as fh:
    recs=[json.loads(l)['features'] for l in fh]
pw=[r for r in recs if r['kind']=='pointwise']
import random; random.Random(1).shuffle(pw)
pers=[r for r in recs if r['kind']=='reduction' and r['config'].get('persistent')]
random.Random(1).shuffle(pers)
for r in pw[:6] + pers[:6]:
    src=gpu_module_source(r['source'], r['kernel_fn'])
    fn=_jit_function(src, r['kernel_fn'])
    out=[]
    for st in (1,2,3):
        cfg=dict(r['config'], num_stages=st); launch=_launch(cfg)
        sig=dict(r['signature']); ce={k:launch[k] for k in ("XBLOCK","RBLOCK") if k in fn.arg_names}; sig.update({k:"constexpr" for k in ce})
        with _not_interpreted():
            k=triton.compile(ASTSource(fn,sig,ce),target=GPUTarget("cuda",90,32),options={"num_warps":launch["num_warps"],"num_stages":st})
        ptx=re.sub(r'//.*','',k.asm['ptx'])
        out.append(hashlib.sha1(ptx.encode()).hexdigest()[:8])
    print(r['config'], out)
import difflib
r=pw[3]
src=gpu_module_source(r['source'], r['kernel_fn']); fn=_jit_function(src, r['kernel_fn'])
ptxs=[]
for st in (1,2):
    launch=_launch(dict(r['config'],num_stages=st)); sig=dict(r['signature']); ce={k:launch[k] for k in ("XBLOCK","RBLOCK") if k in fn.arg_names}; sig.update({k:"constexpr" for k in ce})
    with _not_interpreted():
        k=triton.compile(ASTSource(fn,sig,ce),target=GPUTarget("cuda",90,32),options={"num_warps":launch["num_warps"],"num_stages":st})
    ptxs.append(re.sub(r'//.*','',k.asm['ptx']).splitlines())
d=list(difflib.unified_diff(ptxs[0],ptxs[1],lineterm='',n=0))
print(len(d)); print("\n".join(d[:30]))
print(r['source'][r['source'].index('def KERNEL'):][:1500])
