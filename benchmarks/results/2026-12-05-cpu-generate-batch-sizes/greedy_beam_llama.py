import torch, transformers, warnings, time
import autofuse
from autofuse.api import Recorder
from autofuse.capture import backend as B
made=[]
init=B.CompiledGraph.__init__
def rec_init(self,*a,**k):
    init(self,*a,**k); made.append(self)
B.CompiledGraph.__init__=rec_init
import sys
if len(sys.argv) > 1: B.split_by_symbols = lambda gm: None
cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2, vocab_size=200, max_position_embeddings=64)
torch.manual_seed(0)
model = transformers.LlamaForCausalLM(cfg).eval()
model.generation_config.disable_compile = True
ids = torch.randint(0, 200, (2, 5), generator=torch.Generator().manual_seed(0))
kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
with torch.no_grad():
    want_g = model.generate(ids, **kw); want_b = model.generate(ids, num_beams=3, **kw)
fwd = model.forward
rec = Recorder()
model.forward = torch.compile(fwd, backend="autofuse", options={"strict": True, "use_db": False, "recorder": rec})
t=time.time()
with torch.no_grad(), warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    got_g = model.generate(ids, **kw); got_b = model.generate(ids, num_beams=3, **kw)
    got_g2 = model.generate(ids, **kw)
print("greedy equal", torch.equal(got_g, want_g), "beam equal", torch.equal(got_b, want_b), "greedy again", torch.equal(got_g2, want_g))
print("graphs compiled", len(rec.graphs), "secs", round(time.time()-t,1))
print([type(g.regions).__name__ for g in made if g.regions is not None])
print([str(x.message)[:120] for x in w if "autofuse" in str(x.message) and "interpreter" not in str(x.message)])
