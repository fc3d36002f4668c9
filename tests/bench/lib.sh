# Shared by the benchmark scripts.

# median: the median of the numbers on stdin, one per line
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

# ratio A B: A / B, two decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

# timed CMD...: the wall seconds CMD takes (its output dropped)
timed() {
	local t0 t1
	t0=$(date +%s.%N)
	"$@" > /dev/null
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}'
}
