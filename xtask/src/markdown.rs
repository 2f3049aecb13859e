//! Markdown tables that also line up in a terminal, for the benchmark's
//! and the evaluation's reports.

/// A Markdown table padded to line up in a terminal too.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(head: &[&str]) -> Table {
        Table {
            rows: vec![head.iter().map(|h| h.to_string()).collect()],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Fills the figure columns @row lacks with "-", up to the last column,
    /// which holds a note on why.
    pub fn pad_for_note(&self, row: &mut Vec<String>) {
        row.resize(self.rows[0].len() - 1, "-".into());
    }

    pub fn render(&self) -> String {
        let cols = self.rows[0].len();
        let width: Vec<usize> = (0..cols)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |r: &[String]| {
            let cells: Vec<String> = (0..cols)
                .map(|c| format!("{:<w$}", r.get(c).map_or("", String::as_str), w = width[c]))
                .collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = line(&self.rows[0]);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        out.push_str(&format!("|-{}-|\n", rule.join("-|-")));
        for r in &self.rows[1..] {
            out.push_str(&line(r));
        }
        out
    }
}
