//! The Prometheus text exposition format (0.0.4), read back: what `firehose serve
//! --metrics` writes, for `firehose top` to show every server it finds. Comments and
//! `# HELP`/`# TYPE` lines are skipped; a line that does not parse is skipped too, so one
//! odd sample never hides the rest.

/// One sample: `name{label="value",...} 123`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// Every sample of an exposition.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(sample).collect()
}

fn sample(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let mut b = body;
        loop {
            b = b.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            if let Some(after) = b.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = b.find('=')?;
            let key = b[..eq].trim().to_string();
            // A label name is [a-zA-Z_][a-zA-Z0-9_]*; anything else is not a sample.
            let mut kc = key.chars();
            if !kc
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                || !kc.all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return None;
            }
            let v = b[eq + 1..].strip_prefix('"')?;
            // The value ends at the first unescaped quote.
            let mut value = String::new();
            let mut chars = v.char_indices();
            let end = loop {
                let (i, c) = chars.next()?;
                match c {
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        c => value.push(c),
                    },
                    '"' => break i,
                    c => value.push(c),
                }
            };
            labels.push((key, value));
            b = &v[end + 1..];
        }
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// The sum of every sample named `name` (all label sets).
pub fn sum(samples: &[Sample], name: &str) -> Option<f64> {
    let mut it = samples.iter().filter(|s| s.name == name).peekable();
    it.peek()?;
    Some(it.map(|s| s.value).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_labels_and_sums() {
        let t = "# HELP firehose_packets_received_total Datagrams.\n# TYPE firehose_packets_received_total counter\nfirehose_packets_received_total{worker=\"0\"} 10\nfirehose_packets_received_total{worker=\"1\",note=\"a \\\"q\\\" b\"} 5\nfirehose_uptime_seconds 3.5\nbad line\n{x=\"1\"} 3\nh_bucket{le=\"+Inf\"} +Inf\n";
        let s = parse(t);
        assert_eq!(s.len(), 4, "{s:?}");
        assert_eq!(s[1].labels[1], ("note".into(), "a \"q\" b".into()));
        assert_eq!(sum(&s, "firehose_packets_received_total"), Some(15.0));
        assert_eq!(sum(&s, "firehose_uptime_seconds"), Some(3.5));
        assert_eq!(sum(&s, "nothing"), None);
        assert!(s[3].value.is_infinite());
        for cut in 0..t.len() {
            let _ = parse(&t[..cut]);
        }
    }
}
