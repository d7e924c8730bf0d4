#!/usr/bin/env bash
# Builds DJL's PyTorch JNI (libdjl_torch.so) from DJL's published sources against an installed
# libtorch, and installs it beside that libtorch, where DJL looks for a JNI first. Used by
# deploy/docker/Dockerfile.cuda (--build-arg JNI=source); the same recipe as ../shared/gpu/build-jni.sh
# (seen working against libtorch 2.11 on an H200), for a libtorch archive's layout.
#
#   build-djl-jni.sh DJL_SOURCES LIBTORCH JDK [CUDA_INCLUDE]
#
#   DJL_SOURCES  DJL's source tree at the tag of the DJL the trainer uses (v0.35.1): the JNI's sources
#                are engines/pytorch/pytorch-native/src/main/native, its utils.h is under
#                api/src/main/native, and its header is generated here with `javac -h` from
#                PyTorchLibrary.java (DJL_CLASSPATH: jars with DJL's classes, e.g. the shaded jar).
#                The layout of ../shared/gpu's bundle (native/, utils/, include/) is taken too.
#   LIBTORCH     the libtorch root: lib/libtorch.so, include/, build-version
#   JDK          a JDK (include/jni.h, bin/javac)
#   CUDA_INCLUDE CUDA's headers (default /usr/local/cuda/include); "none" for a CPU libtorch
#
# Writes LIBTORCH/lib/libdjl_torch.so and LIBTORCH/lib/libdjl_torch.properties (torch_version, the
# libtorch's build-version; djl_version), which `spark-trainer doctor` reads. JOBS sets parallel
# compilers (default: nproc). DRY_RUN=1 prints the compile and link commands instead of running them.
set -euo pipefail

die() { echo "build-djl-jni.sh: $*" >&2; exit 2; }

[ $# -ge 3 ] || die "usage: build-djl-jni.sh DJL_SOURCES LIBTORCH JDK [CUDA_INCLUDE]"
src=$1 torch=$2 jdk=$3 cuda=${4:-/usr/local/cuda/include}
djl_version=${DJL_VERSION:-0.35.1}
jni="$jdk/include"

[ -f "$torch/lib/libtorch.so" ] || die "$torch has no lib/libtorch.so: expected a libtorch root"
[ -d "$torch/include/torch/csrc/api/include" ] || die "$torch has no include/torch/csrc/api/include (a libtorch without headers?)"
[ -f "$jni/jni.h" ] || die "$jdk has no include/jni.h: expected a JDK"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ -d "$src/native" ] && [ -d "$src/include" ]; then # the bundle of ../shared/gpu
  native="$src/native" includes=("-I$src/include" "-I$src/utils")
else # DJL's source tree
  native="$src/engines/pytorch/pytorch-native/src/main/native"
  java="$src/engines/pytorch/pytorch-engine/src/main/java/ai/djl/pytorch/jni/PyTorchLibrary.java"
  [ -d "$native" ] || die "$src has no engines/pytorch/pytorch-native/src/main/native: expected DJL's source tree"
  [ -f "$java" ] || die "$src has no PyTorchLibrary.java (engines/pytorch/pytorch-engine)"
  [ -n "${DJL_CLASSPATH:-}" ] || die "DJL_CLASSPATH is not set: javac -h needs DJL's classes (e.g. the shaded jar)"
  "$jdk/bin/javac" -h "$out/include" -d "$out/classes" -cp "$DJL_CLASSPATH" "$java" \
    || die "javac -h could not generate the JNI header from $java"
  includes=("-I$out/include" "-I$src/api/src/main/native")
fi
ls "$native"/*.cc > /dev/null 2>&1 || die "$native has no .cc files"
version=$(head -n 1 "$torch/build-version" 2> /dev/null || true)
[ -n "$version" ] || die "$torch has no build-version: cannot record which libtorch the JNI is built for"

# The C++ ABI of the libtorch: its libraries export std::__cxx11 symbols when built with the new one.
abi=0
if nm -D --defined-only "$torch/lib/libc10.so" 2> /dev/null | grep -q '__cxx11'; then abi=1; fi

flags=(-c -O2 -fPIC -std=c++17 -w "-D_GLIBCXX_USE_CXX11_ABI=$abi"
  "-I$native" "${includes[@]}" "-I$jni" "-I$jni/linux"
  "-I$torch/include" "-I$torch/include/torch/csrc/api/include")
libs=(-ltorch -ltorch_cpu -lc10)
if [ "$cuda" != none ]; then
  [ -d "$cuda" ] || die "no CUDA headers at $cuda (give CUDA_INCLUDE, or none for a CPU libtorch)"
  [ -f "$torch/lib/libtorch_cuda.so" ] || die "$torch has no lib/libtorch_cuda.so: a CPU libtorch (pass none as CUDA_INCLUDE)"
  flags+=(-DUSE_CUDA "-I$cuda")
  libs+=(-ltorch_cuda -lc10_cuda)
fi

run() { if [ "${DRY_RUN:-0}" = 1 ]; then echo "$*"; else "$@"; fi; }
export -f run
# One g++ per source file, JOBS at a time; xargs appends the file to: OUT_DIR FLAGS...
# shellcheck disable=SC2016 # the inner script's variables are the inner shell's
printf '%s\0' "$native"/*.cc | xargs -0 -n 1 -P "${JOBS:-$(nproc)}" bash -c \
  'o=$1; f=${!#}; set -- "${@:2:$#-2}"; run g++ "$@" "$f" -o "$o/$(basename "$f" .cc).o"' _ "$out" "${flags[@]}" \
  || die "compiling DJL's JNI failed (above)"
run g++ -shared -o "$torch/lib/libdjl_torch.so" "$out"/*.o "-L$torch/lib" "${libs[@]}" "-Wl,-rpath,$torch/lib"
if [ "${DRY_RUN:-0}" != 1 ]; then
  printf 'torch_version=%s\ndjl_version=%s\ncxx11_abi=%s\n' "$version" "$djl_version" "$abi" \
    > "$torch/lib/libdjl_torch.properties"
fi
echo "JNI built for libtorch $version (C++11 ABI $abi): $torch/lib/libdjl_torch.so"
