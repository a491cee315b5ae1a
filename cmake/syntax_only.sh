#!/bin/sh
# The compiler launcher of the CUDA compile check (DtsimTorchCudaCheck.cmake): its objects
# are never linked, so the compiler only checks the code (-fsyntax-only: no code generation,
# about half the time) and writes its dependency file, and an empty object stands where
# the build expects one.
out=""
prev=""
for arg in "$@"; do
  [ "$prev" = "-o" ] && out="$arg"
  prev="$arg"
done
"$@" -fsyntax-only || exit $?
[ -z "$out" ] || : > "$out"
