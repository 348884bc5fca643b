//! UDP GSO (UDP_SEGMENT) sends for a [`Batch`]: one skb carries up to 64 equal
//! datagrams through the sender's IP stack, and the kernel splits it late.
//!
//! The queue is planned as [`Transmit`]s, each carrying its segment size (a run of one
//! size, and one shorter datagram as its last segment, which the kernel allows); a refusal
//! that means "this kernel or path cannot do GSO" (EIO, EINVAL, EOPNOTSUPP,
//! ENOPROTOOPT) turns GSO off on that socket for good and the rest of the queue goes by
//! sendmmsg, so nothing queued is lost and no caller handles the fallback.

use super::{Batch, Flushed};
use crate::cmsg::{Encoder, Space};
use crate::socket::UdpSock;
use crate::{cvt, SysError, SysResult};
use std::cmp::Reverse;
use std::mem;
use std::os::fd::AsRawFd;

/// Most segments the kernel accepts in one UDP GSO send (UDP_MAX_SEGMENTS was 64 before 6.x).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Largest UDP GSO send: the IP total length field (16 bits) less IPv6/UDP headers.
const GSO_MAX_BYTES: usize = 65535 - 48;

/// One GSO send: `count` queued datagrams from index `at`, each `segment` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Transmit {
    at: usize,
    count: usize,
    segment: usize,
}

/// Errnos that mean "this kernel or path cannot do UDP GSO" rather than a lost datagram.
/// EMSGSIZE counts when the send carried several segments: GSO cannot fragment, so a
/// segment above the path MTU is refused although the same datagram sent alone would go
/// (fragmented); a single datagram refused with EMSGSIZE is simply too large.
fn refuses_gso(e: &SysError, segments: usize) -> bool {
    match e.errno() {
        Some(libc::EINVAL | libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP) => true,
        Some(libc::EMSGSIZE) => segments > 1,
        _ => false,
    }
}

impl Batch {
    /// Sends the queue (datagrams without addresses, at least two) as GSO transmits.
    /// Datagrams are grouped by size (their order on a connected socket does not
    /// matter); when the sizes are too mixed for transmits to pay (fewer than 3
    /// datagrams each on average), it uses sendmmsg.
    pub(super) fn flush_gso(&mut self, sock: &UdpSock, f: &mut Flushed) {
        let total = self.queued;
        // Descending and stable: same-size datagrams keep their order. A batch that
        // records which send carried each datagram keeps the queue's order (runs only).
        if self.keys.is_none() {
            self.out_iovs[..total].sort_by_key(|v| Reverse(v.iov_len));
        }
        self.plan_transmits();
        let transmits = self.plan.len();
        if transmits > 1 && transmits * 3 > total {
            return self.send_from(sock, 0, 0, false, f);
        }
        let mut i = 0;
        while i < transmits {
            let t = self.plan[i];
            let at = t.at;
            f.syscalls += 1;
            match self.send_gso(sock, t) {
                Ok(()) => {
                    f.sent += t.count;
                    f.gso_sends += 1;
                    self.carried(at, t.count, true);
                    i += 1;
                }
                Err(e) if e.errno() == Some(libc::EINTR) => f.syscalls -= 1,
                Err(e) if refuses_gso(&e, t.count) => {
                    sock.disable_gso(&e);
                    f.gso_unavailable = true;
                    return self.send_from(sock, at, 0, false, f);
                }
                Err(e) => {
                    f.failed += t.count;
                    f.last_error = e.errno();
                    i += 1;
                }
            }
        }
    }

    /// The next transmit from queued index `at` (the queue sorted by size, descending):
    /// as many datagrams of that size as one GSO send may carry, and when the whole run
    /// fits, the next (shorter) datagram too, as the last segment. Four DNS queries of
    /// which one is a character shorter thus leave in one send, not by sendmmsg: on
    /// loopback a GSO send of 4 cost the sender about half of a sendmmsg of 4 per
    /// datagram (docs/load.md).
    fn transmit_at(&self, at: usize) -> Transmit {
        let segment = self.out_iovs[at].iov_len;
        let run = self.out_iovs[at..self.queued]
            .iter()
            .take_while(|v| v.iov_len == segment)
            .count();
        let per_send = GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / segment.max(1)).max(1);
        // The next datagram is shorter in a sorted queue; in the queue's order (sends that
        // carry keys) it may not be.
        let tail = usize::from(
            run < per_send
                && self.out_iovs[at + run..self.queued]
                    .first()
                    .is_some_and(|v| v.iov_len < segment),
        );
        Transmit {
            at,
            count: run.min(per_send) + tail,
            segment,
        }
    }

    /// Plans the queue's transmits into `plan`, once per flush: the count decides
    /// between GSO and sendmmsg, and the sends follow the same plan.
    fn plan_transmits(&mut self) {
        self.plan.clear();
        let mut at = 0;
        while at < self.queued {
            let t = self.transmit_at(at);
            at += t.count;
            self.plan.push(t);
        }
    }

    /// One sendmsg of a transmit with its UDP_SEGMENT control message.
    fn send_gso(&mut self, sock: &UdpSock, t: Transmit) -> SysResult<()> {
        // UDP_SEGMENT, and the stamp's key when sends carry one: 24 bytes each.
        let mut space = Space::<48>::default();
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut h: libc::msghdr = unsafe { mem::zeroed() };
        h.msg_iov = self.out_iovs[t.at..].as_mut_ptr();
        h.msg_iovlen = t.count;
        let mut enc = Encoder::new(&mut h, &mut space);
        enc.push(libc::SOL_UDP, libc::UDP_SEGMENT, t.segment as u16)
            .expect("48 bytes hold one u16 control message (24)");
        if let Some(key) = self.key_at(t.at) {
            enc.push(libc::SOL_SOCKET, crate::timestamping::SCM_TS_OPT_ID, key)
                .expect("48 bytes hold two control messages of 24");
        }
        enc.finish();
        // SAFETY: h points at t.count live iovecs (our slots) and at `space`, both alive
        // for the call; the kernel only reads them.
        let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &h, 0) };
        cvt(r, || format!("sendmsg(UDP_SEGMENT={})", t.segment)).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::connected_pair;
    use super::super::SendMode;
    use super::*;

    /// Receives `n` datagrams from `sock`.
    /// Receives exactly `n` datagrams, failing (not hanging) if they do not arrive.
    fn recv_all(sock: &UdpSock, n: usize) -> Vec<Vec<u8>> {
        sock.set_recv_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        let mut rx = Batch::new(128, 2048);
        let mut got = Vec::new();
        while got.len() < n {
            let k = rx
                .recv(sock, 128, 0)
                .unwrap_or_else(|e| panic!("{} of {n} datagrams arrived: {e}", got.len()));
            got.extend((0..k).map(|i| rx.data(i).to_vec()));
        }
        got
    }

    #[test]
    fn gso_send_arrives_as_separate_datagrams() {
        let (srv, cli) = connected_pair();
        let n = 100; // more than one GSO send's worth of segments
        let mut tx = Batch::new(n, 256).with_send(SendMode::Gso);
        for i in 0..n {
            let len = if i == n - 1 { 7 } else { 100 };
            tx.slot_mut(i)[..len].fill(i as u8);
            tx.queue_send(i, len);
        }
        let f = tx.flush(&cli, 0);
        assert_eq!((f.sent, f.gso_unavailable), (n, false));
        // 99 of 100 bytes and a 7-byte one: 64 segments, then 35 and the short one last.
        assert_eq!((f.syscalls, f.gso_sends), (2, 2));
        for (i, d) in recv_all(&srv, n).iter().enumerate() {
            let want = if i == n - 1 { 7 } else { 100 };
            assert_eq!(d, &vec![i as u8; want], "datagram {i}");
        }
    }

    #[test]
    fn gso_groups_mixed_sizes_and_never_cuts_a_datagram() {
        let (srv, cli) = connected_pair();
        // Three sizes, interleaved: 29, 33, 31, 29, 33, 31, ...
        let sizes = [29usize, 33, 31];
        let n = 30;
        let mut tx = Batch::new(n, 64).with_send(SendMode::Gso);
        for i in 0..n {
            let len = sizes[i % 3];
            tx.slot_mut(i)[..len].fill(i as u8);
            tx.queue_send(i, len);
        }
        let f = tx.flush(&cli, 0);
        assert_eq!((f.sent, f.gso_sends), (n, 3), "one send per size");
        let mut seen = vec![false; n];
        for d in recv_all(&srv, n) {
            let id = d[0] as usize;
            assert_eq!(d.len(), sizes[id % 3], "datagram {id} arrived whole");
            assert!(d.iter().all(|&b| b as usize == id));
            seen[id] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn a_run_and_one_shorter_datagram_leave_in_one_gso_send() {
        // A wake-up's four DNS queries, one a character shorter (host12 among host123s):
        // one GSO send. Two sizes in pairs would take two transmits for four datagrams,
        // too few each to pay: one sendmmsg.
        let (srv, cli) = connected_pair();
        for (sizes, gso, calls) in [
            (&[41usize, 41, 40, 41][..], 1, 1),
            (&[44, 41, 41, 44], 0, 1),
        ] {
            let mut tx = Batch::new(4, 64).with_send(SendMode::Gso);
            for (i, &len) in sizes.iter().enumerate() {
                tx.slot_mut(i)[..len].fill(i as u8);
                tx.queue_send(i, len);
            }
            let f = tx.flush(&cli, 0);
            assert_eq!(
                (f.sent, f.gso_sends, f.syscalls),
                (4, gso, calls),
                "{sizes:?}"
            );
            let mut got = recv_all(&srv, 4);
            got.sort();
            let mut want: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(i, &len)| vec![i as u8; len])
                .collect();
            want.sort();
            assert_eq!(got, want, "every datagram whole, {sizes:?}");
        }
    }

    /// SO_NO_CHECK (no UDP checksum) makes the kernel refuse every GSO send with
    /// EINVAL while plain sends work: a real refusal, no namespace needed.
    #[test]
    fn a_refused_gso_send_falls_back_to_sendmmsg_and_stays_off() {
        let (srv, cli) = connected_pair();
        cli.set_int(libc::SOL_SOCKET, libc::SO_NO_CHECK, 1, "SO_NO_CHECK")
            .unwrap();
        assert!(cli.gso_usable(), "the probe alone cannot tell");
        let mut tx = Batch::new(10, 64).with_send(SendMode::Gso);
        for round in 0..2u8 {
            for i in 0..10 {
                tx.slot_mut(i)[..20].fill(round * 10 + i as u8);
                tx.queue_send(i, 20);
            }
            let f = tx.flush(&cli, 0);
            assert_eq!((f.sent, f.failed, f.gso_sends), (10, 0, 0), "round {round}");
            assert!(f.gso_unavailable);
            // The first round tried GSO once, then one sendmmsg; the second went
            // straight to sendmmsg.
            assert_eq!(f.syscalls, if round == 0 { 2 } else { 1 });
            let got = recv_all(&srv, 10);
            let want: Vec<Vec<u8>> = (0..10).map(|i| vec![round * 10 + i; 20]).collect();
            assert_eq!(got, want, "every datagram, exactly, in order");
        }
        assert!(!cli.gso_usable());
        let why = cli.gso_unavailable().unwrap();
        assert!(
            why.contains("UDP_SEGMENT=20") && why.contains("EINVAL"),
            "{why}"
        );
    }

    /// On a path whose MTU is below the segment size, GSO sends fail with EMSGSIZE (GSO
    /// cannot fragment) while plain sends are fragmented and arrive: the batch falls back.
    /// Needs root for a namespace whose loopback has a 1400-byte MTU.
    #[test]
    fn a_segment_above_the_path_mtu_falls_back_to_sendmmsg() {
        if !crate::cpu::is_root() {
            eprintln!("skipped: needs root to create a network namespace");
            return;
        }
        let ns = format!("fh-gso-mtu-{}", std::process::id());
        let ip = |args: &[&str]| {
            std::process::Command::new("ip")
                .args(args)
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        assert!(ip(&["netns", "add", &ns]), "ip netns add");
        let done = {
            let ns = ns.clone();
            std::thread::spawn(move || {
                crate::netns::enter(&ns).unwrap();
                let up = std::process::Command::new("ip")
                    .args(["-n", &ns, "link", "set", "lo", "mtu", "1400", "up"])
                    .status()
                    .unwrap();
                assert!(up.success());
                let (srv, cli) = connected_pair();
                let mut tx = Batch::new(10, 2048).with_send(SendMode::Gso);
                for i in 0..10 {
                    tx.slot_mut(i)[..1472].fill(i as u8);
                    tx.queue_send(i, 1472);
                }
                let f = tx.flush(&cli, 0);
                let got = recv_all(&srv, 10);
                (f, got, cli.gso_unavailable().map(|s| s.to_string()))
            })
            .join()
        };
        ip(&["netns", "del", &ns]);
        let (f, got, why) = done.expect("the namespace thread");
        assert_eq!((f.sent, f.failed, f.gso_sends), (10, 0, 0), "{f:?}");
        assert!(f.gso_unavailable);
        assert!(why.unwrap().contains("EMSGSIZE"));
        let want: Vec<Vec<u8>> = (0..10).map(|i| vec![i; 1472]).collect();
        assert_eq!(got, want, "every datagram whole, in order");
    }

    #[test]
    fn a_single_datagram_goes_without_gso() {
        let (srv, cli) = connected_pair();
        let mut tx = Batch::new(4, 64).with_send(SendMode::Gso);
        tx.queue_send(0, 5);
        let f = tx.flush(&cli, 0);
        assert_eq!((f.sent, f.gso_sends, f.syscalls), (1, 0, 1));
        recv_all(&srv, 1);
    }
}
