//! EDNS options answered when switched on: NSID (RFC 5001) and DNS cookies (RFC 7873,
//! server cookies as RFC 9018 builds them, so any server sharing the secret accepts
//! them).
//!
//! Options are read from the query's OPT only when one of these is on, and what we
//! add is collected in a small fixed buffer appended to our OPT: nothing allocates.

use super::wire::get16;
use std::net::IpAddr;

/// EDNS option codes.
pub const NSID: u16 = 3;
pub const COOKIE: u16 = 10;
/// Room for our options: NSID (4 + up to 64) and a cookie (4 + 8 + 16).
pub const EXTRA_MAX: usize = 4 + MAX_NSID + 4 + 24;
/// Longest NSID accepted.
pub const MAX_NSID: usize = 64;
/// How long a server cookie stays valid, and how far ahead of our clock it may be.
const COOKIE_LIFETIME: u32 = 3600;
const COOKIE_AHEAD: u32 = 300;

/// Which options to answer.
#[derive(Debug, Clone, Default)]
pub struct OptionsConfig {
    /// Our NSID payload (e.g. a host name), if NSID is on.
    pub nsid: Option<Vec<u8>>,
    /// The cookie secret, if cookies are on.
    pub cookie_secret: Option<[u8; 16]>,
}

/// What a query's OPT asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asked {
    pub nsid: bool,
    pub client_cookie: Option<[u8; 8]>,
    /// The query carried a server cookie we issued and that is still fresh.
    pub cookie_valid: bool,
    /// A COOKIE option of a length RFC 7873 §5.2.2 forbids: FORMERR.
    pub cookie_malformed: bool,
}

/// Reads the options in `rdata` (the query's OPT RDATA).
pub fn read(rdata: &[u8], cfg: &OptionsConfig, ip: Option<IpAddr>, now: u32) -> Asked {
    let mut a = Asked::default();
    let mut o = 0;
    while o + 4 <= rdata.len() {
        let (code, len) = (get16(rdata, o), get16(rdata, o + 2) as usize);
        let Some(val) = rdata.get(o + 4..o + 4 + len) else {
            break;
        };
        match code {
            NSID if cfg.nsid.is_some() => a.nsid = true,
            COOKIE if cfg.cookie_secret.is_some() => {
                if len != 8 && !(16..=40).contains(&len) {
                    a.cookie_malformed = true;
                } else {
                    let client: [u8; 8] = val[..8].try_into().unwrap_or_default();
                    a.client_cookie = Some(client);
                    if let (Some(secret), Some(ip), 24) = (cfg.cookie_secret, ip, len) {
                        a.cookie_valid = valid(&secret, &client, &val[8..], ip, now);
                    }
                }
            }
            _ => {}
        }
        o += 4 + len;
    }
    a
}

/// Writes the options answering `a` into `out`; returns their length.
pub fn write(
    out: &mut [u8; EXTRA_MAX],
    a: &Asked,
    cfg: &OptionsConfig,
    ip: Option<IpAddr>,
    now: u32,
) -> usize {
    let mut n = 0;
    if let (true, Some(id)) = (a.nsid, &cfg.nsid) {
        out[n..n + 2].copy_from_slice(&NSID.to_be_bytes());
        out[n + 2..n + 4].copy_from_slice(&(id.len() as u16).to_be_bytes());
        out[n + 4..n + 4 + id.len()].copy_from_slice(id);
        n += 4 + id.len();
    }
    if let (Some(client), Some(secret), Some(ip)) = (a.client_cookie, cfg.cookie_secret, ip) {
        out[n..n + 4].copy_from_slice(&[0, COOKIE as u8, 0, 24]);
        out[n + 4..n + 12].copy_from_slice(&client);
        out[n + 12..n + 28].copy_from_slice(&server_cookie(&secret, &client, ip, now));
        n += 28;
    }
    n
}

/// RFC 9018 §4: version 1, three reserved bytes, a timestamp, and SipHash-2-4 over the
/// client cookie, those 8 bytes and the client's address.
pub fn server_cookie(secret: &[u8; 16], client: &[u8; 8], ip: IpAddr, now: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = 1;
    c[4..8].copy_from_slice(&now.to_be_bytes());
    let mut msg = [0u8; 32];
    msg[..8].copy_from_slice(client);
    msg[8..16].copy_from_slice(&c[..8]);
    let len = match ip {
        IpAddr::V4(a) => {
            msg[16..20].copy_from_slice(&a.octets());
            20
        }
        IpAddr::V6(a) => {
            msg[16..32].copy_from_slice(&a.octets());
            32
        }
    };
    c[8..].copy_from_slice(&siphash24(secret, &msg[..len]).to_le_bytes());
    c
}

/// True if `server` is a cookie we issued to `ip` for `client` and it is fresh.
fn valid(secret: &[u8; 16], client: &[u8; 8], server: &[u8], ip: IpAddr, now: u32) -> bool {
    if server.len() != 16 || server[0] != 1 {
        return false;
    }
    let t = u32::from_be_bytes([server[4], server[5], server[6], server[7]]);
    // Serial-number arithmetic (RFC 1982), as RFC 9018 §4.3 asks.
    let age = now.wrapping_sub(t);
    let fresh = age <= COOKIE_LIFETIME || t.wrapping_sub(now) <= COOKIE_AHEAD;
    fresh && server_cookie(secret, client, ip, t)[..] == *server
}

/// SipHash-2-4 of `m` under `key`.
pub fn siphash24(key: &[u8; 16], m: &[u8]) -> u64 {
    let k0 = u64::from_le_bytes(key[..8].try_into().unwrap_or_default());
    let k1 = u64::from_le_bytes(key[8..].try_into().unwrap_or_default());
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut chunks = m.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap_or_default());
        v[3] ^= w;
        round(&mut v);
        round(&mut v);
        v[0] ^= w;
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = m.len() as u8;
    let w = u64::from_le_bytes(last);
    v[3] ^= w;
    round(&mut v);
    round(&mut v);
    v[0] ^= w;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_the_reference_vectors() {
        // The SipHash paper's key 00..0f; messages 00..(n-1).
        let key: [u8; 16] = core::array::from_fn(|i| i as u8);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(&key, &[]), 0x726f_db47_dd0e_0e31);
        assert_eq!(siphash24(&key, &msg), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn rfc9018_test_vector() {
        // RFC 9018 appendix A.1: the client cookie, secret, address and time given there.
        let client = [0x24, 0x64, 0xc4, 0xab, 0xcf, 0x10, 0xc9, 0x57];
        let secret = [
            0xe5, 0xe9, 0x73, 0xe5, 0xa6, 0xb2, 0xa4, 0x3f, 0x48, 0xe7, 0xdc, 0x84, 0x9e, 0x37,
            0xbf, 0xcf,
        ];
        let ip: IpAddr = "198.51.100.100".parse().unwrap();
        let c = server_cookie(&secret, &client, ip, 1_559_731_985);
        assert_eq!(
            c,
            [
                0x01, 0x00, 0x00, 0x00, 0x5c, 0xf7, 0x9f, 0x11, 0x1f, 0x81, 0x30, 0xc3, 0xee, 0xe2,
                0x94, 0x80
            ]
        );
        assert!(valid(&secret, &client, &c, ip, 1_559_731_985 + 100));
        assert!(!valid(&secret, &client, &c, ip, 1_559_731_985 + 4000));
        assert!(!valid(
            &secret,
            &client,
            &c,
            "198.51.100.101".parse().unwrap(),
            1_559_731_985
        ));
    }
}
