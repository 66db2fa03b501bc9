#!/usr/bin/env bash
# The vector builds of the element-wise kernels stay vector code: no
# function of the AVX2 (x86-64-v3) or AVX-512 (x86-64-v4) clones may hold a
# scalar float compare. GCC 12 lowers a compare of vectors wider than the
# target's registers lane by lane through the stack (16-float blocks in the
# AVX2 clones made the softmax and cross-entropy several times slower), and
# nothing else would notice: the results stay right. Skipped (77) where the
# kernels are built once (not GCC on x86-64, ThreadSanitizer), in builds
# that are not optimised (Debug, the sanitizer builds), or without objdump.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"

case "${KT_BUILD_TYPE:-Release}" in
  Release | RelWithDebInfo | MinSizeRel) ;;
  *) echo "SKIP: a $KT_BUILD_TYPE build is not optimised"; exit 77 ;;
esac
command -v objdump >/dev/null || { echo "SKIP: no objdump"; exit 77; }
objdump -d --no-show-raw-insn "$K" >"$tmp/dis" 2>/dev/null || { echo "SKIP: objdump failed"; exit 77; }
clones=$(grep -cE '^[0-9a-f]+ <kt__[a-z_]+\.arch_x86_64_v[34]>:$' "$tmp/dis")
[ "$clones" -gt 0 ] || { echo "SKIP: no target clones in this build"; exit 77; }
echo "$clones vector clones"

# per clone: its scalar float compares (comiss / ucomiss, VEX or not)
awk '/^[0-9a-f]+ <.*>:$/ { f = ($2 ~ /^<kt__[a-z_]+\.arch_x86_64_v[34]>:$/) ? $2 : ""; next }
     f != "" && $2 ~ /^v?u?comiss$/ { n[f]++ }
     END { for (k in n) print n[k], k }' "$tmp/dis" >"$tmp/scalar"
if [ -s "$tmp/scalar" ]; then
  bad "scalar float compares in vector clones: $(tr '\n' ' ' <"$tmp/scalar")"
else
  ok
fi
# the softmax and the cross-entropy are among the clones checked
has "kt__attention_forward.arch_x86_64_v3" "$tmp/dis"
has "kt__crossentropy_forward.arch_x86_64_v3" "$tmp/dis"
finish test_kernel_codegen
