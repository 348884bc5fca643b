//! The kernel-description parsers on samples captured from a 2-CPU VM (kernel 6.18): the
//! skb:kfree_skb and XDP tracepoint formats, /proc/kallsyms, and (where readable) the live
//! BTF of the running kernel.

use firehose_host::kernel::{btf::Btf, kallsyms, tracepoint};

fn sample(name: &str) -> String {
    let path = format!("{}/tests/samples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn kfree_skb_format_gives_offsets_and_every_reason_name() {
    let f = tracepoint::parse(&sample("tracefs_kfree_skb_format.txt")).unwrap();
    assert_eq!(f.name, "kfree_skb");
    assert_eq!(f.id, Some(2310));
    let off = |n: &str| {
        let d = f.field(n).unwrap();
        (d.offset, d.size)
    };
    assert_eq!(off("skbaddr"), (8, 8));
    assert_eq!(off("location"), (16, 8));
    assert_eq!(off("rx_sk"), (24, 8));
    assert_eq!(off("protocol"), (32, 2));
    assert_eq!(off("reason"), (36, 4));
    assert_eq!(f.field("reason").unwrap().ty, "enum skb_drop_reason");
    assert_eq!(f.symbol("reason", 2), Some("NOT_SPECIFIED"));
    assert_eq!(f.symbol("reason", 3), Some("NO_SOCKET"));
    assert_eq!(f.symbol("reason", 6), Some("SOCKET_RCVBUFF"));
    assert_eq!(f.symbol("reason", 12), Some("NETFILTER_DROP"));
    assert_eq!(f.symbol("reason", 128), Some("MAX"));
    assert_eq!(f.symbols["reason"].len(), 127);
}

#[test]
fn xdp_formats_name_their_actions() {
    let f = tracepoint::parse(&sample("tracefs_xdp_exception_format.txt")).unwrap();
    assert_eq!(f.field("act").unwrap().offset, 12);
    assert_eq!(f.symbol("act", 0), Some("ABORTED"));
    assert_eq!(f.symbol("act", -1), None);
    let r = tracepoint::parse(&sample("tracefs_xdp_redirect_err_format.txt")).unwrap();
    assert_eq!(
        (
            r.field("err").unwrap().offset,
            r.field("err").unwrap().signed
        ),
        (20, true)
    );
    assert_eq!(r.symbol("act", 4), Some("REDIRECT"));
}

#[test]
fn kallsyms_names_an_address_like_percent_ps() {
    let s = kallsyms::parse(&sample("proc_kallsyms.txt")).unwrap();
    assert!(!s.hidden);
    let l = s.locate(0xffffffff820a64d0 + 0x1a4).unwrap();
    assert_eq!(l.to_string(), "udp_queue_rcv_one_skb+0x1a4");
    let m = s.locate(0xffffffffc0a01240).unwrap();
    assert_eq!(m.to_string(), "nft_do_chain+0x10 [nf_tables]");
    assert_eq!(s.locate(0x1000), None);
}

/// The offsets the drop program needs exist on the running kernel.
#[test]
fn live_btf_has_the_fields_the_drop_program_reads() {
    let Ok(data) = std::fs::read("/sys/kernel/btf/vmlinux") else {
        eprintln!("skipped: /sys/kernel/btf/vmlinux is not readable here");
        return;
    };
    let btf = Btf::parse(&data).unwrap();
    assert!(btf.len() > 10_000);
    for (s, m) in [
        ("sk_buff", "sk"),
        ("sk_buff", "head"),
        ("sk_buff", "network_header"),
        ("sock", "sk_socket"),
        ("socket_alloc", "vfs_inode"),
        ("inode", "i_ino"),
    ] {
        assert!(btf.offset_of(s, m).is_some(), "{s}.{m}");
    }
    assert_eq!(btf.offset_of("sock_common", "skc_num"), Some(14));
    assert_eq!(btf.offset_of("sock", "__sk_common.skc_num"), Some(14));
}
