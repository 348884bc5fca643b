//! Small parsers for the formats of /sys and /proc that the doctor reads: /proc/interrupts,
//! /proc/modules, the kernel command line, sysctl vectors. Pure functions over text. CPU
//! lists and masks are read by `firehose_sys::cpu::CpuSet`.

use firehose_sys::cpu::CpuSet;

/// One line of /proc/interrupts for a numbered IRQ.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IrqLine {
    pub irq: u32,
    /// Count per CPU column.
    pub counts: Vec<u64>,
    /// The action name, the last column (e.g. `virtio2-input.0`, `eth0-TxRx-3`).
    pub name: String,
}

/// Parses the numbered IRQ lines of /proc/interrupts (NMI, LOC, ... are skipped).
pub fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| h.split_whitespace().count())
        .unwrap_or(0);
    let mut out = Vec::new();
    for line in lines {
        let Some((irq, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(irq) = irq.trim().parse() else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = fields
            .iter()
            .take(ncpu)
            .map_while(|f| f.parse().ok())
            .collect();
        let name = fields.last().copied().unwrap_or("").to_string();
        out.push(IrqLine { irq, counts, name });
    }
    out
}

/// Names of loaded modules from /proc/modules.
pub fn parse_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The value of `key=` on a kernel command line (`isolcpus=2-3`), or None.
pub fn cmdline_value<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The effective uid from /proc/self/status (`Uid: real effective saved fs`).
pub fn effective_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A whitespace-separated vector of numbers, as udp_mem (`min pressure max`).
pub fn parse_numbers(text: &str) -> Option<Vec<u64>> {
    text.split_whitespace().map(|w| w.parse().ok()).collect()
}

/// Lines of an audit rules file that are rules (not comments, not control lines like -D/-b).
pub fn audit_rule_count(text: &str) -> usize {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("-a") || l.starts_with("-w") || l.starts_with("-A"))
        .count()
}

/// The arguments given to irqbalance by a config file (`IRQBALANCE_ARGS=`, `OPTIONS=`) and
/// the CPUs it is told to leave alone (`IRQBALANCE_BANNED_CPUS=` mask or `..._CPULIST=`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct IrqbalanceConfig {
    pub args: String,
    pub banned_cpus: CpuSet,
}

/// Parses /etc/default/irqbalance or /etc/sysconfig/irqbalance (shell variable syntax).
pub fn parse_irqbalance_config(text: &str) -> IrqbalanceConfig {
    let mut cfg = IrqbalanceConfig::default();
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"').trim_matches('\'');
        match key.trim() {
            "IRQBALANCE_ARGS" | "OPTIONS" | "IRQBALANCE_OPTS" => {
                cfg.args = value.to_string();
            }
            "IRQBALANCE_BANNED_CPUS" => {
                cfg.banned_cpus
                    .extend(CpuSet::from_mask_hex(value).unwrap_or_default());
            }
            "IRQBALANCE_BANNED_CPULIST" => {
                cfg.banned_cpus
                    .extend(CpuSet::parse_list(value).unwrap_or_default());
            }
            _ => {}
        }
    }
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupts() {
        let text = "           CPU0       CPU1\n 38:          0       4132 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\nNMI:          0          0   Non-maskable interrupts\n 39:       3004          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\nERR:          0\n";
        let v = parse_interrupts(text);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].irq, 38);
        assert_eq!(v[0].counts, [0, 4132]);
        assert_eq!(v[0].name, "virtio2-input.0");
        assert_eq!(v[1].name, "virtio2-output.0");
    }

    #[test]
    fn small_formats() {
        assert_eq!(
            cmdline_value("ro isolcpus=2-3 nohz_full=2-3 -- isolcpus=9", "isolcpus"),
            Some("2-3")
        );
        assert_eq!(cmdline_value("ro quiet", "isolcpus"), None);
        assert_eq!(effective_uid("Name:\tx\nUid:\t1000\t0\t0\t0\n"), Some(0));
        assert_eq!(parse_numbers("1\t2\t3\n"), Some(vec![1, 2, 3]));
        assert_eq!(
            audit_rule_count("## c\n-D\n-b 8192\n-a always,exit -S all\n-w /etc -p wa\n"),
            2
        );
        let c = parse_irqbalance_config(
            "# x\nIRQBALANCE_ARGS=\"-h exact\"\nIRQBALANCE_BANNED_CPUS=0000000c\n",
        );
        assert_eq!(c.args, "-h exact");
        assert_eq!(c.banned_cpus.to_string(), "2-3");
        assert_eq!(
            parse_modules("nf_conntrack 1 2 - Live 0x0\nip_tables 3 0 - Live 0x0\n"),
            ["nf_conntrack", "ip_tables"]
        );
    }
}
