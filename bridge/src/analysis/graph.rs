//! The wait-for graph over world ranks: graph reduction for the AND-OR
//! model, and the cycles among the ranks it cannot free.
//!
//! A rank is *free* when it waits for nothing; a rank whose AND waits all
//! lead to free ranks and whose OR waits each have at least one free target
//! becomes free; this runs to a fixpoint. It is run twice: once assuming the
//! best of everything unknown (unknown ranks may run, uncertain waits may be
//! satisfied) — the ranks still not free are certainly deadlocked — and once
//! assuming the worst — the ranks freed only in the best case depend on
//! unknown data.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::matching::{SetIndex, Target, Wait};

/// Steps the cycle searches may take before they stop (and say so).
const STEP_BUDGET: usize = 200_000;

/// What the reduction starts from.
pub(crate) struct Facts<'a> {
    /// Every rank of the graph.
    pub nodes: &'a BTreeSet<i64>,
    /// The waits of the readable ranks.
    pub waits: &'a [Wait],
    /// Ranks whose queues are not known.
    pub unknown: &'a BTreeSet<i64>,
    /// Ranks seen to progress between two samples: they run.
    pub progressed: &'a BTreeSet<i64>,
    /// Ranks whose waits the previous sample could not confirm.
    pub unconfirmed: &'a BTreeSet<i64>,
    /// Ranks free whatever they wait for: computing outside MPI, or in a
    /// blocking call that is satisfied.
    pub free: &'a BTreeSet<i64>,
}

/// What to assume of everything unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Assume {
    /// Unknown ranks may run; uncertain and unconfirmed waits may be satisfied.
    Best,
    /// Unknown ranks may be stuck; uncertain waits count as real.
    Worst,
}

/// The ranks graph reduction frees.
///
/// A rank's waits form groups ([`Wait::group`]): it is freed once every
/// wait of one of its groups is satisfied. A rank without waits, or one
/// in `f.free`, is free from the start.
pub(crate) fn reduce(f: &Facts<'_>, assume: Assume) -> BTreeSet<i64> {
    let best = assume == Assume::Best;
    let mut free: BTreeSet<i64> = BTreeSet::new();
    // Unsatisfied waits of each group of each rank still in question.
    let mut open: HashMap<i64, HashMap<u32, usize>> = HashMap::new();
    for &n in f.nodes {
        if f.unknown.contains(&n) {
            if best {
                free.insert(n);
            }
        } else if f.progressed.contains(&n) || f.free.contains(&n) || (best && f.unconfirmed.contains(&n)) {
            free.insert(n);
        } else {
            open.insert(n, HashMap::new());
        }
    }
    // Every group exists, also when all its waits are satisfied at once.
    for w in f.waits {
        if let Some(groups) = open.get_mut(&w.rank) {
            groups.entry(w.group).or_insert(0);
        }
    }
    let mut satisfied = vec![false; f.waits.len()];
    let mut waiting_on: HashMap<i64, Vec<usize>> = HashMap::new();
    let mut unresolved: Vec<usize> = Vec::new();
    // Shared sets of members (Target::AllOf), each once, with the waits
    // on it; `open[k]`: set k's members not yet free.
    let mut sets: SetIndex<usize> = SetIndex::default();
    for (i, w) in f.waits.iter().enumerate() {
        let Some(count) = open.get_mut(&w.rank).and_then(|g| g.get_mut(&w.group)) else {
            continue;
        };
        if best && !w.certain {
            satisfied[i] = true;
            continue;
        }
        match &w.target {
            Target::Rank(b) => waiting_on.entry(*b).or_default().push(i),
            Target::AnyOf { ranks, unknown_members } => {
                if best && *unknown_members {
                    satisfied[i] = true;
                    continue;
                }
                for b in ranks {
                    waiting_on.entry(*b).or_default().push(i);
                }
            }
            Target::Unresolved { .. } => unresolved.push(i),
            Target::AllOf(members) => sets.add(members.as_ptr() as usize, members, i),
        }
        *count += 1;
    }
    let mut open_sets = sets.sizes.clone();
    let mut queue: VecDeque<i64> = free.iter().copied().collect();
    for (&r, groups) in &open {
        if (groups.is_empty() || groups.values().any(|n| *n == 0)) && free.insert(r) {
            queue.push_back(r);
        }
    }
    let mut release = |i: usize, free: &mut BTreeSet<i64>, queue: &mut VecDeque<i64>, satisfied: &mut Vec<bool>| {
        satisfied[i] = true;
        let w = &f.waits[i];
        if let Some(n) = open.get_mut(&w.rank).and_then(|g| g.get_mut(&w.group)) {
            *n = n.saturating_sub(1);
            if *n == 0 && free.insert(w.rank) {
                queue.push_back(w.rank);
            }
        }
    };
    loop {
        while let Some(b) = queue.pop_front() {
            for &i in waiting_on.get(&b).map(Vec::as_slice).unwrap_or_default() {
                if !satisfied[i] {
                    release(i, &mut free, &mut queue, &mut satisfied);
                }
            }
            for &k in sets.of(b) {
                open_sets[k] = open_sets[k].saturating_sub(1);
                if open_sets[k] > 0 {
                    continue;
                }
                for &i in &sets.waiters[k] {
                    if !satisfied[i] {
                        release(i, &mut free, &mut queue, &mut satisfied);
                    }
                }
            }
        }
        // A wait on an unknown one of `others` ranks: in the best case any
        // free rank may be it; in the worst, all candidates may be stuck.
        let mut moved = false;
        for &i in &unresolved {
            if satisfied[i] {
                continue;
            }
            let owner = f.waits[i].rank;
            let ok = match f.waits[i].target {
                Target::Unresolved { others } if !best => {
                    let stuck_others = f.nodes.len().saturating_sub(free.len() + 1);
                    stuck_others < others
                }
                _ => free.iter().any(|r| *r != owner),
            };
            if ok {
                release(i, &mut free, &mut queue, &mut satisfied);
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    free
}

/// The first node id of the shared sets in a [`Blocking`] graph, above any
/// world rank: a set the ranks of a collective wait for is one node between
/// them and its members. Never in a reported cycle.
const SET_NODES: i64 = 1 << 62;

/// Whether a node of a [`Blocking`] graph is a shared set, not a rank.
pub(crate) fn is_set(v: i64) -> bool {
    v >= SET_NODES
}

/// The edge `a → b` between two ranks of a [`Blocking`] graph: direct, or
/// through a shared set `a` waits for and `b` is in.
pub(crate) fn edge(adj: &Blocking, a: i64, b: i64) -> Option<(bool, bool)> {
    let out = adj.get(&a)?;
    if let Some(e) = out.get(&b) {
        return Some(*e);
    }
    out.range(SET_NODES..)
        .find(|(v, _)| adj.get(v).is_some_and(|o| o.contains_key(&b)))
        .map(|(_, e)| *e)
}

/// Edges of the graph among deadlocked ranks that keep them so: `from → to
/// → (an AND edge, an OR edge)`; `to` may be a shared set ([`is_set`]),
/// whose own edges lead to its deadlocked members.
pub(crate) type Blocking = BTreeMap<i64, BTreeMap<i64, (bool, bool)>>;

/// The edges that hold the deadlocked ranks: certain waits whose every
/// target is deadlocked too.
pub(crate) fn blocking(dead: &BTreeSet<i64>, waits: &[Wait]) -> Blocking {
    let mut adj: Blocking = dead.iter().map(|&r| (r, BTreeMap::new())).collect();
    // A rank with several groups needs any one of them: its edges are ORs.
    let mut groups: HashMap<i64, BTreeSet<u32>> = HashMap::new();
    for w in waits {
        groups.entry(w.rank).or_default().insert(w.group);
    }
    let alternatives = |r: i64| groups.get(&r).is_some_and(|g| g.len() > 1);
    // Each shared set's node, once (None: none of its members is deadlocked).
    let mut set_node: HashMap<usize, Option<i64>> = HashMap::new();
    for w in waits.iter().filter(|w| w.certain && dead.contains(&w.rank)) {
        match &w.target {
            Target::Rank(b) if dead.contains(b) => {
                let e = adj.entry(w.rank).or_default().entry(*b).or_default();
                if alternatives(w.rank) {
                    e.1 = true;
                } else {
                    e.0 = true;
                }
            }
            Target::AnyOf {
                ranks,
                unknown_members: false,
            } if ranks.iter().all(|b| dead.contains(b)) => {
                for b in ranks {
                    adj.entry(w.rank).or_default().entry(*b).or_default().1 = true;
                }
            }
            Target::AllOf(members) => {
                let key = members.as_ptr() as usize;
                let v = match set_node.get(&key) {
                    Some(v) => *v,
                    None => {
                        let held: BTreeMap<i64, (bool, bool)> = members
                            .iter()
                            .filter(|b| dead.contains(b))
                            .map(|&b| (b, (true, false)))
                            .collect();
                        let v = (!held.is_empty()).then(|| SET_NODES + set_node.len() as i64);
                        if let Some(v) = v {
                            adj.insert(v, held);
                        }
                        set_node.insert(key, v);
                        v
                    }
                };
                if let Some(v) = v {
                    let e = adj.entry(w.rank).or_default().entry(v).or_default();
                    if alternatives(w.rank) {
                        e.1 = true;
                    } else {
                        e.0 = true;
                    }
                }
            }
            _ => {}
        }
    }
    adj
}

/// Cycles found among deadlocked ranks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cycles {
    /// Elementary cycles in wait order, each from its smallest rank, sorted.
    pub cycles: Vec<Vec<i64>>,
    /// Every rank on some cycle (reported or not).
    pub on_cycle: BTreeSet<i64>,
    /// The list was cut at the limit or the search budget.
    pub cut: bool,
}

/// Successor lists of a graph, keeping the edges `keep` accepts.
fn successors(adj: &Blocking, keep: impl Fn((bool, bool)) -> bool) -> BTreeMap<i64, Vec<i64>> {
    adj.iter()
        .map(|(&v, out)| (v, out.iter().filter(|(_, e)| keep(**e)).map(|(&w, _)| w).collect()))
        .collect()
}

/// Strongly connected components (Kosaraju, without recursion): component
/// number of each node.
fn components(succ: &BTreeMap<i64, Vec<i64>>) -> HashMap<i64, usize> {
    let none: Vec<i64> = Vec::new();
    let next = |v: i64| succ.get(&v).unwrap_or(&none);
    let mut order = Vec::new();
    let mut seen: BTreeSet<i64> = BTreeSet::new();
    for &s in succ.keys() {
        if !seen.insert(s) {
            continue;
        }
        let mut stack = vec![(s, 0usize)];
        while let Some((v, i)) = stack.last_mut() {
            let v = *v;
            if let Some(&w) = next(v).get(*i) {
                *i += 1;
                if seen.insert(w) {
                    stack.push((w, 0));
                }
            } else {
                order.push(v);
                stack.pop();
            }
        }
    }
    let mut rev: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (&v, out) in succ {
        for &w in out {
            rev.entry(w).or_default().push(v);
        }
    }
    let mut comp: HashMap<i64, usize> = HashMap::new();
    let mut count = 0;
    for &s in order.iter().rev() {
        if comp.contains_key(&s) {
            continue;
        }
        comp.insert(s, count);
        let mut stack = vec![s];
        while let Some(v) = stack.pop() {
            for &w in rev.get(&v).unwrap_or(&none) {
                if let std::collections::hash_map::Entry::Vacant(e) = comp.entry(w) {
                    e.insert(count);
                    stack.push(w);
                }
            }
        }
        count += 1;
    }
    comp
}

/// The search state shared by the cycle finders.
struct Search {
    found: BTreeSet<Vec<i64>>,
    limit: usize,
    steps: usize,
    cut: bool,
}

impl Search {
    /// Records a cycle; false once the limit stops the search.
    fn add(&mut self, mut cycle: Vec<i64>) -> bool {
        cycle.retain(|&v| !is_set(v));
        if cycle.is_empty() {
            return true;
        }
        if let Some(min) = cycle.iter().enumerate().min_by_key(|(_, r)| **r).map(|(i, _)| i) {
            cycle.rotate_left(min);
        }
        if self.found.contains(&cycle) {
            return true;
        }
        if self.found.len() >= self.limit {
            self.cut = true;
            return false;
        }
        self.found.insert(cycle);
        true
    }

    fn step(&mut self) -> bool {
        self.steps += 1;
        if self.steps > STEP_BUDGET {
            self.cut = true;
        }
        !self.cut
    }

    /// Elementary cycles starting at each node through larger nodes of its
    /// component; with `longest_only`, only the longest from the smallest
    /// node of each component (stopping once one covers it all).
    fn elementary(
        &mut self,
        succ: &BTreeMap<i64, Vec<i64>>,
        comp: &HashMap<i64, usize>,
        starts: &[i64],
        longest_only: bool,
    ) {
        let none: Vec<i64> = Vec::new();
        for &s in starts {
            let size = if longest_only {
                comp.values().filter(|c| comp.get(&s) == Some(*c)).count()
            } else {
                0
            };
            let mut best: Vec<i64> = Vec::new();
            let mut path = vec![s];
            let mut stack = vec![0usize];
            let mut on_path: BTreeSet<i64> = BTreeSet::from([s]);
            while let Some(i) = stack.last_mut() {
                if !self.step() {
                    return;
                }
                let v = *path.last().unwrap_or(&s);
                let Some(&w) = succ.get(&v).unwrap_or(&none).get(*i) else {
                    stack.pop();
                    if let Some(v) = path.pop() {
                        on_path.remove(&v);
                    }
                    continue;
                };
                *i += 1;
                if w == s {
                    if longest_only {
                        if path.len() > best.len() {
                            best = path.clone();
                        }
                        if best.len() == size {
                            break;
                        }
                    } else if !self.add(path.clone()) {
                        return;
                    }
                } else if w > s && comp.get(&w) == comp.get(&s) && !on_path.contains(&w) {
                    on_path.insert(w);
                    path.push(w);
                    stack.push(0);
                }
            }
            if longest_only && !best.is_empty() && !self.add(best) {
                return;
            }
        }
    }

    /// The shortest cycle through `m` within its component (breadth first).
    fn through(&mut self, m: i64, succ: &BTreeMap<i64, Vec<i64>>, comp: &HashMap<i64, usize>) -> Option<Vec<i64>> {
        let none: Vec<i64> = Vec::new();
        let mut parent: HashMap<i64, i64> = HashMap::new();
        let mut queue = VecDeque::from([m]);
        while let Some(v) = queue.pop_front() {
            for &w in succ.get(&v).unwrap_or(&none) {
                if !self.step() {
                    return None;
                }
                if w == m {
                    let mut cycle = vec![v];
                    while let Some(&p) = parent.get(cycle.last().unwrap_or(&m)) {
                        cycle.push(p);
                    }
                    cycle.reverse();
                    if cycle[0] != m {
                        cycle.insert(0, m);
                    }
                    return Some(cycle);
                }
                if comp.get(&w) == comp.get(&m) && w != m && !parent.contains_key(&w) {
                    parent.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        None
    }
}

/// The cycles among deadlocked ranks: every elementary cycle of AND edges,
/// one cycle through the members of each knot that has OR edges (the
/// longest found from its smallest rank), and then a shortest cycle through
/// any rank on a cycle not yet shown; at most `limit`.
pub(crate) fn cycles(adj: &Blocking, limit: usize) -> Cycles {
    let all = successors(adj, |_| true);
    let comp = components(&all);
    let mut sizes: HashMap<usize, usize> = HashMap::new();
    for c in comp.values() {
        *sizes.entry(*c).or_default() += 1;
    }
    let on_cycle: BTreeSet<i64> = all
        .iter()
        .filter(|(v, out)| !is_set(**v) && (sizes[&comp[v]] > 1 || out.contains(v)))
        .map(|(v, _)| *v)
        .collect();
    let mut search = Search {
        found: BTreeSet::new(),
        limit,
        steps: 0,
        cut: false,
    };
    // 1. AND cycles.
    let and = successors(adj, |(a, _)| a);
    let and_comp = components(&and);
    let starts: Vec<i64> = and.keys().copied().collect();
    search.elementary(&and, &and_comp, &starts, false);
    // 2. One member cycle per component holding an OR edge.
    let mut knot_starts: BTreeMap<usize, i64> = BTreeMap::new();
    for (v, out) in adj {
        if on_cycle.contains(v) && out.iter().any(|(w, e)| e.1 && comp.get(w) == comp.get(v)) {
            let s = knot_starts.entry(comp[v]).or_insert(*v);
            *s = (*s).min(*v);
        }
    }
    let mut starts: Vec<i64> = Vec::new();
    for (&c, &s) in &knot_starts {
        // Everyone on ANY_SOURCE of one communicator: the members in order.
        let members: Vec<i64> = all.keys().copied().filter(|v| comp.get(v) == Some(&c)).collect();
        let ring = members
            .iter()
            .zip(members.iter().cycle().skip(1))
            .all(|(a, b)| adj.get(a).is_some_and(|out| out.contains_key(b)));
        if !(ring && search.add(members)) {
            starts.push(s);
        }
    }
    if !search.cut {
        search.elementary(&all, &comp, &starts, true);
    }
    // 3. Every rank on a cycle shows on one.
    let mut shown: BTreeSet<i64> = search.found.iter().flatten().copied().collect();
    for &m in &on_cycle {
        if search.cut {
            break;
        }
        if !shown.contains(&m) {
            if let Some(cycle) = search.through(m, &all, &comp) {
                shown.extend(cycle.iter().copied());
                search.add(cycle);
            }
        }
    }
    Cycles {
        cycles: search.found.into_iter().collect(),
        on_cycle,
        cut: search.cut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::matching::OpAt;
    use crate::analysis::model::OpKind;
    use crate::snapshot::model::QueueKind;

    fn wait(rank: i64, target: Target, certain: bool) -> Wait {
        Wait {
            rank,
            at: Some(OpAt {
                process: 0,
                comm: 0,
                queue: QueueKind::Receives,
                op: 0,
            }),
            group: 0,
            words: None,
            one: None,
            op: OpKind::Receive,
            communicator: "MPI_COMM_WORLD".into(),
            tag: None,
            target,
            certain,
            why: None,
            unmatched: None,
        }
    }
    fn and(rank: i64, to: i64) -> Wait {
        wait(rank, Target::Rank(to), true)
    }
    fn or(rank: i64, to: &[i64]) -> Wait {
        wait(
            rank,
            Target::AnyOf {
                ranks: to.to_vec(),
                unknown_members: false,
            },
            true,
        )
    }

    struct Case {
        nodes: BTreeSet<i64>,
        waits: Vec<Wait>,
        unknown: BTreeSet<i64>,
        progressed: BTreeSet<i64>,
        unconfirmed: BTreeSet<i64>,
        free: BTreeSet<i64>,
    }

    impl Case {
        fn new(n: i64, waits: Vec<Wait>) -> Self {
            Case {
                nodes: (0..n).collect(),
                waits,
                unknown: BTreeSet::new(),
                progressed: BTreeSet::new(),
                unconfirmed: BTreeSet::new(),
                free: BTreeSet::new(),
            }
        }
        fn stuck(&self, assume: Assume) -> Vec<i64> {
            let f = Facts {
                nodes: &self.nodes,
                waits: &self.waits,
                unknown: &self.unknown,
                progressed: &self.progressed,
                unconfirmed: &self.unconfirmed,
                free: &self.free,
            };
            let free = reduce(&f, assume);
            self.nodes.difference(&free).copied().collect()
        }
        fn cycles(&self) -> Cycles {
            let dead: BTreeSet<i64> = self.stuck(Assume::Best).into_iter().collect();
            cycles(&blocking(&dead, &self.waits), 100)
        }
    }

    #[test]
    fn an_and_chain_into_a_free_rank_reduces() {
        let c = Case::new(3, vec![and(0, 1), and(1, 2)]);
        assert!(c.stuck(Assume::Best).is_empty());
    }

    #[test]
    fn an_and_cycle_stays_with_what_hangs_off_it() {
        let c = Case::new(4, vec![and(0, 1), and(1, 2), and(2, 0), and(3, 2)]);
        assert_eq!(c.stuck(Assume::Best), vec![0, 1, 2, 3]);
        let cy = c.cycles();
        assert_eq!(cy.cycles, vec![vec![0, 1, 2]]);
        assert_eq!(cy.on_cycle, BTreeSet::from([0, 1, 2]));
    }

    #[test]
    fn an_or_wait_needs_only_one_free_target() {
        let c = Case::new(3, vec![or(0, &[1, 2]), and(1, 0)]);
        assert!(c.stuck(Assume::Best).is_empty());
        let c = Case::new(3, vec![or(0, &[1, 2]), and(1, 0), and(2, 1)]);
        assert_eq!(c.stuck(Assume::Best), vec![0, 1, 2]);
    }

    #[test]
    fn every_wait_of_a_rank_must_be_satisfiable() {
        // Rank 0 waits for 1 (free) and on itself.
        let c = Case::new(2, vec![and(0, 1), and(0, 0)]);
        assert_eq!(c.stuck(Assume::Best), vec![0]);
        assert_eq!(c.cycles().cycles, vec![vec![0]]);
    }

    #[test]
    fn unknown_ranks_may_run_in_the_best_case_only() {
        let mut c = Case::new(3, vec![and(0, 2), and(1, 0)]);
        c.unknown.insert(2);
        assert!(c.stuck(Assume::Best).is_empty());
        assert_eq!(c.stuck(Assume::Worst), vec![0, 1, 2]);
    }

    #[test]
    fn uncertain_waits_count_only_in_the_worst_case() {
        let c = Case::new(2, vec![wait(0, Target::Rank(1), false), and(1, 0)]);
        assert!(c.stuck(Assume::Best).is_empty());
        assert_eq!(c.stuck(Assume::Worst), vec![0, 1]);
    }

    #[test]
    fn an_unresolved_wait_is_satisfied_by_enough_free_ranks() {
        // Rank 0 waits ANY_SOURCE on a 3-rank communicator of unknown group.
        let un = |others| wait(0, Target::Unresolved { others }, false);
        let c = Case::new(4, vec![un(2), and(1, 1)]);
        // Ranks 2 and 3 are free: any 2 others include a free one? 1 is stuck: 1 < 2.
        assert_eq!(c.stuck(Assume::Worst), vec![1]);
        let c = Case::new(4, vec![un(2), and(1, 1), and(2, 2)]);
        assert_eq!(c.stuck(Assume::Worst), vec![0, 1, 2]);
        assert_eq!(c.stuck(Assume::Best), vec![1, 2]);
    }

    #[test]
    fn progressed_and_unconfirmed_ranks() {
        let mut c = Case::new(2, vec![and(0, 1), and(1, 0)]);
        c.progressed.insert(1);
        assert!(c.stuck(Assume::Worst).is_empty());
        c.progressed.clear();
        c.unconfirmed.insert(1);
        assert!(c.stuck(Assume::Best).is_empty());
        assert_eq!(c.stuck(Assume::Worst), vec![0, 1]);
    }

    fn grouped(mut w: Wait, group: u32) -> Wait {
        w.group = group;
        w
    }

    #[test]
    fn any_one_group_of_waits_frees_a_rank() {
        // Rank 0 in MPI_Waitany over a receive from 1 and one from 2; 1 waits for 0.
        let c = Case::new(3, vec![grouped(and(0, 1), 0), grouped(and(0, 2), 1), and(1, 0)]);
        assert!(c.stuck(Assume::Best).is_empty());
        // Rank 2 stuck on itself: rank 0 still has no group that can complete.
        let c = Case::new(
            3,
            vec![grouped(and(0, 1), 0), grouped(and(0, 2), 1), and(1, 0), and(2, 2)],
        );
        assert_eq!(c.stuck(Assume::Best), vec![0, 1, 2]);
        // Its edges are alternatives: OR edges, one knot through 0 and 1.
        let cy = c.cycles();
        assert!(cy.on_cycle.contains(&0) && cy.on_cycle.contains(&1), "{cy:?}");
    }

    #[test]
    fn a_rank_marked_free_frees_its_waiters() {
        let mut c = Case::new(2, vec![and(0, 1), and(1, 0)]);
        c.free.insert(1);
        assert!(c.stuck(Assume::Worst).is_empty());
    }

    #[test]
    fn an_any_source_knot_is_one_member_cycle() {
        let c = Case::new(3, vec![or(0, &[1, 2]), or(1, &[0, 2]), or(2, &[0, 1])]);
        assert_eq!(c.cycles().cycles, vec![vec![0, 1, 2]]);
    }

    #[test]
    fn cycles_start_at_their_smallest_rank_in_wait_order() {
        let c = Case::new(8, vec![and(5, 2), and(2, 7), and(7, 5)]);
        assert_eq!(c.cycles().cycles, vec![vec![2, 7, 5]]);
    }

    #[test]
    fn every_elementary_and_cycle_once() {
        // 0 <-> 1 and 0 -> 1 -> 2 -> 0 (rank 1 waits for 0 and 2).
        let c = Case::new(3, vec![and(0, 1), and(1, 0), and(1, 2), and(2, 0)]);
        assert_eq!(c.cycles().cycles, vec![vec![0, 1], vec![0, 1, 2]]);
    }

    #[test]
    fn the_cycle_list_is_bounded() {
        // A complete AND graph on 8 ranks has thousands of elementary cycles.
        let mut waits = Vec::new();
        for a in 0..8 {
            for b in 0..8 {
                if a != b {
                    waits.push(and(a, b));
                }
            }
        }
        let c = Case::new(8, waits);
        let cy = c.cycles();
        assert_eq!(cy.cycles.len(), 100);
        assert!(cy.cut);
        assert_eq!(cy.on_cycle.len(), 8);
    }

    #[test]
    fn a_rank_only_on_a_long_cycle_is_still_shown() {
        // An OR knot that is not complete: 0 -> {1}, 1 -> {2, 0}, 2 -> {3}, 3 -> {1}.
        let c = Case::new(4, vec![or(0, &[1]), or(1, &[0, 2]), or(2, &[3]), or(3, &[1])]);
        let cy = c.cycles();
        let shown: BTreeSet<i64> = cy.cycles.iter().flatten().copied().collect();
        assert_eq!(shown, BTreeSet::from([0, 1, 2, 3]));
        assert!(!cy.cut);
    }
}
