#!/usr/bin/env bash
# CI (no GPU): compile the ROCm backend both ways from the same HIP sources,
#   nvidia: nvcc to compute_90 PTX, against the CUDA runtime (ptxas's sm_90 machine code, 40% of
#           nvcc's time, is built and run on the GPU machine by scripts/gpu_check.sh);
#   amd:    Debian's HIP (clang 15, HIP 5.2) for gfx90a (wave64) and gfx1030 (wave32).
# Nothing here runs a kernel: scripts/gpu_check.sh does that on the GPU machine.
# Needs the .venv made by scripts/setup.sh (nanobind is added for the _rocm module) and PyFlame
# installed in it: the core library holds no GPU code, so the backends link that one
# (PYFLAME_PREBUILT_CORE) instead of compiling it twice more.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q nanobind scipy-openblas32
targets=(pyflame_rocm _rocm)
core=(-DPYFLAME_PREBUILT_CORE=ON "-DCMAKE_PREFIX_PATH=$(python -m pyflame.info --cmake-prefix-path)")

echo "== ROCm backend, NVIDIA flavour (nvcc)"
# cuBLAS, cuBLASLt and cuDNN headers and libraries (to link against), and NCCL's header (its
# library is opened at run time), from NVIDIA's PyPI wheels.
nvlibs=build/nvidia-libs
if [ ! -f $nvlibs/nvidia/cudnn/include/cudnn.h ] || [ ! -f $nvlibs/nvidia/cu13/include/cublas_v2.h ] \
   || ! compgen -G "$nvlibs/nvidia/cu13/lib/libcublasLt.so*" > /dev/null || [ ! -f $nvlibs/nvidia/nccl/include/nccl.h ]; then
  mkdir -p $nvlibs/wheels
  python -m pip download -q --no-deps -d $nvlibs/wheels "nvidia-cublas>=13,<14" "nvidia-cudnn-cu13>=9,<10" \
    "nvidia-nccl-cu13>=2.18,<3"
  (cd $nvlibs && unzip -q -o 'wheels/nvidia_cublas-*.whl' 'nvidia/cu13/include/*' 'nvidia/cu13/lib/libcublas.so*' \
     'nvidia/cu13/lib/libcublasLt.so*' \
     && unzip -q -o 'wheels/nvidia_cudnn_cu13-*.whl' 'nvidia/cudnn/include/*' 'nvidia/cudnn/lib/libcudnn.so.9' \
     && unzip -q -o 'wheels/nvidia_nccl_cu13-*.whl' 'nvidia/nccl/include/nccl.h' \
     && rm -rf wheels)
fi
cmake -S . -B build/ci-nvidia -G Ninja -DPYFLAME_USE_ROCM=ON -DPYFLAME_HIP_PLATFORM=nvidia \
  -DPYFLAME_BUILD_PYTHON=ON "${core[@]}" -DCMAKE_CUDA_ARCHITECTURES=90-virtual "-DPYFLAME_NVIDIA_LIBS=$PWD/$nvlibs/nvidia" \
  > build/ci-nvidia.log
cmake --build build/ci-nvidia --target "${targets[@]}"

echo "== ROCm backend, AMD flavour (Debian's HIP for gfx90a and gfx1030)"
# Without the BLAS and DNN adapters (src/rocm/blas.cpp, dnn.cpp, tuning.cpp): rocBLAS
# is not packaged in Debian 12 (it is in Debian 13) and MIOpen is not packaged at all;
# the BLAS adapter is compiled on its own below, against Debian 13's rocBLAS headers.
if ! command -v clang++-15 > /dev/null || [ ! -f /usr/include/hip/hip_runtime.h ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq hipcc libamdhip64-dev rocm-device-libs > /dev/null
fi
# Debian keeps ROCm under /usr; its 5.2-era CMake files predate CMake 4's policy floor.
HIP_PLATFORM=amd CMAKE_PREFIX_PATH=/usr/lib/x86_64-linux-gnu/cmake cmake -S . -B build/ci-amd -G Ninja \
  -DPYFLAME_USE_ROCM=ON -DPYFLAME_HIP_PLATFORM=amd -DPYFLAME_BUILD_PYTHON=ON "${core[@]}" -DROCM_PATH=/usr \
  -DPYFLAME_WITH_BLAS=OFF -DPYFLAME_WITH_DNN=OFF \
  -DCMAKE_HIP_COMPILER=clang++-15 "-DCMAKE_HIP_ARCHITECTURES=gfx90a;gfx1030" \
  "-DCMAKE_HIP_FLAGS=--rocm-path=/usr --hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode" \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 > build/ci-amd.log
HIP_PLATFORM=amd cmake --build build/ci-amd --target "${targets[@]}"

echo "== Run-time compiled kernels: every shared functor through Debian's hiprtc (gfx90a, gfx1030)"
PYFLAME_REQUIRE_RTC=hiprtc python -m pytest -q -p no:cacheprovider tests/python/test_rtc_headers.py

echo "== BLAS adapter and NCCL layer, AMD flavour (rocBLAS and RCCL headers from Debian 13; compiled, not linked)"
# Only the -dev packages' headers: the libraries themselves would load at run time on an AMD machine.
debian_headers() {  # debian_headers PACKAGE DIR: Debian 13's package unpacked into DIR
  local debian=http://deb.debian.org/debian deb
  mkdir -p "$2"
  deb=$(curl -fsSL $debian/dists/trixie/main/binary-amd64/Packages.xz | xz -dc \
        | awk "/^Package: $1\$/,/^\$/" | sed -n 's/^Filename: //p')
  curl -fsSL -o "$2/$1.deb" "$debian/$deb"
  dpkg-deb -x "$2/$1.deb" "$2" && rm "$2/$1.deb"
}
rocblas=build/rocblas-dev
[ -f $rocblas/usr/include/rocblas/rocblas.h ] || debian_headers librocblas-dev $rocblas
rccl=build/rccl-dev
[ -f $rccl/usr/include/rccl/rccl.h ] || debian_headers librccl-dev $rccl
c++ -D__HIP_PLATFORM_AMD__=1 -Isrc -Iinclude -I$rccl/usr/include -std=c++20 -O2 -fPIC -Wall -Wextra \
  -Wno-unused-parameter -Werror -c src/rocm/nccl.cpp -o build/ci-amd/nccl_rccl.o
c++ -D__HIP_PLATFORM_AMD__=1 -Isrc -Iinclude -I$rocblas/usr/include -std=c++20 -O2 -fPIC -Wall -Wextra \
  -Wno-unused-parameter -Werror -c src/rocm/blas.cpp -o build/ci-amd/blas_rocblas.o
# The kernels that call rocBLAS: the convolutions through im2col (what runs without MIOpen) and
# the LSTM recurrence, for both wave sizes.
for kernel in conv rnn; do
  HIP_PLATFORM=amd clang++-15 -x hip --offload-arch=gfx90a --offload-arch=gfx1030 --rocm-path=/usr \
    --hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode -DPYFLAME_WITH_BLAS=1 -Isrc -Iinclude \
    -I$rocblas/usr/include -std=c++20 -O2 -fPIC -c src/rocm/kernels/$kernel.hip -o build/ci-amd/${kernel}_rocblas.o
done
echo "both GPU flavours compiled"
