//! Cycles in a plan's graph, reported once per strongly connected component as real cycles in
//! the direction of the work, so the reader sees which deps to cut (not just "there is a cycle").

use std::collections::{BTreeSet, HashMap, VecDeque};

/// One problem per strongly connected component with more than one node, naming real cycles
/// (found shortest-first from the component's first node in document order) until every node of
/// the component is on one of them (at most five cycles listed per component).
pub(super) fn cycle_problems(succ: &[Vec<usize>], ids: &[&str]) -> Vec<String> {
    const MAX_CYCLES: usize = 5;
    let mut comps: Vec<Vec<usize>> = strongly_connected(succ)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    for c in &mut comps {
        c.sort_unstable();
    }
    comps.sort_by_key(|c| c[0]);
    let mut out = Vec::new();
    for comp in comps {
        let in_comp: BTreeSet<usize> = comp.iter().copied().collect();
        let mut covered = BTreeSet::new();
        let mut cycles: Vec<Vec<usize>> = Vec::new();
        let mut more = false;
        for &s in &comp {
            if covered.contains(&s) {
                continue;
            }
            if cycles.len() == MAX_CYCLES {
                more = true;
                break;
            }
            let cycle = shortest_cycle(s, succ, &in_comp);
            covered.extend(cycle.iter().copied());
            cycles.push(cycle);
        }
        let write = |c: &Vec<usize>| {
            let mut names: Vec<&str> = c.iter().map(|&i| ids[i]).collect();
            names.push(ids[c[0]]);
            names.join(" → ")
        };
        let note = "(each node depends on the one before it)";
        if cycles.len() == 1 && covered.len() == comp.len() {
            out.push(format!("cycle: {} {note}", write(&cycles[0])));
        } else {
            let members: Vec<&str> = comp.iter().map(|&i| ids[i]).collect();
            let listed: Vec<String> = cycles.iter().map(write).collect();
            out.push(format!(
                "cycles among {}: {}{} {note}",
                members.join(", "),
                listed.join("; "),
                if more { "; …" } else { "" }
            ));
        }
    }
    out
}

/// The shortest cycle through `s` staying inside `within`, starting at `s` (without repeating
/// it at the end). `s` must lie on a cycle inside `within`.
fn shortest_cycle(s: usize, succ: &[Vec<usize>], within: &BTreeSet<usize>) -> Vec<usize> {
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = VecDeque::from([s]);
    while let Some(u) = queue.pop_front() {
        for &w in &succ[u] {
            if !within.contains(&w) {
                continue;
            }
            if w == s {
                let mut path = vec![u];
                let mut at = u;
                while at != s {
                    at = parent[&at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(w) {
                e.insert(u);
                queue.push_back(w);
            }
        }
    }
    vec![s]
}

/// Tarjan's algorithm, iterative (no recursion depth to worry about).
fn strongly_connected(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    const UNSEEN: usize = usize::MAX;
    let n = succ.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        let mut call: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&(v, e)) = call.last() {
            if e < succ[v].len() {
                if let Some(top) = call.last_mut() {
                    top.1 += 1;
                }
                let w = succ[v][e];
                if index[w] == UNSEEN {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(u, _)) = call.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    out.push(comp);
                }
            }
        }
    }
    out
}
