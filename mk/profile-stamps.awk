# Groups `perf script -F comm,tid,ip,sym,dso` samples (with call chains, -g) of the
# generator thread (fh-load-*) of `firehose load` by what it was doing, and prints each
# group's share of the thread's samples and its us per transaction (share x client_us).
# Used by mk/profile-stamps; variables: client_us (the generator's CPU us per transaction),
# title. Rules, first match wins, looking at the whole chain (leaf first):
#   send: stamps made      under __skb_tstamp_tx / skb_tx_timestamp: transmit stamps queued
#   send                   under a send call (sendmmsg, sendmsg, sendto), the delivery into
#                          the server's socket included (loopback delivers inside the send)
#   error queue            under ip_recv_error / ipv6_recv_error: transmit stamps read
#   receive: rx stamps     under __sock_recv_timestamp / put_cmsg: arrival stamps handed over
#   receive                under recvmmsg / recvfrom / recvmsg
#   sleep                  under clock_nanosleep / epoll_wait (the call and the switch)
#   own                    the leaf is in user space: firehose's code, by leaf symbol
#   other kernel           the rest
BEGIN { RS = ""; FS = "\n" }

function has(re,   i) {
	for (i = 2; i <= NF; i++) if ($i ~ re) return 1
	return 0
}

$1 !~ /fh-load/ { next }
{
	total++
	if (has("__skb_tstamp_tx|skb_tx_timestamp|skb_complete_tx_timestamp")) g = "send: stamps made"
	else if (has("sendmmsg|sendmsg|sendto")) g = "send"
	else if (has("ip_recv_error|ipv6_recv_error|sock_recv_errqueue")) g = "error queue"
	else if (has("__sock_recv_timestamp|put_cmsg")) g = "receive: rx stamps"
	else if (has("recvmmsg|recvfrom|recvmsg")) g = "receive"
	else if (has("clock_nanosleep|epoll_wait|hrtimer_nanosleep")) g = "sleep"
	else if ($2 !~ /\[kernel/) {
		g = "own"
		s = $2
		sub(/^[ \t]*[0-9a-f]+ /, "", s)
		sub(/ \(.*$/, "", s)
		own[s]++
	}
	else g = "other kernel"
	n[g]++
}
END {
	printf "%s\n  %d samples of the generator thread; client %.3f us/txn\n", title, total, client_us
	printf "  %-22s %7s %9s\n", "group", "share", "us/txn"
	split("send|send: stamps made|receive|receive: rx stamps|error queue|sleep|own|other kernel", gs, "|")
	for (i = 1; i <= 8; i++) {
		k = gs[i]
		if (!(k in n)) n[k] = 0
		printf "  %-22s %6.1f%% %9.3f\n", k, 100 * n[k] / (total ? total : 1), client_us * n[k] / (total ? total : 1)
	}
	m = 0
	for (s in own) { top[++m] = s }
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (own[top[j]] > own[top[i]]) { t = top[i]; top[i] = top[j]; top[j] = t }
	for (i = 1; i <= m && i <= 6; i++)
		printf "    own: %-40s %5.1f%%\n", substr(top[i], 1, 40), 100 * own[top[i]] / total
}
