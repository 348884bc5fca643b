# Helpers shared by the protocol benchmarks (mk/bench-radius, mk/bench-ntp), sourced with
# "$D" set to the run's private directory: rows go to "$D/rows" as "who label col3...".

# Busy jiffies of the whole host (/proc/stat, all CPUs, idle and iowait left out).
busy() { awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t-$5-$6}' /proc/stat; }

# A field of the last load's JSON (0 when absent).
j() { jq -r "$1 // 0" "$D/out.json"; }

# Host CPU µs per transaction from two busy() readings and a count.
host_us() { # busy0 busy1 count
  awk -v d="$(($2 - $1))" -v hz="$(getconf CLK_TCK)" -v n="$3" 'BEGIN{printf "%.2f", (n>0? d/hz*1e6/n : 0)}'
}

# "median (min-max)" of column $3 of the rows of who $1 and label $2.
stat() {
  awk -v w="$1" -v l="$2" -v c="$3" '$1==w && $2==l {print $c}' "$D/rows" | sort -g |
    awk '{v[NR]=$1} END{if(NR==0){print "-"; exit} m=(NR%2? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2); printf "%.2f (%.2f-%.2f)", m, v[1], v[NR]}'
}
med() { stat "$@" | cut -d' ' -f1; }

# A random port for one run.
free_port() { awk 'BEGIN{srand(); print 20000 + int(rand()*20000)}'; }

# CPUs in a list such as 0,2-3.
ncpus() { echo "$1" | awk -F, '{n=0; for(i=1;i<=NF;i++){split($i,r,"-"); n+= (r[2]=="" ? 1 : r[2]-r[1]+1)} print n}'; }
