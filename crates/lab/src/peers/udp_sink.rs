//! udp_sink, the Red Hat article's own UDP receiver (netoptimizer/network-testing, not
//! packaged): its command line and the reading of its result lines.

/// How to get udp_sink when it is not on PATH.
pub const HINT: &str = "udp_sink is not packaged: build it from \
     github.com/netoptimizer/network-testing (`make` in src/) and put it on PATH; firehose \
     sink --io recvmsg is the baseline meanwhile";

/// udp_sink `--recvmsg` on `port`: many short rounds of 20,000 datagrams, line-buffered so
/// that the rounds finished are in its output when it is stopped.
pub fn argv(port: u16) -> Vec<String> {
    [
        "stdbuf",
        "-oL",
        "udp_sink",
        "--recvmsg",
        "-l",
        &port.to_string(),
        "-c",
        "20000",
        "-r",
        "100000",
    ]
    .map(String::from)
    .to_vec()
}

/// The packets per second of each of udp_sink's result lines. Its columns changed between
/// versions (`recvmsg   \trun:  0\t 1000000\t1064.36\t939531.73\t...`), so the rate is
/// found as the number that follows the nanoseconds per packet: the pair whose product is 1e9.
pub fn rates(output: &str) -> Vec<f64> {
    output
        .lines()
        .filter(|l| l.contains("run:"))
        .filter_map(|l| {
            let (_, after) = l.split_once("run:")?;
            let nums: Vec<f64> = after
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            nums.windows(2)
                .find(|w| w[0] > 0.0 && (w[0] * w[1] / 1e9 - 1.0).abs() < 0.02)
                .map(|w| w[1])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_sink_result_lines_of_both_layouts() {
        // Newer layout (captured from udp_sink built from network-testing's src/): name,
        // run, count, ns/pkt, pps, cycles, payload, demux.
        let new = "          \trun      count   \tns/pkt\tpps\t\tcycles\tpayload\n\
                   recvmsg   \trun:  0\t   20000\t7994.64\t125083.87\t20754\t18\t demux:1\n\
                   recvmsg   \trun:  1\t   20000\t10149.47\t98527.28\t26349\t18\t demux:1\n";
        assert_eq!(rates(new), [125083.87, 98527.28]);
        // Older layout: name, run, ns/pkt, pps, cycles, tsc interval; two rounds.
        let old = "recvmsg   \trun:  0\t1250.00\t800000.00\t3000\t3000000000\n\
                   recvmsg   \trun:  1\t1000.00\t1000000.00\t2400\t2400000000\n";
        assert_eq!(rates(old), [800000.0, 1000000.0]);
        assert!(rates(" - Waiting on first packet\n").is_empty());
        assert!(rates("recvmsg run: 0 12 34 56\n").is_empty());
    }
}
