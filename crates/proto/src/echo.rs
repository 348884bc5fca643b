//! Echo: the reply is the request, byte for byte. The request already sits in the
//! engine's buffer, so echoing costs no copy at all.

use firehose_engine::{Handler, Peer, Verdict};

/// The echo handler.
#[derive(Debug, Default, Clone, Copy)]
pub struct Echo;

impl Handler for Echo {
    #[inline]
    fn handle(&mut self, _buf: &mut [u8], len: usize, _peer: &Peer<'_>) -> Verdict {
        Verdict::Reply(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_length_unchanged() {
        let mut buf = [7u8; 64];
        let peer = Peer::from_addr("127.0.0.1:1".parse().unwrap());
        assert_eq!(Echo.handle(&mut buf, 0, &peer), Verdict::Reply(0));
        assert_eq!(Echo.handle(&mut buf, 33, &peer), Verdict::Reply(33));
        assert_eq!(buf, [7u8; 64]);
    }
}
