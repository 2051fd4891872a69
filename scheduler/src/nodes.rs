//! The node table: the cluster's nodes by id, shared with the cluster's copies (a
//! prospect's, a forecast's, a what-if's) until one of them changes a node, so that
//! copying a cluster of 5,000 nodes copies 5,000 pointers rather than 40,000 cards.
//! Reading is as from a `Vec<Node>`; a node is copied the first time a copy changes it
//! (through `nodes[i]` as a place).

use std::ops::{Index, IndexMut};
use std::sync::Arc;

use serde::{Serialize, Serializer};

use crate::model::Node;

#[derive(Clone, Debug, Default)]
pub struct Nodes(Vec<Arc<Node>>);

impl Nodes {
    pub fn new() -> Nodes {
        Nodes(Vec::new())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Node> + ExactSizeIterator + Clone + '_ {
        self.0.iter().map(|n| &**n)
    }

    pub fn get(&self, i: usize) -> Option<&Node> {
        self.0.get(i).map(|n| &**n)
    }

    pub fn push(&mut self, n: Node) {
        self.0.push(Arc::new(n));
    }

    /// The nodes as owned values (each copied where a copy shares it).
    pub fn to_vec(&self) -> Vec<Node> {
        self.iter().cloned().collect()
    }
}

impl Index<usize> for Nodes {
    type Output = Node;
    fn index(&self, i: usize) -> &Node {
        &self.0[i]
    }
}

impl IndexMut<usize> for Nodes {
    fn index_mut(&mut self, i: usize) -> &mut Node {
        Arc::make_mut(&mut self.0[i])
    }
}

impl From<Vec<Node>> for Nodes {
    fn from(v: Vec<Node>) -> Nodes {
        Nodes(v.into_iter().map(Arc::new).collect())
    }
}

impl FromIterator<Node> for Nodes {
    fn from_iter<I: IntoIterator<Item = Node>>(it: I) -> Nodes {
        Nodes(it.into_iter().map(Arc::new).collect())
    }
}

impl<'a> IntoIterator for &'a Nodes {
    type Item = &'a Node;
    type IntoIter = std::iter::Map<std::slice::Iter<'a, Arc<Node>>, fn(&'a Arc<Node>) -> &'a Node>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|n| &**n)
    }
}

impl Serialize for Nodes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_shares_its_nodes_until_it_changes_one() {
        let mut a: Nodes = (0..3)
            .map(|i| {
                Node::new(
                    format!("n{i}"),
                    Default::default(),
                    16_000,
                    64 << 30,
                    0,
                    vec![],
                )
            })
            .collect();
        let mut b = a.clone();
        assert!(Arc::ptr_eq(&a.0[1], &b.0[1]));
        b[1].cordoned = true;
        // The copy changed its own node; the original's is as it was, the rest shared.
        assert!(!Arc::ptr_eq(&a.0[1], &b.0[1]));
        assert!(Arc::ptr_eq(&a.0[0], &b.0[0]));
        assert!(b[1].cordoned && !a[1].cordoned);
        // The original changes its own without copying.
        let before = Arc::as_ptr(&a.0[2]);
        drop(b);
        a[2].cordoned = true;
        assert_eq!(Arc::as_ptr(&a.0[2]), before);
        assert_eq!(a.iter().filter(|n| n.cordoned).count(), 1);
    }
}
