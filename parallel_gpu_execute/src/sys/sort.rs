//! One stable sort for every list the wrapper orders. Each `sort_by` of
//! the standard library is compiled again for each element type and
//! comparator (driftsort and its pieces, 3-9 KB each: 60 KB for the
//! thirteen lists here); this merge sort of positions is compiled once,
//! and only a loop of swaps is generic. The lists are short (GPUs,
//! processes, waiters, records), so the two allocations of positions cost
//! nothing that shows.

use crate::prelude::*;

/// Sorts `v` stably: `less(a, b)` is true when `a` goes before `b`.
/// O(n log n) comparisons.
pub fn sort_by<T>(v: &mut [T], less: &mut dyn FnMut(&T, &T) -> bool) {
    let swaps = {
        let v: &[T] = v;
        swaps_to_sort(v.len(), &mut |a, b| less(&v[a], &v[b]))
    };
    for (k, &j) in swaps.iter().enumerate() {
        v.swap(k, j);
    }
}

/// The swaps, position `k` with `swaps[k]` for each `k` in turn, that put
/// `n` elements in stable order by `less` on their original positions.
#[inline(never)]
fn swaps_to_sort(n: usize, less: &mut dyn FnMut(usize, usize) -> bool) -> Vec<usize> {
    // Bottom-up merge sort of the positions 0..n.
    let mut a: Vec<usize> = (0..n).collect();
    let mut b = a.clone();
    let mut width = 1;
    while width < n {
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut l, mut r) = (start, mid);
            for slot in &mut b[start..end] {
                // The left run wins ties: stable.
                if r < end && (l >= mid || less(a[r], a[l])) {
                    *slot = a[r];
                    r += 1;
                } else {
                    *slot = a[l];
                    l += 1;
                }
            }
            start = end;
        }
        core::mem::swap(&mut a, &mut b);
        width = width.saturating_mul(2);
    }
    // a[k] is the original position of the element that goes to k. As
    // swaps: `at[p]` is the original element now at position p, `pos[e]`
    // where original element e now is.
    let mut at: Vec<usize> = (0..n).collect();
    let mut pos = at.clone();
    for k in 0..n {
        let e = a[k];
        let j = pos[e];
        let displaced = at[k];
        at[k] = e;
        at[j] = displaced;
        pos[e] = k;
        pos[displaced] = j;
        a[k] = j;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_sorts_as_the_standard_stable_sort_does() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in [0usize, 1, 2, 3, 7, 8, 9, 31, 100, 1000] {
            for _ in 0..30 {
                // (key, original position): equal keys must keep their order.
                let v: Vec<(u64, usize)> = (0..n).map(|i| (next() % 10, i)).collect();
                let mut ours = v.clone();
                sort_by(&mut ours, &mut |a, b| a.0 < b.0);
                let mut std = v.clone();
                std.sort_by_key(|e| e.0);
                assert_eq!(ours, std, "n = {n}");
            }
        }
        let mut words = vec!["b", "a", "c", "a"];
        sort_by(&mut words, &mut |a, b| a > b);
        assert_eq!(words, ["c", "b", "a", "a"]);
    }
}
