import sys, json, time, traceback, warnings
import torch, transformers
import autofuse
import autofuse.capture.backend as afb
import autofuse.capture.regions as afr
from autofuse.api import Recorder
from tests.test_model_families import FAMILIES

name, out_path = sys.argv[1], sys.argv[2]
T0 = time.time()
def log(rec):
    with open(out_path, "a") as f:
        f.write(json.dumps(rec) + "\n")

def af_frames(tb):
    return [f"{f.filename}:{f.lineno} {f.name}"
            for f in traceback.extract_tb(tb) if "/autofuse/" in f.filename][-6:]

# collect CompiledGraph instances
INSTANCES = []
_orig_init = afb.CompiledGraph.__init__
def _init(self, *a, **k):
    _orig_init(self, *a, **k)
    INSTANCES.append(self)
afb.CompiledGraph.__init__ = _init

cfg_cls, model_cls, kw, inputs_fn = FAMILIES[name]
if isinstance(cfg_cls, str): cfg_cls = getattr(transformers, cfg_cls)
if isinstance(model_cls, str): model_cls = getattr(transformers, model_cls)
cfg = cfg_cls(**kw)
for k, v in list(vars(cfg).items()):
    if "drop" in k.lower() and isinstance(v, float):
        setattr(cfg, k, 0.0)
if getattr(cfg, "pad_token_id", None) is None:
    cfg.pad_token_id = 0
if cfg.is_encoder_decoder and getattr(cfg, "decoder_start_token_id", None) is None:
    cfg.decoder_start_token_id = 0 if name == "t5" else cfg.pad_token_id
torch.manual_seed(0)
model = model_cls(cfg).float().eval()
model.generation_config.disable_compile = True
if cfg.is_encoder_decoder and model.generation_config.decoder_start_token_id is None:
    model.generation_config.decoder_start_token_id = cfg.decoder_start_token_id
if model.generation_config.pad_token_id is None:
    model.generation_config.pad_token_id = cfg.pad_token_id
is_s2s = cfg.is_encoder_decoder
if is_s2s:
    inp2 = inputs_fn(); inp2.pop("decoder_input_ids", None)
    g = torch.Generator().manual_seed(2)
    inp3 = {}
    for k, v in inp2.items():
        if v.dtype.is_floating_point:
            extra = torch.randn((1, *v.shape[1:]), generator=g, dtype=v.dtype)
        else:
            extra = torch.randint(0, cfg.vocab_size, (1, *v.shape[1:]), generator=g, dtype=v.dtype)
        inp3[k] = torch.cat([v, extra])
else:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (2, 5), generator=g)
    inp2 = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    ids3 = torch.randint(0, cfg.vocab_size, (3, 5), generator=g)
    inp3 = {"input_ids": ids3, "attention_mask": torch.ones_like(ids3)}
orig_forward = model.forward
base = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=model.generation_config.pad_token_id)
RUNS = [("greedy", inp2, base), ("beam", inp2, dict(base, num_beams=3)), ("greedy_b3", inp3, base)]

rec = {"family": name}
refs = {}
for rn, inp, gk in RUNS:
    try:
        with torch.no_grad():
            refs[rn] = model.generate(**inp, **gk)
    except Exception as e:
        m = str(e).strip().splitlines()
        rec.setdefault("eager_errors", {})[rn] = f"{type(e).__name__}: {m[0] if m else ''}"
rec["eager_s"] = round(time.time() - T0, 1)

torch._dynamo.reset()
recd = Recorder()
model.forward = autofuse.compile(orig_forward, strict=True, use_db=False, dynamic=None, recorder=recd)
allw = []
rec["eq"] = {}; rec["graphs_after"] = {}; rec["errors"] = {}
for rn, inp, gk in RUNS:
    t = time.time()
    try:
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            try:
                with torch.no_grad():
                    got = model.generate(**inp, **gk)
            finally:
                allw.extend(str(w.message) for w in ws)
        if rn in refs:
            ref = refs[rn]
            rec["eq"][rn] = bool(got.shape == ref.shape and torch.equal(got, ref))
            if not rec["eq"][rn]:
                rec.setdefault("mismatch", {})[rn] = {"ref": ref.tolist(), "got": got.tolist()}
        else:
            rec["eq"][rn] = "no eager ref"
    except Exception as e:
        m = str(e).strip().splitlines()
        chain = []
        c = e.__cause__ or e.__context__
        while c is not None and len(chain) < 4:
            cm = str(c).strip().splitlines()
            chain.append({"err": f"{type(c).__name__}: {cm[0] if cm else ''}", "frames": af_frames(c.__traceback__)})
            c = c.__cause__ or c.__context__
        rec["errors"][rn] = {"err": f"{type(e).__name__}: {m[0] if m else ''}", "frames": af_frames(e.__traceback__),
                             "chain": chain, "tb": traceback.format_exc()[-4000:]}
        rec["eq"][rn] = "ERROR"
    rec["graphs_after"][rn] = len(recd.graphs)
    rec[f"{rn}_s"] = round(time.time() - t, 1)

rec["graphs_compiled"] = len(recd.graphs)
rec["outcomes_eager"] = [o.reason[:200] for o in recd.outcomes if not o.compiled]
rec["max_sizes_warning"] = any("max_sizes" in w for w in allw)
rec["warnings"] = sorted({w[:300] for w in allw if "autofuse" in w.lower() and "interpreter" not in w})
rbs = [i for i in INSTANCES if isinstance(getattr(i, "regions", None), afr.RegionsBySize)]
rec["regions_by_size"] = {"count": len(rbs), "keys": [list(map(list, r.regions.programs.keys())) for r in rbs],
                          "reads": [[list(x) for x in r.regions.reads] for r in rbs]}
rec["region_programs"] = sum(1 for i in INSTANCES if isinstance(getattr(i, "regions", None), afr.RegionProgram))
rec["instances"] = len(INSTANCES)
rec["seconds"] = round(time.time() - T0, 1)
log(rec)
print(json.dumps({k: rec[k] for k in ("family", "eq", "graphs_compiled", "max_sizes_warning", "regions_by_size", "seconds")}))
