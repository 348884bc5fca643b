//! A blocking call that a signal interrupts. A socket call with a timeout (SO_RCVTIMEO,
//! SO_SNDTIMEO) fails with EINTR when a signal arrives, whatever SA_RESTART says (signal(7)):
//! the SIGCONT of a process that was frozen and thawed is one such signal, and std passes the
//! EINTR on as `ErrorKind::Interrupted`. A caller that means "wait for data or the timeout"
//! calls again.

use std::io;

/// Calls `f` again for as long as it fails with `ErrorKind::Interrupted`; any other outcome
/// (the data, the timeout's `WouldBlock`, another error) is returned. Each call waits its own
/// timeout again, so a wait is longer only by as many signals as arrive.
pub fn retry_interrupted<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::{Duration, Instant};

    static SIGNALS: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn count_signal(_: libc::c_int) {
        SIGNALS.fetch_add(1, Ordering::SeqCst);
    }

    /// A handler with SA_RESTART: the case where only a call with a timeout sees EINTR.
    fn handle_sigusr2() {
        // SAFETY: a zeroed sigaction is a valid value (empty mask, no flags) before the
        // fields are set; the handler only touches an atomic, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = count_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        }
    }

    fn signal_thread(t: libc::pthread_t) {
        // SAFETY: `t` is a thread of this process that is still running: the test joins it
        // only after the last signal.
        assert_eq!(unsafe { libc::pthread_kill(t, libc::SIGUSR2) }, 0);
    }

    #[test]
    fn a_receive_with_a_timeout_waits_on_through_signals() {
        handle_sigusr2();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let addr = rx.local_addr().unwrap();
        let plain_done = Arc::new(AtomicBool::new(false));
        let (tid_tx, tid_rx) = mpsc::channel();
        let p = plain_done.clone();
        let h = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tid_tx.send(unsafe { libc::pthread_self() }).unwrap();
            let mut buf = [0u8; 16];
            // The premise: a plain recv with a timeout fails with EINTR on a signal.
            let plain = rx.recv_from(&mut buf).map(|(n, _)| n);
            p.store(true, Ordering::SeqCst);
            let retried =
                retry_interrupted(|| rx.recv_from(&mut buf)).map(|(n, _)| buf[..n].to_vec());
            (plain.map_err(|e| e.kind()), retried.map_err(|e| e.kind()))
        });
        let t = tid_rx.recv().unwrap();
        let deadline = Instant::now() + Duration::from_secs(4);
        while !plain_done.load(Ordering::SeqCst) && Instant::now() < deadline {
            signal_thread(t);
            std::thread::sleep(Duration::from_millis(20));
        }
        // Signals keep coming while the retrying receive waits, then the datagram.
        let before = SIGNALS.load(Ordering::SeqCst);
        for _ in 0..15 {
            signal_thread(t);
            std::thread::sleep(Duration::from_millis(20));
        }
        let during = SIGNALS.load(Ordering::SeqCst) - before;
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"after", addr).unwrap();
        let (plain, retried) = h.join().unwrap();
        assert_eq!(plain, Err(io::ErrorKind::Interrupted));
        assert!(during > 0, "no signal reached the thread while it waited");
        assert_eq!(retried, Ok(b"after".to_vec()));
    }

    #[test]
    fn other_errors_and_values_pass_through() {
        let mut calls = 0;
        let r: io::Result<()> = retry_interrupted(|| {
            calls += 1;
            match calls {
                1 | 2 => Err(io::Error::from(io::ErrorKind::Interrupted)),
                _ => Err(io::Error::from(io::ErrorKind::WouldBlock)),
            }
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(calls, 3);
        assert_eq!(retry_interrupted(|| Ok(7)).unwrap(), 7);
    }
}
