//! Tarjan's strongly connected components, for the import circles between files.

/// The strongly connected components of the graph with `nodes` nodes and edges `from → to`
/// that have more than one node, each sorted, in order of their smallest node.
pub fn circles(nodes: usize, edges: impl IntoIterator<Item = (usize, usize)>) -> Vec<Vec<usize>> {
    let mut successors = vec![Vec::new(); nodes];
    for (from, to) in edges {
        successors[from].push(to);
    }
    let mut tarjan = Tarjan {
        successors: &successors,
        index: vec![None; nodes],
        low: vec![0; nodes],
        on_stack: vec![false; nodes],
        stack: Vec::new(),
        next_index: 0,
        components: Vec::new(),
    };
    for node in 0..nodes {
        if tarjan.index[node].is_none() {
            tarjan.visit(node);
        }
    }
    let mut components: Vec<Vec<usize>> = tarjan
        .components
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut c| {
            c.sort_unstable();
            c
        })
        .collect();
    components.sort();
    components
}

/// The state of Tarjan's algorithm.
struct Tarjan<'a> {
    /// The successors of each node.
    successors: &'a [Vec<usize>],
    /// Visit order of each node, once visited.
    index: Vec<Option<usize>>,
    /// Lowest visit order reachable from each node.
    low: Vec<usize>,
    /// Whether each node is on the stack.
    on_stack: Vec<bool>,
    /// Nodes of the components not finished yet.
    stack: Vec<usize>,
    /// The next visit order.
    next_index: usize,
    /// The finished components.
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    /// Visits `node` and everything reachable from it (recursion depth: the longest path, at
    /// most the number of files of one package).
    fn visit(&mut self, node: usize) {
        self.index[node] = Some(self.next_index);
        self.low[node] = self.next_index;
        self.next_index += 1;
        self.stack.push(node);
        self.on_stack[node] = true;
        for &next in &self.successors[node] {
            match self.index[next] {
                None => {
                    self.visit(next);
                    self.low[node] = self.low[node].min(self.low[next]);
                }
                Some(order) if self.on_stack[next] => {
                    self.low[node] = self.low[node].min(order);
                }
                Some(_) => {}
            }
        }
        if Some(self.low[node]) == self.index[node] {
            let mut component = Vec::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack[top] = false;
                component.push(top);
                if top == node {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::circles;

    #[test]
    fn finds_only_components_with_more_than_one_node() {
        // 0 → 1 → 2 → 0 is a circle, 3 ↔ 4 another, 5 → 5 and 2 → 5 are not.
        let edges = [
            (0, 1),
            (1, 2),
            (2, 0),
            (3, 4),
            (4, 3),
            (5, 5),
            (2, 5),
            (4, 0),
        ];
        assert_eq!(circles(6, edges), vec![vec![0, 1, 2], vec![3, 4]]);
    }

    #[test]
    fn a_chain_has_no_circle() {
        assert!(circles(4, [(0, 1), (1, 2), (2, 3), (0, 3)]).is_empty());
    }
}
