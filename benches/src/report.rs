//! The report: result tables, as aligned text for the terminal and as Markdown for
//! `docs/benchmarks.md`; the charts ([`svg`]); the targets and how each is judged ([`targets`]);
//! the line protocol a workload run in a child process reports through ([`wire`]).

pub mod svg;
pub mod targets;
pub mod wire;

use std::fmt::Write as _;
use std::time::Duration;

/// One table of results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Heading above the table.
    pub title: String,
    /// Column names.
    pub header: Vec<String>,
    /// Cells, one `Vec` per row, as many as `header`.
    pub rows: Vec<Vec<String>>,
    /// Lines printed under the table (what was not run and why, parameters, caveats).
    pub notes: Vec<String>,
}

impl Table {
    /// An empty table with these column names.
    pub fn new(title: impl Into<String>, header: &[&str]) -> Self {
        Table {
            title: title.into(),
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len(), "row width");
        self.rows.push(cells);
    }

    /// Appends a note.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Aligned plain text: first column left-aligned, the others right-aligned.
    pub fn to_text(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r[c].chars().count())
                    .chain([self.header[c].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (c, cell) in cells.iter().enumerate() {
                let pad = widths[c] - cell.chars().count();
                if c == 0 {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str("  ");
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
            s.trim_end().to_owned()
        };
        let mut out = format!("{}\n", self.title);
        out.push_str(&line(&self.header));
        out.push('\n');
        out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        for n in &self.notes {
            let _ = writeln!(out, "  * {n}");
        }
        out
    }

    /// A Markdown table under a `###` heading, notes as a list.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("### {}\n\n", self.title);
        let _ = writeln!(out, "| {} |", self.header.join(" | "));
        let align: Vec<&str> = (0..self.header.len())
            .map(|c| if c == 0 { "---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "|{}|", align.join("|"));
        for r in &self.rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for n in &self.notes {
                let _ = writeln!(out, "- {n}");
            }
        }
        out
    }
}

/// Nanoseconds with a sensible number of digits.
pub fn ns(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// A ratio `baseline / ours`, e.g. `3.42x`.
pub fn ratio(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}x")
    } else {
        format!("{x:.2}x")
    }
}

/// Bytes as MiB with one decimal.
pub fn mib(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// A duration in seconds with one decimal, e.g. `2.0 s`.
pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// A count as `10k`, `1M`, `2.5M`.
pub fn count(n: usize) -> String {
    if n >= 1_000_000 && n.is_multiple_of(100_000) {
        let m = n as f64 / 1e6;
        if n.is_multiple_of(1_000_000) {
            format!("{m:.0}M")
        } else {
            format!("{m:.1}M")
        }
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(10_000), "10k");
        assert_eq!(count(1_000_000), "1M");
        assert_eq!(count(2_500_000), "2.5M");
        assert_eq!(count(1234), "1234");
        assert_eq!(ratio(3.456), "3.46x");
        assert_eq!(ns(12.34), "12.3");
        assert_eq!(mib(3 * 1024 * 1024), "3.0");
    }

    #[test]
    fn text_and_markdown() {
        let mut t = Table::new("T", &["impl", "ns"]);
        t.row(vec!["a".into(), "1.0".into()]);
        t.note("n");
        assert_eq!(t.to_text(), "T\nimpl   ns\n---------\na     1.0\n  * n\n");
        assert!(t.to_markdown().contains("| a | 1.0 |"));
    }
}
