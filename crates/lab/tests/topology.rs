//! The veth test host against the real kernel: it comes up, passes traffic, takes and reads
//! back its knobs, and is gone afterwards; `down` removes leftovers of dead runs only.
//! Needs root (namespaces); skips with a reason otherwise.

use firehose_host::procfs::snmp;
use firehose_lab::cmd::run;
use firehose_lab::topology::{self, Knobs, Topology, VETH_SERVER_ADDR};
use firehose_sys::cpu::CpuSet;
use std::sync::Mutex;

/// Tests here create and delete namespaces; one at a time keeps `down` from seeing another
/// test's half-built topology.
static SERIAL: Mutex<()> = Mutex::new(());

fn root_or_skip(test: &str) -> bool {
    if firehose_sys::cpu::is_root() {
        return true;
    }
    eprintln!("skipping {test}: needs root to create network namespaces");
    false
}

fn namespaces() -> Vec<String> {
    topology::parse_netns_list(&run("ip", &["netns", "list"]).unwrap())
}

fn links() -> Vec<String> {
    topology::parse_link_names(&run("ip", &["-o", "link", "show"]).unwrap())
}

fn server_udp(ns: &str) -> snmp::UdpCounters {
    snmp::parse_udp(&run("ip", &["netns", "exec", ns, "cat", "/proc/net/snmp"]).unwrap()).unwrap()
}

#[test]
fn veth_comes_up_passes_traffic_and_is_gone_after_drop() {
    if !root_or_skip("veth_comes_up_passes_traffic_and_is_gone_after_drop") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let id = topology::run_id(Some(1));
    let (sns, cns) = (topology::server_ns(&id), topology::client_ns(&id));
    {
        let topo = Topology::veth(&id, 2).unwrap();
        let have = namespaces();
        assert!(have.contains(&sns) && have.contains(&cns), "{have:?}");
        // The veth lives only inside the namespaces, never on the host.
        assert!(
            !links().iter().any(|l| l.ends_with(&id)),
            "no host-side veth"
        );

        // Three datagrams from the client namespace reach the server namespace, where no
        // socket listens: they show up as NoPorts there and nowhere else.
        let before = server_udp(&sns);
        for _ in 0..3 {
            let dst = format!("echo fh > /dev/udp/{VETH_SERVER_ADDR}/9");
            run("ip", &["netns", "exec", &cns, "bash", "-c", &dst]).unwrap();
        }
        let after = server_udp(&sns);
        assert_eq!(after.no_ports - before.no_ports, 3);
        assert_eq!(topo.queues(), 2);
    }
    let have = namespaces();
    assert!(
        !have.contains(&sns) && !have.contains(&cns),
        "left behind: {have:?}"
    );
}

#[test]
fn knobs_are_set_and_read_back() {
    if !root_or_skip("knobs_are_set_and_read_back") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let id = topology::run_id(Some(2));
    let mut topo = Topology::veth(&id, 2).unwrap();
    let on = Knobs {
        gro: Some(true),
        rps: Some(true),
        xps: Some(true),
        rp_filter: Some(0),
    };
    let s = topo.set_knobs(&on, &[0], &[1]).unwrap().unwrap();
    assert!(s.server_gro && s.client_gro);
    assert_eq!(s.server_rps_cpus.len(), 2);
    for m in &s.server_rps_cpus {
        assert_eq!(CpuSet::from_mask_hex(m).unwrap().to_vec(), vec![0], "{m}");
    }
    assert_eq!(
        CpuSet::from_mask_hex(&s.server_xps_cpus[0])
            .unwrap()
            .to_vec(),
        vec![0]
    );
    assert_eq!(
        CpuSet::from_mask_hex(&s.server_xps_cpus[1])
            .unwrap()
            .to_vec(),
        Vec::<usize>::new()
    );
    assert_eq!(
        CpuSet::from_mask_hex(&s.client_xps_cpus[0])
            .unwrap()
            .to_vec(),
        vec![1]
    );
    assert_eq!(s.server_rp_filter, 0);

    let off = Knobs {
        gro: Some(false),
        rps: Some(false),
        xps: Some(false),
        rp_filter: Some(1),
    };
    let s = topo.set_knobs(&off, &[0], &[1]).unwrap().unwrap();
    assert!(!s.server_gro && !s.client_gro);
    assert!(s
        .server_rps_cpus
        .iter()
        .all(|m| CpuSet::from_mask_hex(m).unwrap().is_empty()));
    assert!(s
        .server_xps_cpus
        .iter()
        .all(|m| CpuSet::from_mask_hex(m).unwrap().is_empty()));
    assert_eq!(s.server_rp_filter, 1);
    // Reading again without setting gives the same state.
    assert_eq!(topo.read_knobs().unwrap(), s);
    topo.teardown().unwrap();
    assert!(!namespaces().contains(&topology::server_ns(&id)));
}

#[test]
fn loopback_refuses_knobs() {
    let topo = Topology::loopback();
    let e = topo
        .set_knobs(
            &Knobs {
                gro: Some(false),
                ..Default::default()
            },
            &[0],
            &[1],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("--topology veth"), "{e}");
    assert!(topo
        .set_knobs(&Knobs::default(), &[0], &[1])
        .unwrap()
        .is_none());
}

#[test]
fn down_removes_leftovers_of_dead_runs_only() {
    if !root_or_skip("down_removes_leftovers_of_dead_runs_only") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A pid that surely belongs to no live process: a child that has been reaped.
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let dead_ns = format!("fh-srv-{dead}");
    let dead_link = format!("fhv0-{dead}");
    run("ip", &["netns", "add", &dead_ns]).unwrap();
    run(
        "ip",
        &[
            "link",
            "add",
            &dead_link,
            "type",
            "veth",
            "peer",
            "name",
            &format!("fhv1-{dead}"),
        ],
    )
    .unwrap();
    // A namespace of a live run (ours) must survive.
    let live = Topology::veth(&topology::run_id(Some(3)), 1).unwrap();
    // A process inside the leftover namespace is killed with it.
    let mut sleeper = std::process::Command::new("ip")
        .args(["netns", "exec", &dead_ns, "sleep", "60"])
        .spawn()
        .unwrap();

    let removed = topology::down(false).unwrap();
    assert!(removed.contains(&format!("netns {dead_ns}")), "{removed:?}");
    // Deleting either end of the pair deletes both; which one is listed first varies.
    assert!(
        removed
            .iter()
            .any(|r| r == &format!("link {dead_link}") || r == &format!("link fhv1-{dead}")),
        "{removed:?}"
    );
    assert!(!namespaces().contains(&dead_ns));
    assert!(!links()
        .iter()
        .any(|l| l == &dead_link || l == &format!("fhv1-{dead}")));
    for ns in live.namespaces() {
        assert!(namespaces().contains(ns), "live run's {ns} was removed");
    }
    let st = sleeper.wait().unwrap();
    assert!(
        !st.success(),
        "the process in the leftover namespace was killed"
    );
}
