#!/usr/bin/env bash
# Output paths: -o and --report never destroy what the path names. A
# character device and a FIFO are written through, a symlink's target is
# replaced (the link stays), a directory is refused with one line, a
# read-only directory gives one clear error naming the user's path, and no
# temp file is ever left behind. Every writing command goes through it.
set -u
K=$(realpath "$1")
. "$(dirname "$0")/lib.sh"
cd "$tmp" || exit 1
gen=(sim -s 1f1b -p 2 -m 4)

# every command that writes -o / --report, with the flag it writes through
writers=("sim -s 1f1b -p 2 -m 4 -o" "sim -s 1f1b -p 2 -m 4 --report" "compare -p 2 -m 4 -o"
         "compare -p 2 -m 4 --report" "plan --model llama-7b --devices 8 --mem-gb 80 --global-batch 64 -o")

# --- a character device: written through, never replaced --------------------------
if [ "$(id -u)" = 0 ] && mknod nulldev c 1 3 2>/dev/null; then
  for w in "${writers[@]}"; do
    expect 0 "$K" $w nulldev
    [ -c nulldev ] && ok || bad "'$w nulldev' replaced the device"
  done
  ls -a | grep -q '\.tmp\.' && bad "temp file left beside the device" || ok
else
  echo "test_output_paths: SKIP the device case (mknod needs root)"
fi
# /dev/stdout is a device (or a pipe) too
expect 0 "$K" "${gen[@]}" -o /dev/stdout
has "period" "$tmp/out"

# --- a FIFO with a reader gets the whole output; without one: one line, exit 1 ----
mkfifo ff
cat ff >from_fifo &
reader=$!
# the reader must be waiting in open() before kaiten looks for one (kaiten
# starts in about a millisecond: it can get there before cat does)
for _ in $(seq 500); do
  [ "$(readlink "/proc/$reader/exe" 2>/dev/null)" != "$(readlink -f "$(command -v cat)")" ] && { sleep 0.01; continue; }
  [ "$(awk '{print $3}' "/proc/$reader/stat" 2>/dev/null)" = S ] && break
  sleep 0.01
done
expect 0 "$K" "${gen[@]}" --format json -o ff
wait $reader
[ -p ff ] && ok || bad "the FIFO was replaced"
has '"makespan"' from_fifo
expect 1 timeout 10 "$K" "${gen[@]}" -o ff
oneline; has "no reader" "$tmp/err"

# --- a symlink: its target is replaced atomically, the link stays a link ------------
echo old >target.json
ln -s target.json link.json
expect 0 "$K" "${gen[@]}" --format json -o link.json
[ -L link.json ] && ok || bad "the symlink was replaced by a regular file"
has '"makespan"' target.json
# a dangling link creates its target; a relative link resolves from its own directory
mkdir sub
ln -s ../made.json sub/dangling.json
expect 0 "$K" "${gen[@]}" --format json -o sub/dangling.json
[ -L sub/dangling.json ] && [ -f made.json ] && ok || bad "dangling link not followed"
# the mode of a replaced file is kept
echo x >mode.txt; chmod 600 mode.txt
expect 0 "$K" "${gen[@]}" -o mode.txt
[ "$(stat -c %a mode.txt)" = 600 ] && ok || bad "mode changed to $(stat -c %a mode.txt)"

# --- a directory: refused with one line naming it -----------------------------------
mkdir outdir
for w in "${writers[@]}"; do
  expect 2 "$K" $w outdir
  oneline; has "outdir' is a directory" "$tmp/err"
done
[ -d outdir ] && [ -z "$(ls -A outdir)" ] && ok || bad "the directory was touched"

# --- a missing directory: one line naming the user's path ---------------------------
expect 1 "$K" "${gen[@]}" -o nodir/x.txt
oneline; has "nodir/x.txt" "$tmp/err"

# --- a read-only directory: one line naming the user's path, no temp name -----------
mkdir ro
if [ "$(id -u)" = 0 ]; then mount -t tmpfs -o ro,size=64k tmpfs ro 2>/dev/null || chattr +i ro 2>/dev/null; else chmod 555 ro; fi
if touch ro/probe 2>/dev/null; then
  rm -f ro/probe
  echo "test_output_paths: SKIP the read-only case (cannot make a read-only directory here)"
else
  expect 1 "$K" "${gen[@]}" --report ro/x.html
  oneline; has "ro/x.html" "$tmp/err"
  grep -q '\.tmp\.' "$tmp/err" && bad "the error names the temp file: $(cat "$tmp/err")" || ok
fi
umount ro 2>/dev/null; chattr -i ro 2>/dev/null; chmod 755 ro 2>/dev/null

# --- a regular file is replaced whole, leaving no temp file ---------------------------
echo previous >plain.txt
expect 0 "$K" "${gen[@]}" -o plain.txt
has "period" plain.txt
grep -q previous plain.txt && bad "old content kept" || ok
ls -a . sub | grep -q '\.tmp\.' && bad "temp file left behind" || ok

cd / && finish test_output_paths
