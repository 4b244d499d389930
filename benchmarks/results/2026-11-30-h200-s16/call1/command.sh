set -x
nvidia-smi --query-gpu=name,driver_version --format=csv
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)"
mkdir -p $OUT/probe; python3 -m benchmarks.stream_probe --out $OUT/probe --reps 50 --rounds 7 2>&1 | tee $OUT/probe/log.txt
