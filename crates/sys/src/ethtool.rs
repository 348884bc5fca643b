//! The SIOCETHTOOL ioctl: NIC channels (queues), the RSS indirection table, the UDP flow-hash
//! fields and the GRO/GSO switches — what `ethtool -l/-x/-n/-k` show, read without parsing
//! ethtool's output. Each call is a fixed command struct the kernel reads and writes in place.
//!
//! Errors keep the errno: a driver without RSS answers EOPNOTSUPP, which callers report as
//! "not applicable" rather than as a failure.

use crate::{cvt, SysError, SysResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GRXFH: u32 = 0x29;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_SGRO: u32 = 0x2c;
const ETHTOOL_GRXFHINDIR: u32 = 0x38;
const ETHTOOL_SRXFHINDIR: u32 = 0x39;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

/// `flow_type` for UDP over IPv4 in ETHTOOL_GRXFH.
pub const UDP_V4_FLOW: u32 = 0x02;
/// Hash-field bits of ETHTOOL_GRXFH (`RXH_*` in linux/ethtool.h).
pub const RXH_IP_SRC: u64 = 1 << 4;
pub const RXH_IP_DST: u64 = 1 << 5;
pub const RXH_L4_B_0_1: u64 = 1 << 6;
pub const RXH_L4_B_2_3: u64 = 1 << 7;

/// Queue counts of a NIC (`struct ethtool_channels`); 0 means the NIC has no such kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Channels {
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_other: u32,
    pub max_combined: u32,
    pub rx: u32,
    pub tx: u32,
    pub other: u32,
    pub combined: u32,
}

#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx: u32,
    tx: u32,
    other: u32,
    combined: u32,
}

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ifreq` with the `ifr_data` member of its union; 40 bytes like the kernel's.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// A socket to issue ethtool commands on; any AF_INET socket works for SIOCETHTOOL.
pub struct Ethtool {
    fd: OwnedFd,
}

impl Ethtool {
    /// Opens the control socket (in the caller's network namespace).
    pub fn new() -> SysResult<Self> {
        // SAFETY: socket() takes no pointers; the result is checked by cvt before use.
        let fd = cvt(
            unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
            || "socket(AF_INET, SOCK_DGRAM) for SIOCETHTOOL".into(),
        )?;
        Ok(Ethtool {
            // SAFETY: fd was just returned by socket() and is owned by nobody else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Runs one ethtool command whose struct starts at `cmd` and spans what the kernel expects.
    ///
    /// # Safety
    /// `cmd` must point to a writable buffer of the size the kernel uses for that command,
    /// alive for the duration of the call.
    pub(crate) unsafe fn ioctl(
        &self,
        iface: &str,
        cmd: *mut libc::c_void,
        what: &str,
    ) -> SysResult<()> {
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: cmd,
            _pad: [0; 16],
        };
        if iface.len() >= libc::IFNAMSIZ || iface.contains('\0') {
            return Err(SysError {
                what: format!("{what} on {iface:?}"),
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        req.name[..iface.len()].copy_from_slice(iface.as_bytes());
        cvt(
            // SAFETY: req is a live ifreq whose data pointer the caller guarantees valid.
            unsafe { libc::ioctl(self.fd.as_raw_fd(), SIOCETHTOOL as _, &mut req) },
            || format!("ioctl(SIOCETHTOOL, {what}) on {iface}"),
        )?;
        Ok(())
    }

    /// The first bytes of an ifreq's union after a netdevice ioctl (SIOCGIFFLAGS, ...).
    fn ifreq(&self, iface: &str, req: libc::c_ulong, what: &str) -> SysResult<[u8; 24]> {
        #[repr(C)]
        struct IfReqRaw {
            name: [u8; libc::IFNAMSIZ],
            ifru: [u8; 24],
        }
        if iface.len() >= libc::IFNAMSIZ || iface.contains('\0') {
            return Err(SysError {
                what: format!("{what} on {iface:?}"),
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        let mut r = IfReqRaw {
            name: [0; libc::IFNAMSIZ],
            ifru: [0; 24],
        };
        r.name[..iface.len()].copy_from_slice(iface.as_bytes());
        cvt(
            // SAFETY: r is a live ifreq (name + union) that the kernel fills in place.
            unsafe { libc::ioctl(self.fd.as_raw_fd(), req as _, &mut r) },
            || format!("ioctl({what}) on {iface}"),
        )?;
        Ok(r.ifru)
    }

    /// The interface flags (IFF_UP, ...), as SIOCGIFFLAGS reports them in this namespace.
    pub fn if_flags(&self, iface: &str) -> SysResult<u32> {
        let u = self.ifreq(iface, libc::SIOCGIFFLAGS, "SIOCGIFFLAGS")?;
        Ok(u16::from_ne_bytes([u[0], u[1]]) as u32)
    }

    /// The interface MTU (SIOCGIFMTU).
    pub fn mtu(&self, iface: &str) -> SysResult<u32> {
        let u = self.ifreq(iface, libc::SIOCGIFMTU, "SIOCGIFMTU")?;
        Ok(i32::from_ne_bytes([u[0], u[1], u[2], u[3]]) as u32)
    }

    /// The interface's link-layer address (SIOCGIFHWADDR): the source MAC of frames built
    /// for it.
    pub fn hwaddr(&self, iface: &str) -> SysResult<[u8; 6]> {
        let u = self.ifreq(iface, libc::SIOCGIFHWADDR, "SIOCGIFHWADDR")?;
        // A struct sockaddr: the family (2 bytes), then the address.
        Ok([u[2], u[3], u[4], u[5], u[6], u[7]])
    }

    /// Number of rx queues of `iface`: rx-only plus combined channels (ETHTOOL_GCHANNELS),
    /// or the rx-N entries under /sys/class/net/IFACE/queues for a driver without channels.
    pub fn rx_queues(&self, iface: &str) -> usize {
        if let Ok(c) = self.channels(iface) {
            let n = (c.rx + c.combined) as usize;
            if n > 0 {
                return n;
            }
        }
        std::fs::read_dir(format!("/sys/class/net/{iface}/queues"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                    .count()
            })
            .unwrap_or(1)
            .max(1)
    }

    /// ETHTOOL_GCHANNELS: queue counts, as `ethtool -l`.
    pub fn channels(&self, iface: &str) -> SysResult<Channels> {
        let mut c = EthtoolChannels {
            cmd: ETHTOOL_GCHANNELS,
            ..Default::default()
        };
        // SAFETY: c is a live ethtool_channels, the struct ETHTOOL_GCHANNELS fills.
        unsafe {
            self.ioctl(
                iface,
                (&mut c as *mut EthtoolChannels).cast(),
                "ETHTOOL_GCHANNELS",
            )?
        };
        Ok(Channels {
            max_rx: c.max_rx,
            max_tx: c.max_tx,
            max_other: c.max_other,
            max_combined: c.max_combined,
            rx: c.rx,
            tx: c.tx,
            other: c.other,
            combined: c.combined,
        })
    }

    /// ETHTOOL_GRXFHINDIR: the RSS indirection table (entry i = the rx queue of hash bucket i).
    pub fn rss_table(&self, iface: &str) -> SysResult<Vec<u32>> {
        // First call with size 0 asks the kernel for the table size.
        let mut head = [ETHTOOL_GRXFHINDIR, 0u32];
        // SAFETY: with size 0 the kernel reads and writes only the two u32 header words.
        unsafe { self.ioctl(iface, head.as_mut_ptr().cast(), "ETHTOOL_GRXFHINDIR")? };
        let size = head[1] as usize;
        let mut buf = vec![0u32; 2 + size];
        buf[0] = ETHTOOL_GRXFHINDIR;
        buf[1] = size as u32;
        // SAFETY: buf holds the header plus `size` u32 entries, exactly what the kernel fills.
        unsafe { self.ioctl(iface, buf.as_mut_ptr().cast(), "ETHTOOL_GRXFHINDIR")? };
        buf.drain(..2);
        Ok(buf)
    }

    /// ETHTOOL_SRXFHINDIR: sets the RSS indirection table; an empty table restores the
    /// driver's default spread.
    pub fn set_rss_table(&self, iface: &str, table: &[u32]) -> SysResult<()> {
        let mut buf = Vec::with_capacity(2 + table.len());
        buf.extend_from_slice(&[ETHTOOL_SRXFHINDIR, table.len() as u32]);
        buf.extend_from_slice(table);
        // SAFETY: buf holds the header plus table.len() entries, as the size field says.
        unsafe { self.ioctl(iface, buf.as_mut_ptr().cast(), "ETHTOOL_SRXFHINDIR") }
    }

    /// ETHTOOL_GRXFH: which header fields feed the RSS hash for `flow_type` (`RXH_*` bits).
    pub fn rx_flow_hash(&self, iface: &str, flow_type: u32) -> SysResult<u64> {
        // struct ethtool_rxnfc is 192 bytes; cmd at 0, flow_type at 4, data (u64) at 8. A
        // zeroed buffer of 256 bytes covers every kernel's copy of it.
        let mut buf = [0u64; 32];
        buf[0] = u64::from(ETHTOOL_GRXFH) | (u64::from(flow_type) << 32);
        if cfg!(target_endian = "big") {
            buf[0] = (u64::from(ETHTOOL_GRXFH) << 32) | u64::from(flow_type);
        }
        // SAFETY: buf is a live, zeroed buffer larger than struct ethtool_rxnfc.
        unsafe { self.ioctl(iface, buf.as_mut_ptr().cast(), "ETHTOOL_GRXFH")? };
        Ok(buf[1])
    }

    fn get_value(&self, iface: &str, cmd: u32, what: &str) -> SysResult<bool> {
        let mut v = EthtoolValue { cmd, data: 0 };
        // SAFETY: v is a live ethtool_value, the struct these commands read and fill.
        unsafe { self.ioctl(iface, (&mut v as *mut EthtoolValue).cast(), what)? };
        Ok(v.data != 0)
    }

    fn set_value(&self, iface: &str, cmd: u32, on: bool, what: &str) -> SysResult<()> {
        let mut v = EthtoolValue {
            cmd,
            data: u32::from(on),
        };
        // SAFETY: v is a live ethtool_value, the struct these commands read.
        unsafe { self.ioctl(iface, (&mut v as *mut EthtoolValue).cast(), what) }
    }

    /// The driver's statistics, name and value (`ethtool -S`); empty for a driver without.
    pub fn stats(&self, iface: &str) -> SysResult<Vec<(String, u64)>> {
        // struct ethtool_sset_info: cmd, reserved, sset_mask (u64), then one u32 per set.
        let mut info = [0u32; 5];
        info[0] = ETHTOOL_GSSET_INFO;
        let mask = 1u64 << ETH_SS_STATS;
        info[2] = mask as u32;
        info[3] = (mask >> 32) as u32;
        // SAFETY: info is a live ethtool_sset_info with room for the one set asked for.
        unsafe { self.ioctl(iface, info.as_mut_ptr().cast(), "ETHTOOL_GSSET_INFO")? };
        let answered = u64::from(info[2]) | (u64::from(info[3]) << 32);
        let n = if answered & mask != 0 {
            info[4] as usize
        } else {
            0
        };
        if n == 0 {
            return Ok(Vec::new());
        }
        // struct ethtool_gstrings: cmd, string_set, len, then len names of 32 bytes.
        let mut names = vec![0u8; 12 + n * ETH_GSTRING_LEN];
        names[0..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
        names[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
        names[8..12].copy_from_slice(&(n as u32).to_ne_bytes());
        // SAFETY: names holds the header and n names of ETH_GSTRING_LEN bytes, as len says.
        unsafe { self.ioctl(iface, names.as_mut_ptr().cast(), "ETHTOOL_GSTRINGS")? };
        // struct ethtool_stats: cmd, n_stats, then n u64 values (8-aligned from word 1).
        let mut vals = vec![0u64; 1 + n];
        vals[0] = u64::from(ETHTOOL_GSTATS) | ((n as u64) << 32);
        if cfg!(target_endian = "big") {
            vals[0] = (u64::from(ETHTOOL_GSTATS) << 32) | n as u64;
        }
        // SAFETY: vals holds the 8-byte header and n u64 values, as n_stats says.
        unsafe { self.ioctl(iface, vals.as_mut_ptr().cast(), "ETHTOOL_GSTATS")? };
        Ok(names[12..]
            .chunks_exact(ETH_GSTRING_LEN)
            .zip(&vals[1..])
            .map(|(name, v)| {
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                (String::from_utf8_lossy(&name[..end]).into_owned(), *v)
            })
            .collect())
    }

    /// ETHTOOL_GGRO: generic receive offload on or off.
    pub fn gro(&self, iface: &str) -> SysResult<bool> {
        self.get_value(iface, ETHTOOL_GGRO, "ETHTOOL_GGRO")
    }

    /// ETHTOOL_SGRO: switches generic receive offload.
    pub fn set_gro(&self, iface: &str, on: bool) -> SysResult<()> {
        self.set_value(iface, ETHTOOL_SGRO, on, "ETHTOOL_SGRO")
    }

    /// ETHTOOL_GGSO: generic segmentation offload on or off.
    pub fn gso(&self, iface: &str) -> SysResult<bool> {
        self.get_value(iface, ETHTOOL_GGSO, "ETHTOOL_GGSO")
    }

    /// ETHTOOL_SGSO: switches generic segmentation offload.
    pub fn set_gso(&self, iface: &str, on: bool) -> SysResult<()> {
        self.set_value(iface, ETHTOOL_SGSO, on, "ETHTOOL_SGSO")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_answers_or_refuses_with_errno() {
        let e = Ethtool::new().unwrap();
        // lo has GSO on by default and a readable GRO flag.
        assert!(e.gso("lo").unwrap());
        e.gro("lo").unwrap();
        // lo has no RSS: the errno is kept for the caller to report.
        let err = e.rss_table("lo").unwrap_err();
        assert_eq!(err.errno(), Some(libc::EOPNOTSUPP), "{err}");
        assert!(err.to_string().contains("ETHTOOL_GRXFHINDIR"), "{err}");
        let err = e.channels("no-such-if0").unwrap_err();
        assert_eq!(err.errno(), Some(libc::ENODEV), "{err}");
        assert!(e.gro("a-name-far-too-long-for-ifnamsiz").is_err());
        // lo has no driver statistics: none, or a refusal with its errno.
        match e.stats("lo") {
            Ok(v) => assert!(v.is_empty(), "{v:?}"),
            Err(err) => assert_eq!(err.errno(), Some(libc::EOPNOTSUPP), "{err}"),
        }
    }
}
