//! The generic-netlink `netdev` family: the NAPI instances of an interface (`napi-get`,
//! dumped by ifindex or asked by id) and their busy-polling settings (`napi-set`):
//! defer-hard-irqs, gro-flush-timeout and irq-suspend-timeout, which kernel 6.13 keeps per
//! NAPI (before, the first two were per device, in sysfs, and the third did not exist).
//!
//! Messages are built and parsed as bytes over a NETLINK_GENERIC socket; the parsers are
//! pure functions of the bytes the kernel sent ([`parse_replies`]), so they are tested on
//! captured replies and fuzzed (fuzz/src/netdev_reply.rs). The family's number is asked of
//! the generic-netlink controller once per [`Netdev`].

use crate::xdp::netlink::{attrs, push_attr, u32_of, Nl};
use crate::{SysError, SysResult};
use serde::{Deserialize, Serialize};

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_NAPI_GET: u8 = 11;
const NETDEV_CMD_NAPI_SET: u8 = 14;
const NETDEV_A_NAPI_IFINDEX: u16 = 1;
const NETDEV_A_NAPI_ID: u16 = 2;
const NETDEV_A_NAPI_IRQ: u16 = 3;
const NETDEV_A_NAPI_PID: u16 = 4;
const NETDEV_A_NAPI_DEFER_HARD_IRQS: u16 = 5;
const NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT: u16 = 6;
const NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT: u16 = 7;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// nlmsghdr (16 bytes) + genlmsghdr (4 bytes).
const HEAD: usize = 20;

/// One NAPI instance as `napi-get` reports it. A setting the kernel did not report (an older
/// kernel) is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Napi {
    pub id: u32,
    pub ifindex: u32,
    /// The interrupt it serves; absent for a software device (veth).
    pub irq: Option<u32>,
    /// The kernel thread polling it, when it runs threaded.
    pub pid: Option<u32>,
    pub defer_hard_irqs: Option<u32>,
    pub gro_flush_timeout_ns: Option<u64>,
    pub irq_suspend_timeout_ns: Option<u64>,
}

/// A per-NAPI setting `napi-set` changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NapiParam {
    /// Empty polls before the device's interrupt is re-armed (a count).
    DeferHardIrqs,
    /// The watchdog that polls when interrupts are deferred (ns).
    GroFlushTimeout,
    /// How long a busy-polling epoll that found events keeps interrupts off (ns).
    IrqSuspendTimeout,
}

impl NapiParam {
    pub const ALL: [NapiParam; 3] = [
        NapiParam::DeferHardIrqs,
        NapiParam::GroFlushTimeout,
        NapiParam::IrqSuspendTimeout,
    ];

    /// The attribute's name in the family's spec (`ynl --do napi-set`).
    pub fn name(self) -> &'static str {
        match self {
            NapiParam::DeferHardIrqs => "defer-hard-irqs",
            NapiParam::GroFlushTimeout => "gro-flush-timeout",
            NapiParam::IrqSuspendTimeout => "irq-suspend-timeout",
        }
    }

    fn attr(self) -> u16 {
        match self {
            NapiParam::DeferHardIrqs => NETDEV_A_NAPI_DEFER_HARD_IRQS,
            NapiParam::GroFlushTimeout => NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT,
            NapiParam::IrqSuspendTimeout => NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT,
        }
    }

    /// This setting's value in `n`, if the kernel reported it.
    pub fn of(self, n: &Napi) -> Option<u64> {
        match self {
            NapiParam::DeferHardIrqs => n.defer_hard_irqs.map(u64::from),
            NapiParam::GroFlushTimeout => n.gro_flush_timeout_ns,
            NapiParam::IrqSuspendTimeout => n.irq_suspend_timeout_ns,
        }
    }
}

/// One message of a reply datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A NAPI instance (a `napi-get` answer or one message of a dump).
    Napi(Napi),
    /// The controller's answer: the family's number.
    Family(u16),
    /// The end of a dump.
    Done,
    /// An acknowledgement (0) or a refusal (a positive errno).
    Error(i32),
    /// Anything else (a message of another type, or one too short to read).
    Other,
}

/// Splits a datagram from the kernel into its messages, each read as a [`Reply`]. `family`
/// is the netdev family's number (messages of that type are NAPI answers); bytes past the
/// last whole message are ignored.
pub fn parse_replies(datagram: &[u8], family: u16) -> Vec<Reply> {
    let mut out = Vec::new();
    let mut b = datagram;
    while b.len() >= 16 {
        let len = u32_of(b) as usize;
        if len < 16 || len > b.len() {
            break;
        }
        let kind = u16::from_ne_bytes([b[4], b[5]]);
        out.push(parse_message(&b[..len], kind, family));
        b = &b[len.next_multiple_of(4).min(b.len())..];
    }
    out
}

fn parse_message(m: &[u8], kind: u16, family: u16) -> Reply {
    match kind {
        NLMSG_DONE => Reply::Done,
        NLMSG_ERROR if m.len() >= 20 => {
            Reply::Error(i32::from_ne_bytes([m[16], m[17], m[18], m[19]]).saturating_neg())
        }
        GENL_ID_CTRL if m.len() >= HEAD => attrs(&m[HEAD..])
            .find(|(k, p)| *k == CTRL_ATTR_FAMILY_ID && p.len() >= 2)
            .map_or(Reply::Other, |(_, p)| {
                Reply::Family(u16::from_ne_bytes([p[0], p[1]]))
            }),
        k if k == family && m.len() >= HEAD => Reply::Napi(parse_napi(&m[HEAD..])),
        _ => Reply::Other,
    }
}

/// A NAPI's attributes. `uint` attributes (the timeouts) come as 4 or 8 bytes.
fn parse_napi(a: &[u8]) -> Napi {
    let mut n = Napi::default();
    for (kind, p) in attrs(a) {
        let v32 = (p.len() >= 4).then(|| u32_of(p));
        match kind {
            NETDEV_A_NAPI_ID => n.id = v32.unwrap_or(0),
            NETDEV_A_NAPI_IFINDEX => n.ifindex = v32.unwrap_or(0),
            NETDEV_A_NAPI_IRQ => n.irq = v32,
            NETDEV_A_NAPI_PID => n.pid = v32,
            NETDEV_A_NAPI_DEFER_HARD_IRQS => n.defer_hard_irqs = v32,
            NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT => n.gro_flush_timeout_ns = uint(p),
            NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT => n.irq_suspend_timeout_ns = uint(p),
            _ => {}
        }
    }
    n
}

fn uint(p: &[u8]) -> Option<u64> {
    match p.len() {
        4 => Some(u64::from(u32_of(p))),
        8 => Some(u64::from_ne_bytes(p.try_into().ok()?)),
        _ => None,
    }
}

/// nlmsghdr + genlmsghdr for `cmd` of `family`, then `attrs`.
fn request(family: u16, flags: u16, seq: u32, cmd: u8, attrs: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(HEAD + attrs.len());
    m.extend_from_slice(&((HEAD + attrs.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&family.to_ne_bytes());
    m.extend_from_slice(&(flags | NLM_F_REQUEST).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[cmd, 1, 0, 0]);
    m.extend_from_slice(attrs);
    m
}

fn refused(what: String, errno: i32) -> SysError {
    SysError {
        what,
        source: std::io::Error::from_raw_os_error(errno),
    }
}

/// A generic-netlink socket speaking the `netdev` family.
pub struct Netdev {
    nl: Nl,
    family: u16,
    seq: u32,
}

impl Netdev {
    /// Opens the socket and asks the controller for the family's number: ENOENT when this
    /// kernel has no `netdev` family (before 6.5).
    pub fn open() -> SysResult<Netdev> {
        let nl = Nl::open(libc::NETLINK_GENERIC)?;
        let mut name = Vec::new();
        push_attr(&mut name, CTRL_ATTR_FAMILY_NAME, b"netdev\0");
        let mut m = request(GENL_ID_CTRL, 0, 1, CTRL_CMD_GETFAMILY, &name);
        m[16 + 1] = 2; // the controller's version
        nl.send(&m, "CTRL_CMD_GETFAMILY netdev")?;
        let buf = nl.recv("CTRL_CMD_GETFAMILY netdev")?;
        for r in parse_replies(&buf, 0) {
            match r {
                Reply::Family(family) => return Ok(Netdev { nl, family, seq: 1 }),
                Reply::Error(e) if e != 0 => {
                    return Err(refused("netlink CTRL_CMD_GETFAMILY netdev".into(), e))
                }
                _ => {}
            }
        }
        Err(refused(
            "netlink CTRL_CMD_GETFAMILY netdev: no family id in the answer".into(),
            libc::EPROTO,
        ))
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Every NAPI instance of interface `ifindex` (`napi-get` dump). Empty for a device
    /// without NAPI (loopback; a veth with GRO off and no XDP program).
    pub fn napis(&mut self, ifindex: u32) -> SysResult<Vec<Napi>> {
        let mut a = Vec::new();
        push_attr(&mut a, NETDEV_A_NAPI_IFINDEX, &ifindex.to_ne_bytes());
        let seq = self.next_seq();
        let what = format!("netlink netdev napi-get dump ifindex {ifindex}");
        self.nl.send(
            &request(self.family, NLM_F_DUMP, seq, NETDEV_CMD_NAPI_GET, &a),
            &what,
        )?;
        let mut out = Vec::new();
        loop {
            let buf = self.nl.recv(&what)?;
            let replies = parse_replies(&buf, self.family);
            if replies.is_empty() {
                return Err(refused(format!("{what}: an empty answer"), libc::EPROTO));
            }
            for r in replies {
                match r {
                    Reply::Napi(n) if n.ifindex == ifindex => out.push(n),
                    Reply::Done => return Ok(out),
                    Reply::Error(e) if e != 0 => return Err(refused(what, e)),
                    _ => {}
                }
            }
        }
    }

    /// NAPI instance `id` (`napi-get` do): ENOENT when there is none.
    pub fn napi(&mut self, id: u32) -> SysResult<Napi> {
        let mut a = Vec::new();
        push_attr(&mut a, NETDEV_A_NAPI_ID, &id.to_ne_bytes());
        let seq = self.next_seq();
        let what = format!("netlink netdev napi-get id {id}");
        self.nl.send(
            &request(self.family, 0, seq, NETDEV_CMD_NAPI_GET, &a),
            &what,
        )?;
        let buf = self.nl.recv(&what)?;
        for r in parse_replies(&buf, self.family) {
            match r {
                Reply::Napi(n) if n.id == id => return Ok(n),
                Reply::Error(e) if e != 0 => return Err(refused(what, e)),
                _ => {}
            }
        }
        Err(refused(
            format!("{what}: no NAPI in the answer"),
            libc::EPROTO,
        ))
    }

    /// Sets one setting of NAPI `id` (`napi-set`; needs CAP_NET_ADMIN, else EPERM; EINVAL
    /// for a value out of range, EOPNOTSUPP before kernel 6.13).
    pub fn set(&mut self, id: u32, param: NapiParam, value: u64) -> SysResult<()> {
        let mut a = Vec::new();
        push_attr(&mut a, NETDEV_A_NAPI_ID, &id.to_ne_bytes());
        match param {
            NapiParam::DeferHardIrqs => {
                let v = u32::try_from(value).unwrap_or(u32::MAX);
                push_attr(&mut a, param.attr(), &v.to_ne_bytes());
            }
            _ => push_attr(&mut a, param.attr(), &value.to_ne_bytes()),
        }
        let seq = self.next_seq();
        let what = format!("netlink netdev napi-set id {id} {} {value}", param.name());
        self.nl.send(
            &request(self.family, NLM_F_ACK, seq, NETDEV_CMD_NAPI_SET, &a),
            &what,
        )?;
        let buf = self.nl.recv(&what)?;
        match parse_replies(&buf, self.family).first() {
            Some(Reply::Error(0)) => Ok(()),
            Some(Reply::Error(e)) => Err(refused(what, *e)),
            _ => Err(refused(format!("{what}: no acknowledgement"), libc::EPROTO)),
        }
    }
}

/// Reply bytes as the kernel lays them out, for tests and fuzz seeds: a NAPI message of
/// `family` (timeouts as 8-byte `uint`s when `wide`), then NLMSG_DONE.
pub fn sample_dump(family: u16, napis: &[Napi], wide: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for n in napis {
        let mut a = Vec::new();
        push_attr(&mut a, NETDEV_A_NAPI_ID, &n.id.to_ne_bytes());
        push_attr(&mut a, NETDEV_A_NAPI_IFINDEX, &n.ifindex.to_ne_bytes());
        if let Some(v) = n.irq {
            push_attr(&mut a, NETDEV_A_NAPI_IRQ, &v.to_ne_bytes());
        }
        if let Some(v) = n.defer_hard_irqs {
            push_attr(&mut a, NETDEV_A_NAPI_DEFER_HARD_IRQS, &v.to_ne_bytes());
        }
        for (attr, v) in [
            (NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT, n.gro_flush_timeout_ns),
            (NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT, n.irq_suspend_timeout_ns),
        ] {
            match v {
                Some(v) if wide => push_attr(&mut a, attr, &v.to_ne_bytes()),
                Some(v) => push_attr(&mut a, attr, &(v as u32).to_ne_bytes()),
                None => {}
            }
        }
        out.extend(request(family, 0x2, 7, NETDEV_CMD_NAPI_GET, &a));
    }
    let mut done = Vec::new();
    done.extend_from_slice(&20u32.to_ne_bytes());
    done.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    done.extend_from_slice(&0x2u16.to_ne_bytes());
    done.extend_from_slice(&7u32.to_ne_bytes());
    done.extend_from_slice(&0u32.to_ne_bytes());
    done.extend_from_slice(&0i32.to_ne_bytes());
    out.extend(done);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn napi(id: u32) -> Napi {
        Napi {
            id,
            ifindex: 4,
            irq: None,
            pid: None,
            defer_hard_irqs: Some(2),
            gro_flush_timeout_ns: Some(200_000),
            irq_suspend_timeout_ns: Some(20_000_000),
        }
    }

    #[test]
    fn a_dump_parses_into_napis_then_done_with_4_or_8_byte_timeouts() {
        for wide in [false, true] {
            let b = sample_dump(30, &[napi(8193), napi(8194)], wide);
            assert_eq!(
                parse_replies(&b, 30),
                [
                    Reply::Napi(napi(8193)),
                    Reply::Napi(napi(8194)),
                    Reply::Done
                ]
            );
            // The same bytes under another family number are not NAPI answers.
            assert_eq!(parse_replies(&b, 31)[0], Reply::Other);
        }
    }

    #[test]
    fn errors_and_cut_bytes() {
        // An NLMSG_ERROR carrying -EPERM, then half a message.
        let mut b = Vec::new();
        b.extend_from_slice(&36u32.to_ne_bytes());
        b.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        b.extend_from_slice(&[0; 10]);
        b.extend_from_slice(&(-libc::EPERM).to_ne_bytes());
        b.extend_from_slice(&[0; 16]);
        b.extend_from_slice(&sample_dump(30, &[napi(1)], true)[..10]);
        assert_eq!(parse_replies(&b, 30), [Reply::Error(libc::EPERM)]);
        assert!(parse_replies(&[], 30).is_empty());
        assert!(parse_replies(&[0xff; 15], 30).is_empty());
        // An odd-sized timeout is not a value.
        let mut a = Vec::new();
        push_attr(&mut a, NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT, &[1, 2, 3]);
        assert_eq!(parse_napi(&a).gro_flush_timeout_ns, None);
    }

    #[test]
    fn the_controller_answers_with_the_family_number() {
        let mut a = Vec::new();
        push_attr(&mut a, CTRL_ATTR_FAMILY_NAME, b"netdev\0");
        push_attr(&mut a, CTRL_ATTR_FAMILY_ID, &27u16.to_ne_bytes());
        let m = request(GENL_ID_CTRL, 0, 1, 1, &a);
        assert_eq!(parse_replies(&m, 0), [Reply::Family(27)]);
    }

    #[test]
    fn the_running_kernel_has_the_family_and_lo_has_no_napi() {
        let mut nd = match Netdev::open() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("skipped: no netdev netlink family here: {e}");
                return;
            }
        };
        let lo = crate::ifaddr::ifindex("lo").unwrap();
        match nd.napis(lo) {
            Ok(v) => assert!(v.is_empty(), "{v:?}"),
            Err(e) => eprintln!("skipped: napi-get refused: {e}"),
        }
    }
}
