//! Reading what scenarios print: `result key=value ...` lines from
//! sky-work, `stats total: key=value ...` lines from scx_sky, and
//! `check key=value` lines from the scenario scripts.

use anyhow::{Context, Result};
use std::collections::BTreeMap;

pub type Fields = BTreeMap<String, String>;

/// Parses the `key=value` words after `prefix` on every line that has it.
pub fn lines_with(output: &str, prefix: &str) -> Vec<Fields> {
    output
        .lines()
        .filter_map(|line| line.split_once(prefix).map(|(_, rest)| rest))
        .map(fields)
        .collect()
}

/// The `key=value` words of one line (other words are skipped).
pub fn fields(text: &str) -> Fields {
    text.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The only line with `prefix`; an error naming the prefix otherwise.
pub fn one_line(output: &str, prefix: &str) -> Result<Fields> {
    let mut all = lines_with(output, prefix);
    anyhow::ensure!(
        all.len() == 1,
        "expected one {prefix:?} line, found {}",
        all.len()
    );
    Ok(all.pop().unwrap())
}

/// A numeric field; percentages like `93.5%` are returned as 93.5.
pub fn number(fields: &Fields, key: &str) -> Result<f64> {
    let raw = fields
        .get(key)
        .with_context(|| format!("no {key}= field in {fields:?}"))?;
    raw.trim_end_matches('%')
        .parse()
        .with_context(|| format!("{key}={raw} is not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_parsed_from_noisy_console_lines() {
        let out = "boot noise\n[  1.0] 12:00:01 [INFO] stats total: last_cpu_share=93.5% dispatches=10\nresult workload=burn threads=2\n";
        let stats = one_line(out, "stats total:").unwrap();
        assert_eq!(number(&stats, "last_cpu_share").unwrap(), 93.5);
        assert_eq!(number(&stats, "dispatches").unwrap(), 10.0);
        assert!(number(&stats, "missing").is_err());
        assert_eq!(lines_with(out, "result ")[0]["workload"], "burn");
        assert!(one_line(out, "nothing:").is_err());
    }
}
