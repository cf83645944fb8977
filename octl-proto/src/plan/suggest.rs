//! Helping the reader fix a name: the closest accepted name ("did you mean …?") and a capped list
//! of the names that are known.

pub(super) fn list_names(names: &[&str], max: usize) -> String {
    if names.is_empty() {
        return "(none)".into();
    }
    let mut s = names
        .iter()
        .take(max)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > max {
        s.push_str(&format!(", … ({} more)", names.len() - max));
    }
    s
}

/// The closest candidate within a small edit distance (adjacent swaps count as one edit).
pub(super) fn did_you_mean<'a>(given: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let given_len = given.chars().count();
    candidates
        .iter()
        // The distance is at least the difference in length: skip those that cannot be
        // close without computing it (a long given string would cost its length squared).
        .filter(|c| c.chars().count().abs_diff(given_len) <= 2)
        .map(|c| (edit_distance(given, c), *c))
        .filter(|(d, _)| *d <= 2 && *d < given_len)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal string alignment distance.
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[n][m]
}
