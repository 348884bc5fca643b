# Groups `perf script -F comm,tid,ip,sym,dso` samples (with call chains, -g) of the AF_XDP
# server's CPU by what they were doing, and prints each group's share of the server's samples
# and its ns per transaction (share x server_us). Used by mk/profile-xdp; variables:
# server_us (server CPU us per transaction), host_us (all CPUs' us per transaction), title.
# A sample is the server's when its thread is named fh-* (the workers, the supervisor).
# Rules, first match wins, looking at the whole chain (leaf first):
#   delivery  under net_rx_action / veth_poll: the replies' delivery into the generator
#   transmit  under xsk_sendmsg / __xsk_generic_xmit: the copy-mode AF_XDP transmit
#   own       the leaf is in user space: firehose's own code, by leaf symbol
#   kernel    the rest (poll, recvfrom, scheduling, interrupts)
BEGIN { RS = ""; FS = "\n" }

function has(re,   i) {
	for (i = 2; i <= NF; i++) if ($i ~ re) return 1
	return 0
}

function add(group, part,   s) {
	if (part ~ /^other/ || group == "own") {
		s = $2
		sub(/^[ \t]*[0-9a-f]+ /, "", s)
		leaves[part SUBSEP s]++
	}
	n[group]++
	p[group SUBSEP part]++
	if (!((group SUBSEP part) in seen)) {
		seen[group SUBSEP part] = 1
		order[group] = order[group] "\t" part
	}
}

{
	split($1, h, " ")
	total++
	if (h[1] !~ /^fh-/) {
		other[h[1] ~ /^swapper/ ? "idle" : "other tasks"]++
		next
	}
	server++
	leaf = $2
	if (has("net_rx_action|veth_poll|__napi_poll")) {
		if (has("skb_pp_cow_data")) add("delivery", "veth's copy of the skb for XDP (skb_pp_cow_data)")
		else if (has("__xsk_rcv|xsk_generic_rcv") && has("memcpy|memmove|copy")) add("delivery", "copy into the generator's UMEM (__xsk_rcv)")
		else if (has("sock_def_readable|__wake_up|try_to_wake_up")) add("delivery", "waking the generator (sock_def_readable)")
		else if (has("kfree_skb|skb_release|consume_skb|sock_wfree|xsk_destruct_skb|__kfree|page_pool")) add("delivery", "freeing skbs, the sent skb's destructor")
		else if (has("bpf_prog_|xdp_do_redirect|bpf_xdp_redirect|xdp_do_|xsk_rcv|__xsk_map_redirect")) add("delivery", "the generator's XDP program and redirect")
		else add("delivery", "other (veth_poll, napi)")
	} else if (has("xsk_sendmsg|__xsk_generic_xmit|xsk_generic_xmit")) {
		if (has("__dev_direct_xmit|veth_xmit|dev_hard_start_xmit")) add("transmit", "__dev_direct_xmit, veth_xmit")
		else if (has("xsk_cq_reserve|xsk_cq_submit|_raw_spin_lock|queued_spin_lock")) add("transmit", "completion ring lock")
		else if (has("memcpy|skb_store_bits|copy_")) add("transmit", "copy of the frame into the skb")
		else if (has("alloc_skb|sock_alloc_send|kmem_cache_alloc|kmalloc|alloc_pages")) add("transmit", "skb allocation")
		else add("transmit", "__xsk_generic_xmit itself")
	} else if (leaf !~ /kernel\.kallsyms|\[unknown\] \(\[unknown\]\)/ || leaf ~ /firehose/) {
		if (leaf ~ /vdso|clock_gettime/) add("own", "clock reads (vDSO)")
		else if (leaf ~ /csum|checksum/) add("own", "checksums")
		else if (leaf ~ /reply_in_place/) add("own", "reply build (reply_in_place)")
		else if (leaf ~ /frame::parse|parse_rx|take_stamp|prefetch/) add("own", "frame parse (frame::parse, parse_rx)")
		else if (leaf ~ /firehose_proto|dnswire|Handler|ntp|dns|echo/) add("own", "the protocol handler")
		else if (leaf ~ /xdp::|XdpQueue|xdp_backend|XdpBackend|worker|Backend/) add("own", "ring handling, the worker loop")
		else add("own", "other user space")
	} else add("kernel", "other kernel work (poll, recvfrom, scheduling)")
}

function line(label, k) {
	printf "  %-58s %6.1f%% %8.0f ns\n", label, 100 * k / server, 1000 * server_us * k / server
}

END {
	if (server == 0) {
		print title ": no sample of the server's threads (fh-*)"
		exit 1
	}
	print title
	printf "  %d samples on CPU 0, %d of the server; server %.3f us/txn, host (all CPUs) %.3f us/txn\n", total, server, server_us, host_us
	split("delivery transmit kernel own", groups, " ")
	names["delivery"] = "softirq: the replies' delivery into the generator"
	names["transmit"] = "the copy-mode AF_XDP transmit (xsk_sendmsg)"
	names["kernel"] = "other kernel work"
	names["own"] = "firehose's own code"
	for (g = 1; g <= 4; g++) {
		G = groups[g]
		line(names[G], n[G])
		k = split(substr(order[G], 2), parts, "\t")
		for (j = 1; j <= k; j++) {
			line("- " parts[j], p[G SUBSEP parts[j]])
			# What an "other" part or our own code holds: its leaf symbols of 0.5% of the
			# server or more.
			for (ls in leaves) {
				split(ls, kv, SUBSEP)
				if (kv[1] == parts[j] && leaves[ls] * 200 >= server)
					printf "        %-52s %6.1f%%\n", substr(kv[2], 1, 52), 100 * leaves[ls] / server
			}
		}
	}
	own_ns = 1000 * server_us * n["own"] / server
	printf "  not the server: idle %d, other tasks %d samples\n", other["idle"], other["other tasks"]
	printf "  floor (own code at 0 ns): server %.0f ns/txn (%.1f%% less), host %.0f ns/txn (%.1f%% less)\n", 1000 * server_us - own_ns, 100 * own_ns / (1000 * server_us), 1000 * host_us - own_ns, 100 * own_ns / (1000 * host_us)
}
