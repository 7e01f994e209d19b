//! A line protocol for a workload measured in a child process: the child writes its progress,
//! tables and target checks to stdout in it, and `wheelbench` turns them back into an
//! [`Outcome`]'s tables and checks (W11: `benches/futures`, built without tokio's `test-util`).
//!
//! One record per line, fields separated by tabs; the first field says what the line is:
//!
//! | line | meaning |
//! |------|---------|
//! | `P\t<message>` | a progress line (one measurement begins) |
//! | `T\t<title>` | a new table |
//! | `H\t<column>\t<column>...` | the current table's column names |
//! | `R\t<cell>\t<cell>...` | a row of the current table, as many cells as columns |
//! | `N\t<note>` | a note under the current table |
//! | `C\t<key>\t<measured>\t<yes\|no\|none>` | a target check: its key in [`targets`], the figure, whether met (`none`: this run cannot tell) |
//!
//! In a field, `\` is written `\\`, a tab `\t` and a newline `\n`, so any text goes through.
//! Any other line is an error: a child that prints something else is not speaking the protocol.

use super::Table;
use super::targets;
use crate::scenario::{Check, Outcome};

fn escape(field: &str) -> String {
    let mut s = String::with_capacity(field.len());
    for c in field.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\t' => s.push_str("\\t"),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn unescape(field: &str) -> Result<String, String> {
    let mut s = String::with_capacity(field.len());
    let mut it = field.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            s.push(c);
            continue;
        }
        match it.next() {
            Some('\\') => s.push('\\'),
            Some('t') => s.push('\t'),
            Some('n') => s.push('\n'),
            other => return Err(format!("bad escape \\{}", other.unwrap_or(' '))),
        }
    }
    Ok(s)
}

fn line(kind: &str, fields: &[&str]) -> String {
    let mut s = kind.to_owned();
    for f in fields {
        s.push('\t');
        s.push_str(&escape(f));
    }
    s.push('\n');
    s
}

/// A progress line.
pub fn progress(message: &str) -> String {
    line("P", &[message])
}

/// A table: its title, header, rows and notes, one line each.
pub fn table(t: &Table) -> String {
    let mut s = line("T", &[&t.title]);
    let header: Vec<&str> = t.header.iter().map(String::as_str).collect();
    s.push_str(&line("H", &header));
    for r in &t.rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        s.push_str(&line("R", &cells));
    }
    for n in &t.notes {
        s.push_str(&line("N", &[n]));
    }
    s
}

/// A target check: `key` as [`targets`] declares it, what was `measured`, whether it is `met`.
pub fn check(key: &str, measured: &str, met: Option<bool>) -> String {
    let met = match met {
        Some(true) => "yes",
        Some(false) => "no",
        None => "none",
    };
    line("C", &[key, measured, met])
}

/// Reads the protocol a line at a time, so progress can be shown while the child runs.
#[derive(Debug, Default)]
pub struct Reader {
    outcome: Outcome,
}

impl Reader {
    /// A reader with nothing read yet.
    pub fn new() -> Self {
        Reader::default()
    }

    /// Takes one line (with or without its newline); returns the message of a progress line.
    pub fn line(&mut self, line: &str) -> Result<Option<String>, String> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let mut parts = line.split('\t');
        let kind = parts.next().unwrap_or("");
        let fields: Vec<String> = parts.map(unescape).collect::<Result<_, _>>()?;
        let one = |what: &str| match fields.as_slice() {
            [f] => Ok(f.clone()),
            _ => Err(format!("{what}: one field expected in {line:?}")),
        };
        let tables = &mut self.outcome.tables;
        match kind {
            "P" => return one("P").map(Some),
            "T" => tables.push(Table::new(one("T")?, &[])),
            "H" => match tables.last_mut() {
                Some(t) if t.header.is_empty() && t.rows.is_empty() && !fields.is_empty() => {
                    t.header = fields;
                }
                _ => return Err(format!("H without a fresh table: {line:?}")),
            },
            "R" => match tables.last_mut() {
                Some(t) if !t.header.is_empty() && fields.len() == t.header.len() => {
                    t.rows.push(fields);
                }
                _ => return Err(format!("R without a header of its width: {line:?}")),
            },
            "N" => {
                let note = one("N")?;
                match tables.last_mut() {
                    Some(t) => t.notes.push(note),
                    None => return Err(format!("N before any table: {line:?}")),
                }
            }
            "C" => {
                let [key, measured, met] = fields.as_slice() else {
                    return Err(format!("C: three fields expected in {line:?}"));
                };
                let met = match met.as_str() {
                    "yes" => Some(true),
                    "no" => Some(false),
                    "none" => None,
                    other => return Err(format!("C: met is yes, no or none, not {other:?}")),
                };
                let c: Check = targets::try_check(key, measured.clone(), met)
                    .ok_or_else(|| format!("C: no target {key:?} in targets.rs"))?;
                self.outcome.checks.push(c);
            }
            _ => return Err(format!("not a line of the protocol: {line:?}")),
        }
        Ok(None)
    }

    /// The tables and checks read so far (no charts: the protocol has none).
    pub fn finish(self) -> Outcome {
        self.outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_checks_and_progress_go_through() {
        let mut t = Table::new("W11 hot\tloop", &["row", "ns"]);
        t.row(vec!["timeout(5 s, ready(()))".into(), "12.5".into()]);
        t.row(vec!["back\\slash".into(), "-".into()]);
        t.note("two\nlines");
        let text = format!(
            "{}{}{}{}",
            progress("W11 hot loop"),
            table(&t),
            check("W11.hot", "below resolution", None),
            check("W11.cpu", "1 vs 3 ns", Some(true)),
        );
        let mut r = Reader::new();
        let mut said = Vec::new();
        for l in text.lines() {
            said.extend(r.line(l).unwrap());
        }
        assert_eq!(said, ["W11 hot loop"]);
        let out = r.finish();
        assert_eq!(out.tables, [t]);
        assert_eq!(out.checks.len(), 2);
        assert_eq!(out.checks[0].measured, "below resolution");
        assert_eq!(out.checks[0].met, None);
        assert_eq!(out.checks[1].workload, "W11");
        assert_eq!(out.checks[1].met, Some(true));
    }

    #[test]
    fn other_lines_are_errors() {
        let mut r = Reader::new();
        for bad in [
            "hello",
            "R\tbefore\theader",
            "N\tbefore a table",
            "C\tW99.x\t1\tyes",
            "C\tW11.cpu\t1\tmaybe",
            "P\tbad escape \\q",
        ] {
            assert!(r.line(bad).is_err(), "{bad}");
        }
        r.line("T\tt").unwrap();
        r.line("H\ta\tb").unwrap();
        assert!(
            r.line("R\tone cell").is_err(),
            "a row narrower than the header"
        );
        assert!(r.line("H\ta\tb").is_err(), "a second header");
    }
}
