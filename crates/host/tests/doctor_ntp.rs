//! The doctor's NTP checks: the kernel clock's state as adjtimex gives it, and who holds
//! UDP port 123, over fake trees (a chronyd holding the port) and the live host.

use firehose_host::doctor::{self, Facts, Row, Scope, Status};
use firehose_host::fs::HostFs;
use firehose_host::nic::LiveNic;
use firehose_sys::clock::{KernelClock, STA_INS, STA_UNSYNC, TIME_ERROR};
use std::path::PathBuf;

fn rows_of<'a>(rows: &'a [Row], check: &str) -> Vec<&'a Row> {
    rows.iter().filter(|r| r.check == check).collect()
}

/// A host tree of its own under /tmp, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn new(tag: &str) -> Tree {
        let p = std::env::temp_dir().join(format!("fh-doctor-ntp-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join("proc/net")).unwrap();
        Tree(p)
    }
    fn write(&self, path: &str, text: &str) {
        let f = self.0.join(path);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }
    fn facts(&self, port: Option<u16>) -> Facts {
        // No interface is named and the tree has no /sys/class/net: the NIC is never asked.
        let scope = Scope {
            port,
            ..Default::default()
        };
        doctor::gather(&HostFs::new(&self.0), &LiveNic::new(), &scope)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const UDP_HEAD: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n";

/// A /proc/net/udp line: 0.0.0.0:`port`, socket `inode`.
fn udp_line(port: u16, inode: u64) -> String {
    format!("  1: 00000000:{port:04X} 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 {inode} 2 0000000000000000 0\n")
}

/// A process `pid` called `comm` holding socket `inode` as fd 3.
fn process(t: &Tree, pid: u32, comm: &str, inode: u64) {
    t.write(&format!("proc/{pid}/comm"), &format!("{comm}\n"));
    t.write(
        &format!("proc/{pid}/cmdline"),
        &format!("/usr/sbin/{comm}\0-d\0"),
    );
    std::fs::create_dir_all(t.0.join(format!("proc/{pid}/fd"))).unwrap();
    std::os::unix::fs::symlink(
        format!("socket:[{inode}]"),
        t.0.join(format!("proc/{pid}/fd/3")),
    )
    .unwrap();
}

#[test]
fn another_ntp_server_on_port_123_is_named() {
    let t = Tree::new("chronyd");
    t.write(
        "proc/net/udp",
        &format!("{UDP_HEAD}{}{}", udp_line(123, 7001), udp_line(9000, 7002)),
    );
    process(&t, 4242, "chronyd", 7001);
    process(&t, 4343, "firehose", 7002);
    let rows = doctor::audit(&t.facts(Some(9000)), &["ntp-port".into()]);
    let r = rows_of(&rows, "ntp-port");
    assert_eq!(r.len(), 2, "{rows:#?}");
    assert_eq!(
        (r[0].subject.as_str(), r[0].status),
        ("port 123", Status::Warn)
    );
    assert!(r[0].value.contains("chronyd -d pid 4242"), "{}", r[0].value);
    assert!(r[0].fix.as_ref().unwrap().contains("stop chronyd"));
    // firehose on --port is no other server.
    assert_eq!(
        (r[1].subject.as_str(), r[1].status),
        ("port 9000", Status::Ok)
    );
    assert!(
        r[1].value.contains("firehose -d pid 4343"),
        "{}",
        r[1].value
    );
}

#[test]
fn a_free_port_is_ok_and_no_udp_table_is_na() {
    let t = Tree::new("free");
    t.write("proc/net/udp", &format!("{UDP_HEAD}{}", udp_line(9000, 1)));
    let rows = doctor::audit(&t.facts(None), &["ntp-port".into(), "ntp-clock".into()]);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0].status,
        Status::NotApplicable,
        "a fake tree's clock is not read"
    );
    assert_eq!(rows[1].status, Status::Ok);
    assert_eq!(rows[1].value, "no UDP socket bound to port 123");
    let bare = Tree::new("bare");
    let rows = doctor::audit(&bare.facts(None), &["ntp-port".into()]);
    assert_eq!(rows[0].status, Status::NotApplicable, "{rows:#?}");
}

#[test]
fn the_clock_row_says_what_adjtimex_says() {
    let t = Tree::new("clock");
    let mut facts = t.facts(None);
    let clock = |state, status| KernelClock {
        state,
        status,
        maxerror_us: 1500,
        esterror_us: 20,
        tai: 37,
    };
    facts.clock = Some(Ok(clock(0, 0)));
    let r = &doctor::audit(&facts, &["ntp-clock".into()])[0];
    assert_eq!(r.status, Status::Ok);
    assert_eq!(
        r.value,
        "synchronised (TIME_OK), maxerror 1500 us, esterror 20 us"
    );
    facts.clock = Some(Ok(clock(1, STA_INS)));
    let r = &doctor::audit(&facts, &["ntp-clock".into()])[0];
    assert!(
        r.value.ends_with("leap second to insert at midnight UTC"),
        "{}",
        r.value
    );
    facts.clock = Some(Ok(clock(TIME_ERROR, STA_UNSYNC)));
    let r = &doctor::audit(&facts, &["ntp-clock".into()])[0];
    assert_eq!(r.status, Status::Warn);
    assert!(
        r.value.starts_with("NOT synchronised (TIME_ERROR)"),
        "{}",
        r.value
    );
    assert!(r.fix.as_ref().unwrap().contains("--ntp-local-stratum"));
    // A warning, not a failure: a host that serves no NTP may leave its clock alone.
    assert_eq!(
        doctor::exit_code(&doctor::audit(&facts, &["ntp-clock".into()])),
        0
    );
}

#[test]
fn the_live_host_reports_its_own_clock_and_socket() {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    let facts = doctor::gather(
        &HostFs::live(),
        &LiveNic::new(),
        &Scope {
            port: Some(port),
            ..Default::default()
        },
    );
    let rows = doctor::audit(&facts, &["ntp-clock".into(), "ntp-port".into()]);
    let synced = KernelClock::read().unwrap().synchronised();
    assert_eq!(
        rows[0].status,
        if synced { Status::Ok } else { Status::Warn },
        "{:?}",
        rows[0]
    );
    let mine = rows
        .iter()
        .find(|r| r.subject == format!("port {port}"))
        .expect("a row for --port");
    assert_eq!(mine.status, Status::Ok);
    assert!(
        mine.value.contains(&format!("pid {}", std::process::id())),
        "our own socket's holder: {}",
        mine.value
    );
}
