//! One flow's send loop, per mode. Buffer `k = m % buffers` carries message `m`; with a
//! fixed cycle it is filled once, with `rewrite` it is refilled for every message as soon
//! as the kernel has released it (after send returns for copies; after the completion for
//! MSG_ZEROCOPY and SEND_ZC).

use crate::pattern::fill;
use crate::report::ZeroCopyCounts;
use crate::SendMode;
use firehose_sys::socket::is_would_block;
use firehose_sys::splice::{memfd_with, sendfile, Pipe, SpliceSource};
use firehose_sys::tcp::TcpSock;
use firehose_sys::uring::SendRing;
use firehose_sys::zerocopy::ZcSender;
use firehose_sys::SysResult;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Wait at most this long for a zero-copy completion before calling the flow stuck.
const COMPLETION_TIMEOUT_MS: i32 = 10_000;

/// What a flow's loop needs.
pub(crate) struct FlowSend<'a> {
    pub sock: &'a TcpSock,
    pub flow: u32,
    pub msg_size: usize,
    pub buffers: usize,
    pub rewrite: bool,
    /// Bytes to send on this flow; `None`: until `stop`.
    pub limit: Option<u64>,
    pub stop: &'a AtomicBool,
    pub sent: &'a AtomicU64,
}

impl FlowSend<'_> {
    fn tag(&self, m: u64) -> u64 {
        if self.rewrite {
            m
        } else {
            m % self.buffers as u64
        }
    }

    /// Length of message `m`, 0 when the flow is done.
    fn next_len(&self, done: u64) -> usize {
        if self.stop.load(Ordering::Relaxed) {
            return 0;
        }
        match self.limit {
            Some(l) => (l.saturating_sub(done)).min(self.msg_size as u64) as usize,
            None => self.msg_size,
        }
    }

    fn sent(&self, n: usize) -> u64 {
        self.sent.fetch_add(n as u64, Ordering::Relaxed) + n as u64
    }

    /// Calls `send(k, m, len)` for message `m` from buffer `k` until the flow is done.
    fn each_message(
        &self,
        mut send: impl FnMut(usize, u64, usize) -> SysResult<()>,
    ) -> SysResult<()> {
        let (mut m, mut done) = (0u64, 0u64);
        loop {
            let len = self.next_len(done);
            if len == 0 {
                return Ok(());
            }
            send((m % self.buffers as u64) as usize, m, len)?;
            done = self.sent(len);
            m += 1;
        }
    }
}

/// Runs the flow to its end; returns the zero-copy counters for zero-copy modes.
pub(crate) fn run(mode: SendMode, f: &FlowSend<'_>) -> SysResult<Option<ZeroCopyCounts>> {
    match mode {
        SendMode::Copy => copy(f).map(|_| None),
        SendMode::Zerocopy => msg_zerocopy(f).map(Some),
        SendMode::Sendfile => send_file(f).map(|_| None),
        SendMode::Splice => splice(f).map(|_| None),
        SendMode::Uring => uring(f, false).map(|_| None),
        SendMode::UringZc => uring(f, true).map(Some),
    }
}

fn static_buffers(f: &FlowSend<'_>) -> Vec<Vec<u8>> {
    (0..f.buffers)
        .map(|k| {
            let mut b = vec![0u8; f.msg_size];
            fill(&mut b, f.flow, k as u64);
            b
        })
        .collect()
}

fn copy(f: &FlowSend<'_>) -> SysResult<()> {
    let mut bufs = static_buffers(f);
    f.each_message(|k, m, len| {
        if f.rewrite {
            fill(&mut bufs[k], f.flow, f.tag(m));
        }
        f.sock.send_all(&bufs[k][..len])
    })
}

fn msg_zerocopy(f: &FlowSend<'_>) -> SysResult<ZeroCopyCounts> {
    let mut z = ZcSender::new(f.buffers, f.msg_size);
    for k in 0..f.buffers {
        fill(z.buffer_mut(k).expect("fresh buffer"), f.flow, k as u64);
    }
    f.each_message(|k, m, len| {
        z.wait_free(f.sock, k, COMPLETION_TIMEOUT_MS)?;
        if f.rewrite {
            fill(z.buffer_mut(k).expect("completed buffer"), f.flow, f.tag(m));
        }
        z.send(f.sock, k, len)?;
        z.reap(f.sock, 0)
    })?;
    z.drain(f.sock, COMPLETION_TIMEOUT_MS)?;
    Ok(ZeroCopyCounts {
        sends: z.stats.sends,
        notifications: z.stats.notifications,
        completed: z.stats.completed,
        copied: z.stats.copied,
        enobufs: z.stats.enobufs,
    })
}

fn send_file(f: &FlowSend<'_>) -> SysResult<()> {
    let file: Vec<u8> = static_buffers(f).concat();
    let fd = memfd_with("firehose-stream", &file)?;
    f.each_message(|k, _, len| {
        let mut off = (k * f.msg_size) as i64;
        let mut left = len;
        while left > 0 {
            match sendfile(f.sock.as_raw_fd(), fd.as_raw_fd(), &mut off, left) {
                Ok(n) => left -= n,
                Err(e) if is_would_block(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })
}

fn splice(f: &FlowSend<'_>) -> SysResult<()> {
    let src = SpliceSource::new(f.buffers * f.msg_size, |b| {
        for (k, m) in b.chunks_mut(f.msg_size).enumerate() {
            fill(m, f.flow, k as u64);
        }
    })?;
    let pipe = Pipe::new((f.msg_size + 4096).clamp(8192, 1 << 20))?;
    f.each_message(|k, _, len| {
        let base = k * f.msg_size;
        let mut off = 0;
        while off < len {
            // One pipe slot holds one page: an unaligned chunk of pipe.size() bytes spans one
            // page more than the pipe has slots, and vmsplice would wait forever for room.
            let end = (off + pipe.size() - 4096).min(len);
            let mut in_pipe = 0;
            while off + in_pipe < end {
                in_pipe += pipe.vmsplice(&src, base + off + in_pipe..base + end)?;
            }
            let mut out = 0;
            while out < in_pipe {
                out += pipe.splice_to(f.sock.as_raw_fd(), in_pipe - out, off + out < len)?;
            }
            off += in_pipe;
        }
        Ok(())
    })
}

fn uring(f: &FlowSend<'_>, zc: bool) -> SysResult<ZeroCopyCounts> {
    let mut r = SendRing::new(f.buffers, f.msg_size, zc)?;
    for k in 0..f.buffers {
        fill(r.buffer_mut(k).expect("fresh buffer"), f.flow, k as u64);
    }
    f.each_message(|k, m, len| {
        r.wait_free(k)?;
        if f.rewrite {
            fill(r.buffer_mut(k).expect("released buffer"), f.flow, f.tag(m));
        }
        r.send(f.sock.as_raw_fd(), k, len)
    })?;
    r.drain()?;
    Ok(ZeroCopyCounts {
        sends: r.stats.requests,
        notifications: r.stats.notifications,
        completed: r.stats.notifications,
        copied: r.stats.copied,
        enobufs: 0,
    })
}
