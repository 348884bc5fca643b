//! The cryptography RADIUS rests on, all MD5 based: the Response Authenticator and the
//! Accounting-Request Authenticator (RFC 2865 §3, RFC 2866 §3), User-Password hiding
//! (RFC 2865 §5.2), CHAP (RFC 1994 as RFC 2865 §5.3 uses it) and Message-Authenticator
//! (HMAC-MD5, RFC 3579 §3.2).
//!
//! MD5 and HMAC come from RustCrypto's `md-5` and `hmac`. A [`Secret`] keeps the HMAC
//! state after the key is absorbed, so a Message-Authenticator costs a clone and the
//! packet's blocks, never the key schedule again.

use crate::packet::{AUTH_LEN, HEADER};
use hmac::{Hmac, Mac};
use md5::{Digest, Md5};

type HmacMd5 = Hmac<Md5>;

/// The longest hidden User-Password (RFC 2865 §5.2).
pub const MAX_PASSWORD: usize = 128;

/// A shared secret with its HMAC key state ready.
#[derive(Clone)]
pub struct Secret {
    bytes: Box<[u8]>,
    mac: HmacMd5,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.bytes.len())
    }
}

impl PartialEq for Secret {
    fn eq(&self, o: &Self) -> bool {
        self.bytes == o.bytes
    }
}

impl Secret {
    /// A secret of these bytes (any length: HMAC takes keys of every size).
    pub fn new(bytes: &[u8]) -> Self {
        Secret {
            bytes: bytes.into(),
            // HMAC accepts a key of any length: this cannot fail.
            mac: HmacMd5::new_from_slice(bytes).unwrap_or_else(|_| unreachable!()),
        }
    }

    /// The secret itself.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// HMAC-MD5 of `packet` with the 16 bytes at `ma_at` (a Message-Authenticator's
    /// value) taken as zeros and the authenticator field taken as `auth`.
    pub fn message_authenticator(
        &self,
        packet: &[u8],
        ma_at: usize,
        auth: &[u8; AUTH_LEN],
    ) -> [u8; AUTH_LEN] {
        let mut m = self.mac.clone();
        m.update(&packet[..4]);
        m.update(auth);
        m.update(&packet[HEADER..ma_at]);
        m.update(&[0u8; AUTH_LEN]);
        m.update(&packet[ma_at + AUTH_LEN..]);
        m.finalize().into_bytes().into()
    }

    /// MD5(Code | Identifier | Length | `auth` | Attributes | Secret): the Response
    /// Authenticator with the request's authenticator as `auth`, or an Accounting-Request
    /// Authenticator with `auth` all zeros.
    pub fn authenticator(&self, packet: &[u8], auth: &[u8; AUTH_LEN]) -> [u8; AUTH_LEN] {
        let mut h = Md5::new();
        h.update(&packet[..4]);
        h.update(auth);
        h.update(&packet[HEADER..]);
        h.update(&self.bytes);
        h.finalize().into()
    }

    /// Hides `password` for the request authenticator `auth` into `out` (RFC 2865 §5.2);
    /// returns the hidden length (the password padded to a multiple of 16, at least 16),
    /// or `None` if it is longer than 128 bytes or `out` is too short.
    pub fn hide_password(
        &self,
        auth: &[u8; AUTH_LEN],
        password: &[u8],
        out: &mut [u8],
    ) -> Option<usize> {
        let n = password.len().div_ceil(AUTH_LEN).max(1) * AUTH_LEN;
        if n > MAX_PASSWORD || out.len() < n {
            return None;
        }
        out[..n].fill(0);
        out[..password.len()].copy_from_slice(password);
        let mut prev: [u8; AUTH_LEN] = *auth;
        for chunk in out[..n].chunks_exact_mut(AUTH_LEN) {
            let b = self.md5_with(&prev);
            for (c, k) in chunk.iter_mut().zip(b) {
                *c ^= k;
            }
            prev.copy_from_slice(chunk);
        }
        Some(n)
    }

    /// Recovers a hidden User-Password into `out`; returns its length up to the first
    /// NUL (the padding), or `None` if `hidden` is not 16..=128 bytes in steps of 16.
    pub fn unhide_password(
        &self,
        auth: &[u8; AUTH_LEN],
        hidden: &[u8],
        out: &mut [u8; MAX_PASSWORD],
    ) -> Option<usize> {
        let n = hidden.len();
        if n == 0 || n > MAX_PASSWORD || !n.is_multiple_of(AUTH_LEN) {
            return None;
        }
        let mut prev: &[u8] = auth;
        for (i, c) in hidden.chunks_exact(AUTH_LEN).enumerate() {
            let b = self.md5_with(prev);
            for k in 0..AUTH_LEN {
                out[i * AUTH_LEN + k] = c[k] ^ b[k];
            }
            prev = c;
        }
        Some(out[..n].iter().position(|&b| b == 0).unwrap_or(n))
    }

    /// MD5(secret | `tail`).
    #[inline]
    fn md5_with(&self, tail: &[u8]) -> [u8; AUTH_LEN] {
        let mut h = Md5::new();
        h.update(&self.bytes);
        h.update(tail);
        h.finalize().into()
    }
}

/// The CHAP response MD5(ident | password | challenge).
pub fn chap_response(ident: u8, password: &[u8], challenge: &[u8]) -> [u8; AUTH_LEN] {
    let mut h = Md5::new();
    h.update([ident]);
    h.update(password);
    h.update(challenge);
    h.finalize().into()
}

/// Equality that takes the same time wherever the first difference is (passwords,
/// authenticators).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_md5_matches_rfc_2202() {
        // RFC 2202 test case 2: key "Jefe".
        let s = Secret::new(b"Jefe");
        let mut m = s.mac.clone();
        m.update(b"what do ya want for nothing?");
        let got: [u8; 16] = m.finalize().into_bytes().into();
        assert_eq!(
            got,
            [
                0x75, 0x0c, 0x78, 0x3e, 0x6a, 0xb0, 0xb5, 0x03, 0xea, 0xa8, 0x6e, 0x31, 0x0a, 0x5d,
                0xb7, 0x38
            ]
        );
    }

    #[test]
    fn passwords_hide_and_come_back_at_every_length() {
        let s = Secret::new(b"testing123");
        let auth = [7u8; 16];
        for len in [0usize, 1, 15, 16, 17, 31, 32, 100, 128] {
            let pw = vec![b'p'; len];
            let mut hidden = [0u8; 128];
            let n = s.hide_password(&auth, &pw, &mut hidden).unwrap();
            assert_eq!(n, len.div_ceil(16).max(1) * 16);
            if len > 0 {
                assert_ne!(&hidden[..len], &pw[..]);
            }
            let mut out = [0u8; 128];
            let m = s.unhide_password(&auth, &hidden[..n], &mut out).unwrap();
            assert_eq!(&out[..m], &pw[..]);
        }
        assert_eq!(s.hide_password(&auth, &[1; 129], &mut [0; 256]), None);
        assert_eq!(s.unhide_password(&auth, &[0; 15], &mut [0; 128]), None);
    }

    #[test]
    fn constant_time_equality() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
