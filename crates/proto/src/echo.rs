//! Echo: the reply is the request, byte for byte. The request already sits in the
//! engine's buffer, so echoing costs no copy at all.

use firehose_engine::{Handler, Request, Verdict};

/// The echo handler.
#[derive(Debug, Default, Clone, Copy)]
pub struct Echo;

impl Handler for Echo {
    #[inline]
    fn handle(&mut self, req: &mut Request<'_>) -> Verdict {
        Verdict::Reply(req.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_engine::Peer;

    #[test]
    fn echoes_length_unchanged() {
        let mut buf = [7u8; 64];
        let peer = Peer::from_addr("127.0.0.1:1".parse().unwrap());
        for len in [0, 33] {
            let mut req = Request::new(&mut buf, len, peer);
            assert_eq!(Echo.handle(&mut req), Verdict::Reply(len));
        }
        assert_eq!(buf, [7u8; 64]);
    }
}
