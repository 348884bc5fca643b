//! The zone `lab zone-load` generates, loaded by firehose's fast zone reader and by
//! NLnet Labs' scanner alone: the same zone, record for record and byte for byte. (The
//! test zones are compared in crates/proto, `the_fast_path_reads_as_domain_does`.)

use firehose_lab::studies::zone_load::generate_zone;
use firehose_proto::dns::zone::{parse_zone, parse_zone_with_domain, read_fast};

#[test]
fn the_generated_zone_loads_the_same_both_ways() {
    // 4 MB: every kind of entry the generator writes, many times over (the 52 MB zone
    // is compared by `dns_zone_load_bench --compare`).
    let (text, records) = generate_zone(4 << 20);
    assert!(read_fast(text.as_bytes()), "the fast reader reads it");
    let fast = parse_zone(text.as_bytes(), "big.zone").expect("the generated zone loads");
    let slow = parse_zone_with_domain(text.as_bytes(), "big.zone").expect("domain loads it");
    assert_eq!(fast.records.len(), records);
    assert_eq!(fast.apex, b"\x03big\x07example\x00");
    assert!(fast == slow, "the fast reader's zone differs from domain's");
}
