source .whl/prelude.sh || exit 1
timeout 150 python3 probe/models_debug.py > $OUT/models_debug.txt 2>&1; echo "debug rc $?"; grep -v Warning $OUT/models_debug.txt | tail -40
timeout 200 python3 probe/breadth_gpu.py 2>&1 | grep -v -i warn | tail -12
