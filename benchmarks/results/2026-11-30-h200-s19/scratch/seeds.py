"""Held-out metrics of the shipped recipe (gbr regressor + pair ranker, no compile) on all nine exports,
split seeds given on the command line; run from a checkout (its feature schema) with DATA (env) naming
this commit's costmodel/data, e.g. `cd OTHER_CHECKOUT && DATA=/path/to/main/costmodel/data PYTHONPATH=. python .../seeds.py 1 2`."""
import gzip, json, os, sys
from pathlib import Path
from costmodel.model import usable, fit
from costmodel.evaluate import split_by_graph, evaluate
from costmodel.features import FEATURE_SCHEMA
from costmodel.predict import LearnedPredictor
rows = []
for p in sorted(Path(os.environ.get("DATA", "costmodel/data")).glob("*.jsonl.gz")):
    with gzip.open(p, "rt") as f:
        rows += [json.loads(l) for l in f]
rows = usable(rows)
for seed in map(int, sys.argv[1:]):
    train, test = split_by_graph(rows, 0.25, seed)
    m = fit(train, "gbr", 0, compile=False)
    r = evaluate(LearnedPredictor(m), test)
    print(json.dumps({"schema": FEATURE_SCHEMA, "split_seed": seed, **r.to_json()}), flush=True)
