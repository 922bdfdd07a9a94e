#!/bin/bash
# A prepared device check for issue 14's host-cpu target on a bigger real space: one 4-core row (options E, 3-1,
# 2-2, 2-1-1, 1-1-1-1; "4", the same as E, was an option of its own until session 53) of guided vs the thesis'
# search, real ONNX Runtime. Session 45 ran four rows at once and all
# hit their limit; session 46 ran one row alone at 300 frames + 50 warm-up (SAMPLE=300 WARMUP=50 LIMIT=530, this
# script's defaults then) and its guided search did not finish in 530 s (load average 4 on the 4 cores). The defaults
# are now 100 frames + 20 warm-up; METHODS (default "guided default") allows one method per lease if that is still
# too long (the bench then compares against the method it ran only, so merge the two JSONs by hand).
#
# Before the lease, here, in the repo's root (the machine has numpy, pandas, pyarrow, onnx, onnxruntime, matplotlib;
# these are the rest):
#   echo /.whl/ >> .git/info/exclude; mkdir -p .whl
#   P="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any"
#   for n in hydra-core omegaconf deap moocore cffi platformdirs pycparser onnx_graphsurgeon; do
#     python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $P -d .whl $n; done
#   pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3     # sdist only on PyPI; a pure-Python wheel
# Then: device run with carry [".whl"], timeout_s 580, command `bash notes/session45/device-host-cpu.sh`.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nproc; lscpu | grep -E "Model name|Model:|Hypervisor"; python3 -c "import onnxruntime; print(onnxruntime.__version__)"; } > $OUT/env.txt 2>&1
( while sleep 15; do echo "$(date -u +%T) $(cat /proc/loadavg)"; done ) > $OUT/load.txt 2>&1 &
timeout ${LIMIT:-540} taskset -c 0-3 python3 -m bench.guided_quality --platform host-cpu --networks yolov4-tiny \
  --precisions fp32 --repeats 3 --methods ${METHODS:-guided default} --tag host-cpu-4core benchmark.input_size=160 \
  benchmark.sample_size=${SAMPLE:-100} benchmark.warmup=${WARMUP:-20} > $OUT/log.txt 2>&1
echo "rc=$?" >> $OUT/log.txt
cp bench/results/guided_quality-host-cpu-4core.json $OUT/ 2>/dev/null
grep -v Warning $OUT/log.txt | tail -n 8
