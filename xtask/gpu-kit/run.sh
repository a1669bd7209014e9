#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU, its driver and PyTorch (CUDA), and no Rust.
# Made beside kit.tar.xz by `cargo xtask gpu-kit`; run from anywhere:
#
#     OUT=/some/folder bash target/gpu-kit/run.sh
#
# Runs, within KIT_BUDGET_S seconds (default 420), each step under its own timeout:
#   the GPU tests (im2col route against burn's convolution, NVRTC) on cuda and wgpu;
#   ResNet-18 3x32x32 batch 128 benchmarks (Bayesian training step, MC inference with 30
#   samples), ours on cuda and wgpu, interleaved with PyTorch at fp32 (TF32 off) and TF32 on;
#   a short Fashion-MNIST ResNet-20 reproduction on cuda.
# Everything lands under $OUT: results.jsonl (one JSON line per measurement), gpu.csv
# (nvidia-smi samples), env.txt, vulkan.txt (the Vulkan diagnostics and wgpu's ICD tries), run.log, and logs.tar.gz (each step's stdout and stderr, the
# reproduction's folder).
#
# KIT_STEPS="name name ..." runs only the steps named.
# KIT_PART=1 runs only the tests and the first round of benchmarks, KIT_PART=2 only the rest
# (for a device time cut into two calls); the default runs both. KIT_PART=cache runs only the
# cache measurement (each CUDA benchmark in a process with an empty cache, then in a second;
# KIT_COLD_S, default 200, limits the first training process, which compiles everything).
# KIT_DRY=1 runs the same steps at toy sizes (for a CPU machine with lavapipe: the cuda steps
# then end in their clean "cannot run here" error, and the PyTorch steps are skipped).
set -u
KIT_DIR=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-out}
LOGS=$OUT/logs
mkdir -p "$LOGS"
exec > >(tee -a "$OUT/run.log") 2>&1
BUDGET=${KIT_BUDGET_S:-420}
DRY=${KIT_DRY:-0}
PART=${KIT_PART:-all}
part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
# Panics keep their backtraces; error reports (anyhow) do not.
export RUST_LIB_BACKTRACE=0
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }

# step NAME TIMEOUT_S COMMAND...: runs COMMAND with stdout in NAME.out and stderr in NAME.err,
# and appends its JSON lines to results.jsonl with the step's name.
step() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${KIT_STEPS:-}" ] && [[ " $KIT_STEPS " != *" $name "* ]]; then
    return
  fi
  local left=$(( BUDGET - $(elapsed) ))
  if (( left < 20 )); then
    echo "SKIP $name: ${left}s of the budget left"
    return
  fi
  (( limit > left - 10 )) && limit=$(( left - 10 ))
  echo "== $name (limit ${limit}s, at $(elapsed)s)"
  local t0=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$LOGS/$name.out" 2> "$LOGS/$name.err"
  local rc=$?
  echo "   rc=$rc in $(( $(date +%s) - t0 ))s"
  tail -n 4 "$LOGS/$name.err" | sed 's/^/   | /'
  grep '^{' "$LOGS/$name.out" | sed "s/^{/{\"step\": \"$name\", /" >> "$OUT/results.jsonl"
  grep -E '^test result|FAILED|panicked|^test .*FAILED' "$LOGS/$name.out" | head -n 8 | sed 's/^/   > /'
}

KIT=$(mktemp -d)
tar -xJf "$KIT_DIR/kit.tar.xz" -C "$KIT" || { echo "cannot unpack the kit"; exit 1; }
BIN=$KIT/bin

# NVRTC and the CUDA runtime libraries from PyTorch's nvidia wheels, where no toolkit is installed.
LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
SITE=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
for s in $SITE; do
  for d in "$s"/nvidia/cu13/lib "$s"/nvidia/*/lib; do
    [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
done
[ -d /usr/local/cuda/lib64 ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64"
export LD_LIBRARY_PATH
# The headers NVRTC includes: the kit's, else the machine's.
if [ -f "$KIT/cuda/include/cuda_fp16.h" ]; then
  export CUDA_PATH=$KIT/cuda
elif [ -z "${CUDA_PATH:-}" ] && [ ! -f /usr/local/cuda/include/cuda_fp16.h ]; then
  for s in $SITE; do
    [ -f "$s/nvidia/cu13/include/cuda_fp16.h" ] && export CUDA_PATH=$s/nvidia/cu13
  done
fi
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  lscpu | grep -E 'Model name|^CPU\(s\)'
  echo "CUDA_PATH=${CUDA_PATH:-}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
  ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/nvidia/share/vulkan/icd.d 2>&1
  ldconfig -p | grep -E 'libvulkan|libnvrtc' 
  ls "$KIT/bin"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -lms 500 \
  > "$OUT/gpu.csv" 2>/dev/null &
SMI=$!
trap 'kill $SMI 2>/dev/null' EXIT

if [ "$DRY" = 1 ]; then
  ARCH=(--arch resnet20 --input 1x28 --batch 8)
  STEPS=(--steps 1)
  MC=(--samples 2 --batches 1 --warmup 1)
  PEER=(echo "dry run: no PyTorch on CUDA")
  REPRO=(--train-subset 200 --test-subset 100 --samples 2)
else
  ARCH=(--arch resnet18 --input 3x32 --batch 128)
  STEPS=(--steps 10)
  MC=(--samples 30 --batches 1 --warmup 2)
  PEER=(python3 "$KIT/peers/torch_gpu_bench.py" --arch resnet18 --input 3x32 --batch 128
        --steps 10 --samples 30 --batches 1 --kind bayesian)
  REPRO=(--train-subset 5000 --test-subset 1000 --samples 10)
fi
TRAIN=("$BIN/xtask" bench train-step "${ARCH[@]}" "${STEPS[@]}" --kind bayesian --estimator reparam)
INFER=("$BIN/xtask" bench mc-inference "${ARCH[@]}" "${MC[@]}" --kind bayesian --estimator reparam)

# wgpu needs the Vulkan loader to find NVIDIA's driver (an ICD file naming its library). GPU
# machines ship it in different places, or not at all ("no adapter found" on one H200 where
# the day before's H100s ran wgpu). Before the steps: the Vulkan diagnostics into vulkan.txt,
# then a tiny wgpu run with the loader's default, with each NVIDIA ICD file found, and with
# one written for the driver's own library; the first that starts is kept for every wgpu step
# (VK_ICD_FILENAMES, and VK_DRIVER_FILES for newer loaders). WGPU_BACKEND is not the lever:
# cubecl-wgpu 0.11 chooses its wgpu backends itself and does not read it.
vulkan_probe() {
  timeout -k 3 90 "$BIN/xtask" bench mc-inference --arch resnet20 --input 1x28 --batch 2 \
    --samples 1 --batches 1 --warmup 0 --kind bayesian --estimator reparam --backend wgpu
}
pick_vulkan() {
  local tries=("") f lib
  {
    echo "== Vulkan diagnostics"
    ls -l /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/nvidia/share/vulkan/icd.d 2>&1
    ldconfig -p | grep -E 'libvulkan|libGLX_nvidia|libnvidia-vulkan|libEGL_nvidia'
    command -v vulkaninfo > /dev/null && timeout 20 vulkaninfo --summary 2>&1 | head -n 60
    nvidia-smi -q 2>/dev/null | grep -iE 'driver version|cuda version'
  } >> "$OUT/vulkan.txt" 2>&1
  for f in /usr/share/vulkan/icd.d/nvidia*.json /etc/vulkan/icd.d/nvidia*.json \
           /usr/local/nvidia/share/vulkan/icd.d/*.json /usr/share/vulkan/icd.d/*nvidia*.json; do
    [ -f "$f" ] && [[ " ${tries[*]} " != *" $f "* ]] && tries+=("$f")
  done
  lib=$(ldconfig -p | awk '/libGLX_nvidia\.so\.0/ {print $NF; exit}')
  if [ -n "$lib" ]; then
    f=$KIT/nvidia_icd.json
    printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' \
      "$lib" > "$f"
    tries+=("$f")
  fi
  for f in "${tries[@]}"; do
    if [ -n "$f" ]; then
      export VK_ICD_FILENAMES=$f VK_DRIVER_FILES=$f
    else
      unset VK_ICD_FILENAMES VK_DRIVER_FILES
    fi
    echo "== wgpu with the ICD ${f:-of the default search}" >> "$OUT/vulkan.txt"
    if vulkan_probe >> "$OUT/vulkan.txt" 2>&1; then
      echo "wgpu: a Vulkan adapter with the ICD ${f:-of the default search}"
      return 0
    fi
  done
  unset VK_ICD_FILENAMES VK_DRIVER_FILES
  echo "wgpu: no Vulkan adapter with any of ${#tries[@]} ICD choices (vulkan.txt); the wgpu steps will fail"
  return 1
}
if [ "$PART" != cache ] && { [ -z "${KIT_STEPS:-}" ] || [[ "$KIT_STEPS" == *wgpu* ]]; }; then
  pick_vulkan
fi

# KIT_PART=cache (only when named): the persistent caches. Each CUDA benchmark twice, in two
# processes, the first with an empty cache folder, beside the PyTorch peer; then the folder's size.
if [ "$PART" = cache ]; then
export SWBNN_CACHE_DIR=$KIT/cubecl-cache
rm -rf "$SWBNN_CACHE_DIR"
step peer-fp32-c 60 "${PEER[@]}"
step cuda-train-cold "${KIT_COLD_S:-200}" "${TRAIN[@]}" --backend cuda
step cuda-train-warm 75 "${TRAIN[@]}" --backend cuda
step cuda-infer-cold 100 "${INFER[@]}" --backend cuda
step cuda-infer-warm 60 "${INFER[@]}" --backend cuda
du -sh "$SWBNN_CACHE_DIR"/* 2>&1 | sed 's/^/   cache: /'
fi

if part 1; then
# The tests first: a failing kernel makes its figures meaningless.
step test-cuda 60 env SWBNN_TEST_BACKEND=cuda "$BIN/bnn-layers-lib-tests" gpu_route cuda_tests
step test-wgpu 45 env SWBNN_TEST_BACKEND=wgpu "$BIN/bnn-layers-lib-tests" gpu_route

# First round: each of ours beside the peer, in one call on one GPU. The first CUDA step of a
# process compiles its kernels with NVRTC and autotunes them, hence the longer limits.
step peer-fp32-1 60 "${PEER[@]}"
step wgpu-train-1 60 "${TRAIN[@]}" --backend wgpu
step wgpu-infer-1 60 "${INFER[@]}" --backend wgpu
step wgpu-burnconv-infer-1 60 env SWBNN_GPU_CONV=burn "${INFER[@]}" --backend wgpu
step peer-tf32-1 60 "${PEER[@]}" --tf32
step cuda-train-1 150 "${TRAIN[@]}" --backend cuda
step cuda-infer-1 120 "${INFER[@]}" --backend cuda
step cuda-im2col-train-1 150 env SWBNN_GPU_CONV=im2col "${TRAIN[@]}" --backend cuda
step cuda-im2col-infer-1 120 env SWBNN_GPU_CONV=im2col "${INFER[@]}" --backend cuda
fi

if part 2; then
# A short reproduction: three stages, one epoch each, on a Fashion-MNIST subset; no OOD set.
echo '{"ood": null}' > "$KIT/no-ood.json"
step repro-cuda 120 "$BIN/xtask" reproduce fashion-mnist --quick --arch resnet20 --backend cuda \
  --data "$KIT/data" --epochs 1 "${REPRO[@]}" --setup "$KIT/no-ood.json" --out "$LOGS/repro-cuda"

# Where a CUDA process spends its time: cubecl's compilation, autotune and profiling log of a
# short MC run (each compiled kernel, each tuning decision, kernel timings), every line stamped
# with the seconds since the start, and each thread's CPU ticks once a second (cubecl's device
# thread compiles with NVRTC). Both cut to 8 MiB.
diag() {
  # Its own limit, below the step's: the step's timeout signals this shell, not the benchmark.
  timeout -k 3 135 "$@" 2>&1 1>"$LOGS/cuda-diag.json" | python3 -c 'import sys, time
t0 = time.time()
for line in sys.stdin:
    sys.stdout.write("%.3f %s" % (time.time() - t0, line))' &
  sleep 1
  local pid
  pid=$(pgrep -n -x xtask)
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do
    echo "T $(date +%s.%N | cut -c1-14)" >&2
    for t in /proc/"$pid"/task/*; do echo "$(cat "$t"/comm) $(awk '{print $14 + $15}' "$t"/stat)" >&2; done
    sleep 1
  done
  wait
}
export -f diag
export LOGS
step cuda-diag-infer 150 bash -c 'diag "$@"' diag env CUBECL_DEBUG_LOG=stderr "$BIN/xtask" bench \
  mc-inference "${ARCH[@]}" --samples 5 --batches 3 --warmup 1 --kind bayesian \
  --estimator reparam --backend cuda
for f in cuda-diag-infer.out cuda-diag-infer.err; do
  [ -f "$LOGS/$f" ] && truncate -s '<8M' "$LOGS/$f"
done

# A second round with what time is left, for the spread.
step peer-fp32-2 60 "${PEER[@]}"
step cuda-train-2 60 "${TRAIN[@]}" --backend cuda
step cuda-infer-2 60 "${INFER[@]}" --backend cuda
step wgpu-infer-2 60 "${INFER[@]}" --backend wgpu
step peer-tf32-2 60 "${PEER[@]}" --tf32
fi

[ -f "$LOGS/repro-cuda/table.md" ] && cat "$LOGS/repro-cuda/table.md"
echo "== results"
cat "$OUT/results.jsonl" 2>/dev/null
# Few files come back from a GPU machine: the logs travel as one archive.
tar --exclude='*.bpk' -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
echo "done in $(elapsed)s; results in $OUT"
