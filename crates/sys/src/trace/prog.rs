//! The tracing programs, assembled as instruction arrays (no C toolchain, no object file):
//! every offset they use comes from outside at build time, the tracepoint record's from its
//! `format` file and the kernel structures' from BTF, so a new kernel needs no code change.
//!
//! [`drops`] runs on `skb:kfree_skb` and counts each freed (dropped) skb in a per-CPU hash
//! keyed by [`DropKey`]: the reason, the kernel location that freed it, and, when it can
//! tell, the local port and the inode of the socket involved (the receiving socket
//! `rx_sk`, else the skb's owner), or for a packet no socket holds, the destination port
//! of its UDP or TCP header. [`fields`] counts any tracepoint by a few of its fields (the
//! XDP error tracepoints). A key that finds the hash full is counted in slot 0 of a
//! per-CPU array, so nothing is lost unsaid.

use super::asm::*;
use crate::bpf::Insn;

/// A field of a tracepoint record: its offset and size (1, 2, 4 or 8 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: u16,
    pub size: u8,
}

/// Offsets inside `struct sk_buff`, from BTF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkbLayout {
    /// `sk`: the owning socket (set on transmit, and by early demux on receive).
    pub sk: u32,
    /// `head`: the start of the buffer.
    pub head: u32,
    /// `network_header`: the IP header's offset from `head` (u16; ~0 when unset).
    pub network_header: u32,
}

/// Offsets for reading a socket, from BTF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockLayout {
    /// `struct sock` -> `__sk_common.skc_num`: the local port, in host order.
    pub num: u32,
    /// `struct sock` -> `sk_socket`: the `struct socket` of a socket with a file.
    pub socket: u32,
    /// From a `struct socket *` to its inode's `i_ino` (the number in `socket:[N]`):
    /// `socket_alloc.vfs_inode - socket_alloc.socket + inode.i_ino`.
    pub ino: u32,
    /// `struct sock` -> `__sk_common.skc_net`: the socket's network namespace.
    pub net: u32,
}

/// Offsets for the network namespace of a packet without a socket, from BTF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetLayout {
    /// `sk_buff.dev`.
    pub dev: u32,
    /// `net_device.nd_net`.
    pub nd_net: u32,
    /// `net.ns.inum`: the namespace's inode number (what `ls -L -i /run/netns/X` shows).
    pub inum: u32,
}

/// Where [`drops`] finds what it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropSpec {
    pub reason: Field,
    pub location: Field,
    pub skbaddr: Field,
    /// The ethertype in host order (kfree_skb stores `ntohs(skb->protocol)`).
    pub protocol: Option<Field>,
    /// The receiving socket (kernels from 6.12 record it).
    pub rx_sk: Option<Field>,
    pub skb: Option<SkbLayout>,
    pub sock: Option<SockLayout>,
    /// Needs `skb` and `sock` too.
    pub net: Option<NetLayout>,
}

/// How [`DropKey::port`] was learnt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PortFrom {
    /// Not known (no socket, and not a UDP or TCP packet over IP).
    None,
    /// The local port of the socket involved.
    Socket,
    /// The destination port of the packet's UDP or TCP header.
    Packet,
}

/// The key the drop program counts by (24 bytes, the layout the program writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DropKey {
    pub reason: u32,
    pub port: u16,
    pub port_from: PortFrom,
    /// With [`PortFrom::Packet`]: the IP protocol (17 UDP, 6 TCP).
    pub ip_proto: u8,
    /// The kernel address that freed the skb.
    pub location: u64,
    /// The socket's inode number, 0 when unknown.
    pub ino: u64,
    /// The network namespace's inode number (of the socket, else of the device the packet
    /// was on), 0 when unknown.
    pub netns: u32,
}

/// Size of [`DropKey`] in the map.
pub const DROP_KEY_SIZE: usize = 32;

impl DropKey {
    /// Decodes a key as the program wrote it.
    pub fn from_bytes(b: &[u8]) -> Option<DropKey> {
        if b.len() != DROP_KEY_SIZE {
            return None;
        }
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        Some(DropKey {
            reason: u32::from_ne_bytes(b[0..4].try_into().unwrap()),
            port: u16::from_ne_bytes([b[4], b[5]]),
            port_from: match b[6] {
                1 => PortFrom::Socket,
                2 => PortFrom::Packet,
                _ => PortFrom::None,
            },
            ip_proto: b[7],
            location: u64_at(8),
            ino: u64_at(16),
            netns: u32::from_ne_bytes(b[24..28].try_into().unwrap()),
        })
    }
}

// Stack layout of the drop program (offsets from r10).
const KEY: i16 = -32;
const TMP: i16 = -40;
const IPH: i16 = -56;
const VAL: i16 = -64;

// Labels.
const HAVE_SK: u32 = 1;
const NO_SK: u32 = 2;
const V4: u32 = 3;
const L4: u32 = 4;
const PORTS: u32 = 5;
const COUNT: u32 = 6;
const EXIT_L: u32 = 7;
const NET_DONE: u32 = 8;

/// `r3` holds the address of a `struct net *`: reads it, then its `ns.inum` into the key.
fn net_inum(a: &mut Asm, net: NetLayout) {
    a.read_kernel(TMP, 8);
    a.op(ldx(8), 3, 10, TMP, 0);
    a.op(ADD64_K, 3, 0, 0, net.inum as i32);
    a.read_kernel(TMP, 4);
    a.op(ldx(4), 1, 10, TMP, 0);
    a.op(stx(4), 10, 1, KEY + 24, 0);
}

/// Returns 1: a tracepoint program's 0 tells the kernel not to hand the event to perf, which
/// would blind every perf user of the tracepoint while the program is attached (the perf
/// path of another `firehose drops`, `perf record -e skb:kfree_skb`). The kernel overwrites
/// the record's first 8 bytes (its common fields) with a pointer before running the program
/// and perf samples keep that: readers must not rely on `common_type` or `common_pid`.
fn pass_on(a: &mut Asm) {
    a.op(MOV64_K, 0, 0, 0, 1);
    a.op(EXIT, 0, 0, 0, 0);
}

fn load_field(a: &mut Asm, dst: u8, f: Field) {
    a.op(ldx(f.size), dst, 6, f.offset as i16, 0);
}

/// The drop counter for `skb:kfree_skb`, counting into `map` (a per-CPU hash with
/// [`DROP_KEY_SIZE`]-byte keys and u64 values) and `overflow` (a per-CPU array of u64).
pub fn drops(s: &DropSpec, map: i32, overflow: i32) -> Vec<Insn> {
    let mut a = Asm::new();
    a.op(MOV64_X, 6, 1, 0, 0);
    for k in 0..4 {
        a.op(st(8), 10, 0, KEY + 8 * k, 0);
    }
    load_field(&mut a, 1, s.reason);
    a.op(stx(4), 10, 1, KEY, 0);
    load_field(&mut a, 1, s.location);
    a.op(stx(8), 10, 1, KEY + 8, 0);
    a.op(MOV64_K, 7, 0, 0, 0);
    if let Some(rx) = s.rx_sk {
        load_field(&mut a, 7, rx);
    }
    if let Some(skb) = s.skb {
        // No receiving socket: the skb's owner (a sender's socket on transmit).
        a.jump(JNE_K, 7, 0, HAVE_SK);
        load_field(&mut a, 3, s.skbaddr);
        a.op(ADD64_K, 3, 0, 0, skb.sk as i32);
        a.read_kernel(TMP, 8);
        a.op(ldx(8), 7, 10, TMP, 0);
    }
    a.label(HAVE_SK);
    if let Some(sock) = s.sock {
        a.jump(JEQ_K, 7, 0, NO_SK);
        if let Some(net) = s.net {
            // netns = sk->skc_net->ns.inum
            a.op(MOV64_X, 3, 7, 0, 0);
            a.op(ADD64_K, 3, 0, 0, sock.net as i32);
            net_inum(&mut a, net);
        }
        a.op(MOV64_X, 3, 7, 0, 0);
        a.op(ADD64_K, 3, 0, 0, sock.num as i32);
        a.read_kernel(TMP, 2);
        a.op(ldx(2), 1, 10, TMP, 0);
        a.op(stx(2), 10, 1, KEY + 4, 0);
        a.op(st(1), 10, 0, KEY + 6, 1);
        a.op(MOV64_X, 3, 7, 0, 0);
        a.op(ADD64_K, 3, 0, 0, sock.socket as i32);
        a.read_kernel(TMP, 8);
        a.op(ldx(8), 3, 10, TMP, 0);
        a.jump(JEQ_K, 3, 0, COUNT);
        a.op(ADD64_K, 3, 0, 0, sock.ino as i32);
        a.read_kernel(TMP, 8);
        a.op(ldx(8), 1, 10, TMP, 0);
        a.op(stx(8), 10, 1, KEY + 16, 0);
        a.jump(JA, 0, 0, COUNT);
    }
    a.label(NO_SK);
    if let (Some(net), Some(_)) = (s.net, s.skb) {
        // netns = skb->dev->nd_net->ns.inum, when the skb has a device.
        load_field(&mut a, 3, s.skbaddr);
        a.op(ADD64_K, 3, 0, 0, net.dev as i32);
        a.read_kernel(TMP, 8);
        a.op(ldx(8), 3, 10, TMP, 0);
        a.jump(JEQ_K, 3, 0, NET_DONE);
        a.op(ADD64_K, 3, 0, 0, net.nd_net as i32);
        net_inum(&mut a, net);
        a.label(NET_DONE);
    }
    if let (Some(skb), Some(proto)) = (s.skb, s.protocol) {
        load_field(&mut a, 8, proto);
        load_field(&mut a, 9, s.skbaddr);
        a.op(MOV64_X, 3, 9, 0, 0);
        a.op(ADD64_K, 3, 0, 0, skb.head as i32);
        a.read_kernel(TMP, 8);
        a.op(ldx(8), 7, 10, TMP, 0);
        a.op(MOV64_X, 3, 9, 0, 0);
        a.op(ADD64_K, 3, 0, 0, skb.network_header as i32);
        a.read_kernel(TMP, 2);
        a.op(ldx(2), 1, 10, TMP, 0);
        a.jump(JEQ_K, 1, 0xffff, COUNT);
        a.op(ADD64_X, 7, 1, 0, 0); // r7 = the IP header
        a.jump(JEQ_K, 8, 0x0800, V4);
        a.jump(JNE_K, 8, 0x86dd, COUNT);
        // IPv6: the next header must be UDP or TCP itself (an extension header is not read).
        a.op(MOV64_X, 3, 7, 0, 0);
        a.read_kernel(IPH, 8);
        a.op(ldx(1), 1, 10, IPH + 6, 0);
        a.op(MOV64_K, 2, 0, 0, 40);
        a.jump(JA, 0, 0, L4);
        a.label(V4);
        a.op(MOV64_X, 3, 7, 0, 0);
        a.read_kernel(IPH, 16);
        // A fragment other than the first has no ports.
        a.op(ldx(2), 1, 10, IPH + 6, 0);
        a.op(AND64_K, 1, 0, 0, 0xff1f); // fragment offset, network order
        a.jump(JNE_K, 1, 0, COUNT);
        a.op(ldx(1), 2, 10, IPH, 0);
        a.op(AND64_K, 2, 0, 0, 0x0f);
        a.op(LSH64_K, 2, 0, 0, 2);
        a.op(ldx(1), 1, 10, IPH + 9, 0);
        a.label(L4);
        a.jump(JEQ_K, 1, 17, PORTS);
        a.jump(JEQ_K, 1, 6, PORTS);
        a.jump(JA, 0, 0, COUNT);
        a.label(PORTS);
        a.op(stx(1), 10, 1, KEY + 7, 0);
        a.op(MOV64_X, 3, 7, 0, 0);
        a.op(ADD64_X, 3, 2, 0, 0);
        a.read_kernel(TMP, 4);
        a.op(ldx(2), 1, 10, TMP + 2, 0);
        a.op(TO_BE, 1, 0, 0, 16);
        a.op(stx(2), 10, 1, KEY + 4, 0);
        a.op(st(1), 10, 0, KEY + 6, 2);
    }
    a.label(COUNT);
    a.count(map, overflow, KEY, VAL, EXIT_L);
    a.label(EXIT_L);
    pass_on(&mut a);
    a.finish()
}

/// A counter of any tracepoint by up to 6 of its fields: the key is one u64 per field
/// (zero-extended), in the order given.
pub fn fields(fields: &[Field], map: i32, overflow: i32) -> Vec<Insn> {
    assert!(!fields.is_empty() && fields.len() <= 6, "1 to 6 fields");
    let key = -8 * fields.len() as i16;
    let val = key - 8;
    let mut a = Asm::new();
    a.op(MOV64_X, 6, 1, 0, 0);
    for (i, f) in fields.iter().enumerate() {
        load_field(&mut a, 1, *f);
        a.op(stx(8), 10, 1, key + 8 * i as i16, 0);
    }
    a.count(map, overflow, key, val, EXIT_L);
    a.label(EXIT_L);
    pass_on(&mut a);
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> DropSpec {
        DropSpec {
            reason: Field {
                offset: 36,
                size: 4,
            },
            location: Field {
                offset: 16,
                size: 8,
            },
            skbaddr: Field { offset: 8, size: 8 },
            protocol: Some(Field {
                offset: 32,
                size: 2,
            }),
            rx_sk: Some(Field {
                offset: 24,
                size: 8,
            }),
            skb: Some(SkbLayout {
                sk: 24,
                head: 192,
                network_header: 182,
            }),
            sock: Some(SockLayout {
                num: 14,
                socket: 280,
                ino: 128 + 64,
                net: 48,
            }),
            net: Some(NetLayout {
                dev: 16,
                nd_net: 300,
                inum: 200,
            }),
        }
    }

    fn jumps_land_inside(p: &[Insn]) {
        for (i, insn) in p.iter().enumerate() {
            let class = insn.code() & 0x07;
            if (class == 0x05 || class == 0x06) && insn.code() != CALL && insn.code() != EXIT {
                let to = i as i64 + 1 + insn.off() as i64;
                assert!(
                    to > i as i64 && (to as usize) < p.len(),
                    "jump at {i} to {to}"
                );
            }
        }
        assert_eq!(p.last().unwrap().code(), EXIT);
    }

    #[test]
    fn every_jump_of_every_shape_lands_inside() {
        let full = spec();
        jumps_land_inside(&drops(&full, 3, 4));
        let bare = DropSpec {
            protocol: None,
            rx_sk: None,
            skb: None,
            sock: None,
            net: None,
            ..full
        };
        let p = drops(&bare, 3, 4);
        jumps_land_inside(&p);
        assert!(p.len() < drops(&full, 3, 4).len());
        jumps_land_inside(&fields(&[Field { offset: 8, size: 4 }], 3, 4));
    }

    #[test]
    fn every_program_passes_the_event_on_to_perf() {
        for p in [
            drops(&spec(), 3, 4),
            fields(&[Field { offset: 8, size: 4 }], 3, 4),
        ] {
            let n = p.len();
            assert_eq!(p[n - 1].code(), EXIT);
            assert_eq!((p[n - 2].code(), p[n - 2].imm()), (MOV64_K, 1));
        }
    }

    #[test]
    fn offsets_are_patched_in() {
        let p = drops(&spec(), 3, 4);
        // reason at ctx+36 as a 4-byte load from r6.
        assert!(p.iter().any(|i| i.code() == ldx(4) && i.off() == 36));
        assert!(p.iter().any(|i| i.code() == ADD64_K && i.imm() == 280));
        assert!(p.iter().any(|i| i.code() == TO_BE && i.imm() == 16));
    }

    #[test]
    fn a_key_round_trips() {
        let mut b = [0u8; DROP_KEY_SIZE];
        b[24..28].copy_from_slice(&4026531840u32.to_ne_bytes());
        b[0..4].copy_from_slice(&6u32.to_ne_bytes());
        b[4..6].copy_from_slice(&9000u16.to_ne_bytes());
        b[6] = 1;
        b[8..16].copy_from_slice(&0xffff_ffff_8100_0000u64.to_ne_bytes());
        b[16..24].copy_from_slice(&777u64.to_ne_bytes());
        let k = DropKey::from_bytes(&b).unwrap();
        assert_eq!(
            (k.reason, k.port, k.port_from, k.ino),
            (6, 9000, PortFrom::Socket, 777)
        );
        assert_eq!(k.location, 0xffff_ffff_8100_0000);
        assert_eq!(k.netns, 4026531840);
        assert!(DropKey::from_bytes(&b[..20]).is_none());
    }
}
