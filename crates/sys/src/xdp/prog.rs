//! The XDP program, assembled as an instruction array: redirect UDP to ADDR:PORT into the
//! receiving queue's AF_XDP socket, pass everything else to the kernel untouched.
//!
//! Matched: Ethernet, optionally one 802.1Q tag (when the match allows tagged frames), then
//! IPv4 without options and not a fragment (MF clear, offset 0) or IPv6 whose next header is
//! UDP directly (a fragment header, 44, or any other extension header passes), then the
//! destination address (one address, or any of a list: a server on the unspecified address
//! matches its interface's own addresses), a source that is not one of the host's own
//! addresses, and the port. ARP, NDP, ICMP, TCP, other ports, other addresses, fragments
//! and frames from our own addresses all take XDP_PASS, and so does a packet whose queue has
//! no socket in the map (bpf_redirect_map's fallback action): the kernel then does what it
//! would have done (drops a martian source, delivers a broadcast to the fallback socket).
//! No C toolchain, no object file: addresses and ports are patched in as immediates when
//! the program is built.
//!
//! A program built with [`UdpMatch::stamp`] also stamps each frame it redirects: it grows
//! the frame's metadata area by [`STAMP_META_LEN`] bytes (`bpf_xdp_adjust_meta`) and writes
//! [`STAMP_MAGIC`] then CLOCK_TAI in ns (`bpf_ktime_get_tai_ns`, Linux 6.1+) there, just
//! before the packet; AF_XDP copies the metadata with the frame (copy mode too), so the
//! reader finds the arrival time at `addr - 16` ([`read_stamp`]). A driver without room
//! for metadata makes the helper fail: the frame is redirected unstamped.

use crate::bpf::Insn;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The name the kernel shows for our program; it is how a later run recognises its own.
pub const PROG_NAME: &str = "fh_xdp_udp";

/// Which destination addresses of one family the program matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddrMatch<A> {
    /// This family is not served.
    Off,
    /// Any address.
    Any,
    /// Exactly this address.
    Is(A),
    /// Any of these (none: nothing of this family is redirected).
    AnyOf(Vec<A>),
}

/// What the program redirects: UDP to `port` (through `port_last`, when set) at the given
/// destination addresses, only from `from` when set, never from an address of `not_from`,
/// and behind an 802.1Q tag only when `tagged`. A server matches one port; a generator
/// matches its range of source ports, answered from its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpMatch {
    pub port: u16,
    pub port_last: Option<u16>,
    pub v4: AddrMatch<Ipv4Addr>,
    pub v6: AddrMatch<Ipv6Addr>,
    pub from: Option<SocketAddr>,
    /// Sources never redirected: the host's own addresses, so that nothing answers a
    /// request that claims to come from us (the kernel drops such a martian).
    pub not_from: Vec<IpAddr>,
    /// Frames with one 802.1Q tag match too (else they take XDP_PASS).
    pub tagged: bool,
    /// Write the arrival time into each redirected frame's metadata (see the module doc).
    pub stamp: bool,
}

impl UdpMatch {
    /// UDP to `port` at these addresses, from anyone, tagged or not.
    pub fn to(port: u16, v4: AddrMatch<Ipv4Addr>, v6: AddrMatch<Ipv6Addr>) -> UdpMatch {
        UdpMatch {
            port,
            port_last: None,
            v4,
            v6,
            from: None,
            not_from: Vec::new(),
            tagged: true,
            stamp: false,
        }
    }
}

const XDP_DROP: i32 = 1;
const XDP_PASS: i32 = 2;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_FUNC_XDP_ADJUST_META: i32 = 54;
const BPF_FUNC_KTIME_GET_TAI_NS: i32 = 208;

/// Bytes of metadata a stamping program puts before each frame it redirects.
pub const STAMP_META_LEN: usize = 16;
/// The first 8 bytes of that metadata ("fh-stamp"): a frame without them was not stamped.
pub const STAMP_MAGIC: u64 = 0x706d_6174_732d_6866;
const BPF_PSEUDO_MAP_FD: u8 = 1;

// Opcodes (class | op | source).
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const ADD64_K: u8 = 0x07;
const AND64_K: u8 = 0x57;
const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const LDX_B: u8 = 0x71;
const STX_DW: u8 = 0x7b;
const LD_IMM64: u8 = 0x18;
const JA: u8 = 0x05;
const JEQ_K: u8 = 0x15;
const JEQ32_K: u8 = 0x16;
const JNE_K: u8 = 0x55;
const JGT_X: u8 = 0x2d;
const JGT_K: u8 = 0x25;
const JLT_K: u8 = 0xa5;
const TO_BE: u8 = 0xdc;
const JNE32_K: u8 = 0x56;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    L3,
    V4,
    V6,
    Redirect,
    Pass,
    /// A label made by [`Asm::fresh`].
    Local(u32),
}

/// A tiny assembler: jumps name a label, resolved when the program is finished.
struct Asm {
    insns: Vec<Insn>,
    fixups: Vec<(usize, Label)>,
    labels: Vec<(Label, usize)>,
    next_local: u32,
}

impl Asm {
    fn fresh(&mut self) -> Label {
        self.next_local += 1;
        Label::Local(self.next_local)
    }
    fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(Insn::new(code, dst, src, off, imm));
    }
    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.op(code, dst, src, 0, imm);
    }
    fn label(&mut self, l: Label) {
        self.labels.push((l, self.insns.len()));
    }
    /// `r4 = r2 + need; if r4 > data_end goto pass`: the bounds check the verifier wants.
    fn need(&mut self, need: i32) {
        self.op(MOV64_X, 4, 2, 0, 0);
        self.op(ADD64_K, 4, 0, 0, need);
        self.jump(JGT_X, 4, 3, 0, Label::Pass);
    }
    /// `r5 = *(size *)(r2 + off); if r5 != imm goto pass`.
    fn expect(&mut self, load: u8, off: i16, imm: i32) {
        self.op(load, 5, 2, off, 0);
        let jne = if load == LDX_W { JNE32_K } else { JNE_K };
        self.jump(jne, 5, 0, imm, Label::Pass);
    }
    /// The 16 bytes at `off` equal `addr`.
    fn expect_v6(&mut self, off: i16, addr: &Ipv6Addr) {
        for (k, w) in addr.octets().chunks_exact(4).enumerate() {
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as i32;
            self.expect(LDX_W, off + 4 * k as i16, w);
        }
    }

    /// The 32-bit word at `off` as a jump immediate (the bytes as a little-endian load
    /// sees them).
    fn word(b: &[u8]) -> i32 {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i32
    }

    /// Goes to `hit` when the address of `bytes.len()` bytes at `off` equals one of `list`.
    fn any_of(&mut self, off: i16, list: &[Vec<u8>], hit: Label) {
        for a in list {
            let miss = self.fresh();
            let words: Vec<i32> = a.chunks_exact(4).map(Self::word).collect();
            let last = words.len() - 1;
            for (k, w) in words.iter().enumerate() {
                self.op(LDX_W, 5, 2, off + 4 * k as i16, 0);
                if k == last {
                    self.jump(JEQ32_K, 5, 0, *w, hit);
                } else {
                    self.jump(JNE32_K, 5, 0, *w, miss);
                }
            }
            self.label(miss);
        }
    }

    /// The destination address at `off` (`Any`: no test; `Is`/`AnyOf`: one of them, else
    /// pass).
    fn dst(&mut self, off: i16, list: Option<Vec<Vec<u8>>>) {
        let Some(list) = list else {
            return;
        };
        let ok = self.fresh();
        self.any_of(off, &list, ok);
        self.jump(JA, 0, 0, 0, Label::Pass);
        self.label(ok);
    }

    /// The UDP header at `l4`: destination port (or range) and, when asked, the source port.
    fn ports(&mut self, l4: i16, m: &UdpMatch) {
        match m.port_last {
            Some(last) if last != m.port => {
                self.op(LDX_H, 5, 2, l4 + 2, 0);
                self.op(TO_BE, 5, 0, 0, 16); // network order to host order on little endian
                self.jump(JLT_K, 5, 0, m.port as i32, Label::Pass);
                self.jump(JGT_K, 5, 0, last as i32, Label::Pass);
            }
            _ => self.expect(LDX_H, l4 + 2, be16(m.port)),
        }
        if let Some(from) = m.from {
            self.expect(LDX_H, l4, be16(from.port()));
        }
    }

    fn finish(mut self) -> Vec<Insn> {
        for (at, to) in self.fixups {
            let target = self.labels.iter().find(|(l, _)| *l == to).map(|(_, i)| *i);
            let target = target.expect("every jump target is placed");
            self.insns[at].set_off((target as i64 - at as i64 - 1) as i16);
        }
        self.insns
    }
}

/// A 16-bit field in network order as a little-endian load sees it.
fn be16(v: u16) -> i32 {
    v.swap_bytes() as i32
}

/// The addresses a destination test compares against, as bytes; None for no test.
fn dst_list<A: Copy>(m: &AddrMatch<A>, bytes: impl Fn(A) -> Vec<u8>) -> Option<Vec<Vec<u8>>> {
    match m {
        AddrMatch::Off | AddrMatch::Any => None,
        AddrMatch::Is(a) => Some(vec![bytes(*a)]),
        AddrMatch::AnyOf(l) => Some(l.iter().map(|a| bytes(*a)).collect()),
    }
}

/// Builds the program for `m`, with `map_fd` the XSKMAP indexed by rx queue.
pub fn udp_redirect(m: &UdpMatch, map_fd: i32) -> Vec<Insn> {
    let mut a = Asm {
        insns: Vec::with_capacity(64),
        fixups: Vec::new(),
        labels: Vec::new(),
        next_local: 0,
    };
    let own = |v6: bool| -> Vec<Vec<u8>> {
        m.not_from
            .iter()
            .filter_map(|ip| match ip {
                IpAddr::V4(x) if !v6 => Some(x.octets().to_vec()),
                IpAddr::V6(x) if v6 => Some(x.octets().to_vec()),
                _ => None,
            })
            .collect()
    };
    // r6 = ctx; r2 = data; r3 = data_end.
    a.op(MOV64_X, 6, 1, 0, 0);
    a.op(LDX_W, 2, 1, 0, 0);
    a.op(LDX_W, 3, 1, 4, 0);
    a.need(14);
    a.op(LDX_H, 5, 2, 12, 0);
    if m.tagged {
        a.jump(JNE_K, 5, 0, be16(0x8100), Label::L3);
        // One 802.1Q tag: read the inner type and move r2 so the IP header is at r2 + 14.
        a.need(18);
        a.op(LDX_H, 5, 2, 16, 0);
        a.op(ADD64_K, 2, 0, 0, 4);
    } else {
        // The verifier refuses unreachable instructions, so no tag code at all.
        a.jump(JEQ_K, 5, 0, be16(0x8100), Label::Pass);
    }
    a.label(Label::L3);
    if m.v4 != AddrMatch::Off {
        a.jump(JEQ_K, 5, 0, be16(0x0800), Label::V4);
    }
    if m.v6 != AddrMatch::Off {
        a.jump(JEQ_K, 5, 0, be16(0x86dd), Label::V6);
    }
    a.jump(JA, 0, 0, 0, Label::Pass);

    a.label(Label::V4);
    if m.v4 != AddrMatch::Off {
        a.need(14 + 20 + 8);
        a.expect(LDX_B, 14, 0x45); // version 4, no options
        a.expect(LDX_B, 14 + 9, 17); // UDP
        a.op(LDX_H, 5, 2, 14 + 6, 0); // flags + fragment offset
        a.op(AND64_K, 5, 0, 0, be16(0x3fff)); // MF and offset; DF does not matter
        a.jump(JNE_K, 5, 0, 0, Label::Pass);
        a.dst(14 + 16, dst_list(&m.v4, |x: Ipv4Addr| x.octets().to_vec()));
        if let Some(SocketAddr::V4(from)) = m.from {
            a.expect(LDX_W, 14 + 12, Asm::word(&from.ip().octets()));
        }
        a.any_of(14 + 12, &own(false), Label::Pass);
        a.ports(14 + 20, m);
        a.jump(JA, 0, 0, 0, Label::Redirect);
    }

    a.label(Label::V6);
    if m.v6 != AddrMatch::Off {
        a.need(14 + 40 + 8);
        a.expect(LDX_B, 14 + 6, 17); // next header UDP; 44 (fragment) and others pass
        a.dst(14 + 24, dst_list(&m.v6, |x: Ipv6Addr| x.octets().to_vec()));
        if let Some(SocketAddr::V6(from)) = m.from {
            a.expect_v6(14 + 8, from.ip());
        }
        a.any_of(14 + 8, &own(true), Label::Pass);
        a.ports(14 + 40, m);
    }

    a.label(Label::Redirect);
    if m.stamp {
        let send = a.fresh();
        // bpf_xdp_adjust_meta(ctx, -16): room before the packet; a refusal sends unstamped.
        a.op(MOV64_X, 1, 6, 0, 0);
        a.op(MOV64_K, 2, 0, 0, -(STAMP_META_LEN as i32));
        a.op(CALL, 0, 0, 0, BPF_FUNC_XDP_ADJUST_META);
        a.jump(JNE_K, 0, 0, 0, send);
        a.op(CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_TAI_NS);
        // r2 = data_meta, r3 = data: the bounds check the verifier wants for the stores.
        a.op(LDX_W, 2, 6, 8, 0);
        a.op(LDX_W, 3, 6, 0, 0);
        a.op(MOV64_X, 4, 2, 0, 0);
        a.op(ADD64_K, 4, 0, 0, STAMP_META_LEN as i32);
        a.jump(JGT_X, 4, 3, 0, send);
        a.op(STX_DW, 2, 0, 8, 0);
        a.op(LD_IMM64, 1, 0, 0, STAMP_MAGIC as u32 as i32);
        a.op(0, 0, 0, 0, (STAMP_MAGIC >> 32) as u32 as i32);
        a.op(STX_DW, 2, 1, 0, 0);
        a.label(send);
    }
    a.op(LDX_W, 2, 6, 16, 0); // rx_queue_index
    a.op(LD_IMM64, 1, BPF_PSEUDO_MAP_FD, 0, map_fd);
    a.op(0, 0, 0, 0, 0);
    a.op(MOV64_K, 3, 0, 0, XDP_PASS); // action when the queue has no socket
    a.op(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
    a.op(EXIT, 0, 0, 0, 0);

    a.label(Label::Pass);
    a.op(MOV64_K, 0, 0, 0, XDP_PASS);
    a.op(EXIT, 0, 0, 0, 0);
    a.finish()
}

/// The arrival time a stamping program wrote before the packet at `meta` (the
/// [`STAMP_META_LEN`] bytes before a received frame's data), in CLOCK_TAI ns; `None` when
/// they do not start with [`STAMP_MAGIC`] (the frame was not stamped).
pub fn read_stamp(meta: &[u8]) -> Option<u64> {
    let m = meta.get(..STAMP_META_LEN)?;
    let word = |i: usize| u64::from_ne_bytes(m[i..i + 8].try_into().expect("8 bytes"));
    (word(0) == STAMP_MAGIC).then(|| word(8))
}

/// The name of the discard program, as `bpftool prog` and `ip link` show it.
pub const DROP_PROG_NAME: &str = "fh_xdp_drop";

/// `r0 = action; exit`: a program that ends every packet with one verdict.
pub fn verdict(action: i32) -> Vec<Insn> {
    vec![
        Insn::new(MOV64_K, 0, 0, 0, action),
        Insn::new(0x95, 0, 0, 0, 0), // exit
    ]
}

/// Drops every packet at the driver (XDP_DROP): a receiver that costs nothing, so a
/// sender's rate is never bound by whoever reads its packets (`lab flood`).
pub fn drop_all() -> Vec<Insn> {
    verdict(XDP_DROP)
}

/// Passes every packet to the stack (XDP_PASS).
pub fn pass_all() -> Vec<Insn> {
    verdict(XDP_PASS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(v4: AddrMatch<Ipv4Addr>, v6: AddrMatch<Ipv6Addr>) -> Vec<Insn> {
        udp_redirect(&UdpMatch::to(5353, v4, v6), 7)
    }

    #[test]
    fn the_drop_program_is_two_instructions_returning_xdp_drop() {
        let p = drop_all();
        assert_eq!(p, verdict(1));
        assert_eq!(p.len(), 2);
        assert_ne!(pass_all(), p);
    }

    #[test]
    fn every_jump_lands_inside_the_program() {
        for p in [
            prog(AddrMatch::Is(Ipv4Addr::new(10, 0, 0, 200)), AddrMatch::Any),
            prog(AddrMatch::Off, AddrMatch::Is(Ipv6Addr::LOCALHOST)),
            prog(AddrMatch::Any, AddrMatch::Off),
            udp_redirect(
                &UdpMatch {
                    stamp: true,
                    ..UdpMatch::to(123, AddrMatch::Any, AddrMatch::Any)
                },
                7,
            ),
            udp_redirect(
                &UdpMatch {
                    not_from: vec!["10.0.0.9".parse().unwrap(), "fd00::9".parse().unwrap()],
                    tagged: false,
                    ..UdpMatch::to(
                        53,
                        AddrMatch::AnyOf(vec![Ipv4Addr::new(10, 0, 0, 9)]),
                        AddrMatch::AnyOf(vec![Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED]),
                    )
                },
                7,
            ),
        ] {
            for (i, insn) in p.iter().enumerate() {
                if insn.code() & 0x07 == 0x05 || insn.code() & 0x07 == 0x06 {
                    if insn.code() == CALL || insn.code() == EXIT {
                        continue;
                    }
                    let to = i as i64 + 1 + insn.off() as i64;
                    assert!(
                        to > i as i64 && (to as usize) < p.len(),
                        "jump at {i} to {to}"
                    );
                }
            }
            assert_eq!(*p.last().unwrap(), Insn::new(EXIT, 0, 0, 0, 0));
        }
    }

    #[test]
    fn own_sources_and_listed_destinations_are_compared_as_32_bit_words() {
        let mut m = UdpMatch::to(
            7000,
            AddrMatch::AnyOf(vec![
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 200),
            ]),
            AddrMatch::Off,
        );
        m.not_from = vec!["10.0.0.1".parse().unwrap(), "fd00::1".parse().unwrap()];
        m.tagged = false;
        let p = udp_redirect(&m, 7);
        // Both destinations and the one IPv4 source, as 32-bit compares (an address with
        // the top bit set would never equal a sign-extended 64-bit immediate).
        let eq32: Vec<i32> = p
            .iter()
            .filter(|i| i.code() == JEQ32_K)
            .map(|i| i.imm())
            .collect();
        assert_eq!(eq32, vec![0x0100000a, 0xc800000a_u32 as i32, 0x0100000a]);
        // Untagged only: the 802.1Q branch goes straight to pass, no inner-type load at 16.
        assert!(!p.iter().any(|i| i.code() == LDX_H && i.off() == 16));
        // No IPv6 branch, so the IPv6 own address is not compared.
        assert!(!p.iter().any(|i| i.imm() == 0xdd86));
    }

    #[test]
    fn a_generator_matches_a_port_range_from_its_target() {
        let mut m = UdpMatch::to(40000, AddrMatch::Any, AddrMatch::Off);
        m.port_last = Some(40063);
        m.from = Some("10.0.0.1:7000".parse().unwrap());
        let p = udp_redirect(&m, 7);
        assert!(p.iter().any(|i| i.code() == TO_BE && i.imm() == 16));
        assert!(p.iter().any(|i| i.code() == JLT_K && i.imm() == 40000));
        assert!(p.iter().any(|i| i.code() == JGT_K && i.imm() == 40063));
        assert!(p.iter().any(|i| i.imm() == 0x581b)); // source port 7000 = 0x1b58
        assert!(p.iter().any(|i| i.imm() == 0x0100000a)); // source 10.0.0.1
    }

    #[test]
    fn a_stamping_program_writes_magic_and_time_before_redirecting() {
        let mut m = UdpMatch::to(123, AddrMatch::Any, AddrMatch::Any);
        let plain = udp_redirect(&m, 7);
        m.stamp = true;
        let p = udp_redirect(&m, 7);
        let calls: Vec<i32> = p
            .iter()
            .filter(|i| i.code() == CALL)
            .map(|i| i.imm())
            .collect();
        assert_eq!(
            calls,
            vec![
                BPF_FUNC_XDP_ADJUST_META,
                BPF_FUNC_KTIME_GET_TAI_NS,
                BPF_FUNC_REDIRECT_MAP
            ]
        );
        assert!(
            !plain.iter().any(|i| i.code() == STX_DW),
            "no stores unless asked"
        );
        // Both 64-bit stores go to data_meta (r2): the time at +8, the magic at +0.
        let stores: Vec<Insn> = p.iter().filter(|i| i.code() == STX_DW).copied().collect();
        assert_eq!(
            stores,
            vec![Insn::new(STX_DW, 2, 0, 8, 0), Insn::new(STX_DW, 2, 1, 0, 0)]
        );
        let mut meta = [0u8; 16];
        assert_eq!(read_stamp(&meta), None);
        meta[..8].copy_from_slice(&STAMP_MAGIC.to_ne_bytes());
        meta[8..].copy_from_slice(&42u64.to_ne_bytes());
        assert_eq!(read_stamp(&meta), Some(42));
        assert_eq!(read_stamp(&meta[..15]), None);
    }

    #[test]
    fn port_and_address_are_patched_in_network_order() {
        let p = prog(AddrMatch::Is(Ipv4Addr::new(10, 0, 0, 200)), AddrMatch::Off);
        assert!(p.iter().any(|i| i.imm() == 0xe914)); // 5353 = 0x14e9
        assert!(p.iter().any(|i| i.imm() == 0xc800000a_u32 as i32));
        // Without IPv6 there is no IPv6 ethertype test.
        assert!(!p.iter().any(|i| i.imm() == 0xdd86));
    }
}
