//! [`CpuSet`]: a set of CPU numbers, read and written in the two forms the kernel uses.
//!
//! - The list form, `0-3,8,10-11`, as sysfs prints `online`, `possible`, `isolated`,
//!   `local_cpulist`, /proc/irq/N/`effective_affinity_list`, and /proc/PID/status
//!   `Cpus_allowed_list`; as `taskset -c` and the command line take CPUs.
//! - The hex mask form, `ff,00000001` (32-bit groups, most significant first), as
//!   `smp_affinity`, `rps_cpus` and `xps_cpus` read and write.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// The largest CPU number accepted; it bounds the memory a range such as `0-999999999`
/// could ask for, and is far above any kernel's NR_CPUS.
pub const MAX_CPU: usize = 65535;

const LIST_SYNTAX: &str = "expected CPU numbers and ranges such as 0-3,6";
const MASK_SYNTAX: &str = "expected hex groups of up to 32 bits such as ff or 1,00000000";

/// A set of CPU numbers, ascending. Serialized as an array of numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct CpuSet(BTreeSet<usize>);

/// Why a CPU list or mask cannot be read; one line naming the bad part and the syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSetError {
    /// The whole text given.
    pub text: String,
    /// What is wrong with which part of it.
    pub problem: String,
    mask: bool,
}

impl fmt::Display for CpuSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, syntax) = if self.mask {
            ("CPU mask", MASK_SYNTAX)
        } else {
            ("CPU list", LIST_SYNTAX)
        };
        write!(
            f,
            "{what} '{}': {} ({syntax})",
            one_line(&self.text),
            one_line(&self.problem)
        )
    }
}

impl std::error::Error for CpuSetError {}

/// Control characters escaped, so a stray newline in the input cannot split a message.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        CpuSet(BTreeSet::new())
    }

    /// Reads the list form, `0-3,6`; surrounding whitespace and a trailing newline (as
    /// sysfs prints it) are ignored, and an empty text is the empty set.
    pub fn parse_list(text: &str) -> Result<Self, CpuSetError> {
        let err = |problem: String| CpuSetError {
            text: text.trim().to_string(),
            problem,
            mask: false,
        };
        let num = |x: &str| -> Result<usize, CpuSetError> {
            let x = x.trim();
            let n: usize = x
                .parse()
                .map_err(|_| err(format!("'{x}' is not a CPU number")))?;
            if n > MAX_CPU {
                return Err(err(format!(
                    "CPU {n} is above the largest supported, {MAX_CPU}"
                )));
            }
            Ok(n)
        };
        let mut set = BTreeSet::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(err(format!("range '{part}' runs backwards")));
                    }
                    set.extend(a..=b);
                }
                None => {
                    set.insert(num(part)?);
                }
            }
        }
        Ok(CpuSet(set))
    }

    /// Reads the hex mask form, `ff,00000001` (the last group holds CPUs 0-31); a
    /// trailing newline is ignored and an empty text is the empty set.
    pub fn from_mask_hex(text: &str) -> Result<Self, CpuSetError> {
        let t = text.trim();
        let err = |problem: String| CpuSetError {
            text: t.to_string(),
            problem,
            mask: true,
        };
        let mut set = BTreeSet::new();
        if t.is_empty() {
            return Ok(CpuSet(set));
        }
        for (i, g) in t.rsplit(',').enumerate() {
            let g = g.trim();
            let v = u32::from_str_radix(g, 16)
                .ok()
                .filter(|_| !g.starts_with('+'))
                .ok_or_else(|| err(format!("group '{g}' is not 1 to 8 hex digits")))?;
            for bit in (0..32).filter(|b| v & (1 << b) != 0) {
                let cpu = i * 32 + bit;
                if cpu > MAX_CPU {
                    return Err(err(format!(
                        "CPU {cpu} is above the largest supported, {MAX_CPU}"
                    )));
                }
                set.insert(cpu);
            }
        }
        Ok(CpuSet(set))
    }

    /// The hex mask form as the kernel prints it: the top group without leading zeros,
    /// the others eight digits (`1,00000003`); `0` for the empty set.
    pub fn to_mask_hex(&self) -> String {
        let words = self.0.last().map_or(1, |top| top / 32 + 1);
        let mut w = vec![0u32; words];
        for &c in &self.0 {
            w[c / 32] |= 1 << (c % 32);
        }
        let mut groups: Vec<String> = w.iter().rev().map(|x| format!("{x:08x}")).collect();
        groups[0] = format!("{:x}", w[words - 1]);
        groups.join(",")
    }

    /// Adds a CPU; false if it was already there.
    pub fn insert(&mut self, cpu: usize) -> bool {
        self.0.insert(cpu)
    }

    /// The CPUs in ascending order.
    pub fn to_vec(&self) -> Vec<usize> {
        self.0.iter().copied().collect()
    }
}

/// The compact list form, runs collapsed: `0-3,8,10-11`; empty for the empty set.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut it = self.0.iter().copied().peekable();
        let mut first = true;
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end += 1;
                it.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for CpuSet {
    type Err = CpuSetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuSet::parse_list(s)
    }
}

/// Read access to the set (`len`, `contains`, `iter`, `intersection`, ...).
impl std::ops::Deref for CpuSet {
    type Target = BTreeSet<usize>;
    fn deref(&self) -> &BTreeSet<usize> {
        &self.0
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

impl<'a> FromIterator<&'a usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = &'a usize>>(iter: I) -> Self {
        CpuSet(iter.into_iter().copied().collect())
    }
}

impl Extend<usize> for CpuSet {
    fn extend<I: IntoIterator<Item = usize>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl IntoIterator for CpuSet {
    type Item = usize;
    type IntoIter = std::collections::btree_set::IntoIter<usize>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a CpuSet {
    type Item = &'a usize;
    type IntoIter = std::collections::btree_set::Iter<'a, usize>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl From<&[usize]> for CpuSet {
    fn from(cpus: &[usize]) -> Self {
        cpus.iter().collect()
    }
}

impl From<&Vec<usize>> for CpuSet {
    fn from(cpus: &Vec<usize>) -> Self {
        cpus.iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn reads_lists_as_sysfs_and_procfs_print_them() {
        // /sys/devices/system/cpu/online and possible on a 2-CPU and a 64-CPU host.
        assert_eq!(list("0-1\n").to_vec(), [0, 1]);
        assert_eq!(list("0-63\n").len(), 64);
        // isolated with nothing isolated: an empty line.
        assert!(list("\n").is_empty());
        assert!(list("").is_empty());
        // isolated= with a gap, and a NUMA node's cpulist.
        assert_eq!(list("2-3,6-7\n").to_vec(), [2, 3, 6, 7]);
        assert_eq!(list("0-15,32-47\n").len(), 32);
        // /proc/self/status
        let status = "Cpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed:\t1\n";
        let v = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap();
        assert_eq!(list(v).to_vec(), [0, 1]);
        // /proc/irq/N/effective_affinity_list
        assert_eq!(list("5\n").to_vec(), [5]);
        // Written by hand: spaces after commas, one-CPU ranges.
        assert_eq!(list(" 0-2, 5 ,7-7").to_vec(), [0, 1, 2, 5, 7]);
    }

    #[test]
    fn writes_the_compact_list_form() {
        assert_eq!(list("0-3,8,10-11\n").to_string(), "0-3,8,10-11");
        assert_eq!(list("5,1,2,3,0").to_string(), "0-3,5");
        assert_eq!(list("3").to_string(), "3");
        assert_eq!(CpuSet::new().to_string(), "");
        let s: CpuSet = [7usize, 8, 1].into_iter().collect();
        assert_eq!(s.to_string(), "1,7-8");
        assert_eq!(
            CpuSet::from(&[0usize, 1, 2, 5, 7, 8][..]).to_string(),
            "0-2,5,7-8"
        );
        for text in ["0-63", "0,2,4", "1-2,4-5,9", ""] {
            assert_eq!(list(text).to_string(), text);
        }
    }

    #[test]
    fn bad_lists_name_the_part_and_the_syntax() {
        let e = CpuSet::parse_list("0-x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "CPU list '0-x': 'x' is not a CPU number (expected CPU numbers and ranges such as 0-3,6)"
        );
        let e = CpuSet::parse_list("2-1").unwrap_err().to_string();
        assert!(e.contains("range '2-1' runs backwards"), "{e}");
        let e = "0-99999999".parse::<CpuSet>().unwrap_err().to_string();
        assert!(e.contains("CPU 99999999 is above"), "{e}");
        assert!(CpuSet::parse_list("-1").is_err());
        assert!(CpuSet::parse_list("0-").is_err());
        assert!(CpuSet::parse_list("a,b").is_err());
        assert!(!CpuSet::parse_list("1\n2")
            .unwrap_err()
            .to_string()
            .contains('\n'));
    }

    #[test]
    fn reads_and_writes_hex_masks() {
        // smp_affinity on a 2-CPU and on a 128-CPU host.
        assert_eq!(CpuSet::from_mask_hex("3\n").unwrap().to_vec(), [0, 1]);
        let big = "00000000,00000000,00000000,00000003\n";
        assert_eq!(CpuSet::from_mask_hex(big).unwrap().to_vec(), [0, 1]);
        // rps_cpus off.
        assert!(CpuSet::from_mask_hex("0\n").unwrap().is_empty());
        assert!(CpuSet::from_mask_hex("00000000,00000000\n")
            .unwrap()
            .is_empty());
        assert!(CpuSet::from_mask_hex("").unwrap().is_empty());
        let s = CpuSet::from_mask_hex("00000001,00000003\n").unwrap();
        assert_eq!(s.to_vec(), [0, 1, 32]);
        assert_eq!(s.to_mask_hex(), "1,00000003");
        assert_eq!(CpuSet::from_mask_hex("10040").unwrap(), list("6,16"));
        assert_eq!(CpuSet::new().to_mask_hex(), "0");
        assert_eq!(list("0,19").to_mask_hex(), "80001");
        assert_eq!(list("33").to_mask_hex(), "2,00000000");
        assert_eq!(list("4,16").to_mask_hex(), "10010");
        for text in ["1", "3", "ffffffff", "2,00000000", "80000000,00000001"] {
            assert_eq!(CpuSet::from_mask_hex(text).unwrap().to_mask_hex(), text);
        }
    }

    #[test]
    fn bad_masks_name_the_group_and_the_syntax() {
        let e = CpuSet::from_mask_hex("zz").unwrap_err();
        assert_eq!(
            e.to_string(),
            "CPU mask 'zz': group 'zz' is not 1 to 8 hex digits \
             (expected hex groups of up to 32 bits such as ff or 1,00000000)"
        );
        assert!(
            CpuSet::from_mask_hex("123456789").is_err(),
            "a group over 32 bits"
        );
        assert!(CpuSet::from_mask_hex("1,,0").is_err());
        assert!(CpuSet::from_mask_hex("+1").is_err());
    }

    #[test]
    fn serializes_as_an_array() {
        let s = list("0-2,9");
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(j, "[0,1,2,9]");
        assert_eq!(serde_json::from_str::<CpuSet>(&j).unwrap(), s);
    }
}
