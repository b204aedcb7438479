# Helpers shared by the bench scripts; source it after cd to the repository root.

# machine prints the line that says where figures were taken.
machine() { echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%d)"; }
# last reads bench or anchor output and prints the last epoch's images/s.
last() { grep 'epoch=' | tail -1 | sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p'; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }

# build_conveyor builds the CLI into a temporary folder removed on exit; it sets $tmp (the
# folder, free for the script's own files) and $bin (the binary).
build_conveyor() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  bin=$tmp/conveyor
  go build -o "$bin" ./cmd/conveyor
}
# synth_set N prints the folder of the built-in synthetic set of N images,
# $CONVEYOR_SYNTH_DIR (default /tmp/conveyor-synth-N), writing it first if it is not complete.
synth_set() {
  local dir=${CONVEYOR_SYNTH_DIR:-/tmp/conveyor-synth-$1}
  [ -f "$dir/.complete" ] || "$bin" bench --images "$1" --synthetic-dir "$dir" --epochs 1 >/dev/null
  echo "$dir"
}
