//! The vectors of hybrid search. Each is stored once per (embedding model, text hash) in the
//! index's `vectors` table — so a piece whose text is unchanged, or comes back, is never embedded
//! again — as one signed byte per dimension (the unit vector scaled so its largest component is
//! ±127: a quarter of the size of `f32`, cosines within about 1% of the exact ones). A search
//! scans them all in memory ([`VectorSet`], loaded once per process and kept up to date as pieces
//! come and go): brute force, which at 100,000 pieces of 768 dimensions is some 77 MB and a few
//! milliseconds, and never misses a neighbour as approximate indexes do.

use std::collections::HashMap;

/// One vector as stored: `dim` signed bytes.
pub fn quantize(v: &[f32]) -> Vec<u8> {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { 127.0 / max } else { 0.0 };
    v.iter().map(|x| (x * scale).round().clamp(-127.0, 127.0) as i8 as u8).collect()
}

fn as_i8(bytes: &[u8]) -> Vec<i8> {
    bytes.iter().map(|b| *b as i8).collect()
}

/// The dot product, in 32 lanes of 16-bit products (each fits: 127² < 2¹⁵), which the compiler
/// turns into vector instructions even for the baseline x86-64 (twice as fast as the plain sum).
fn dot(a: &[i8], b: &[i8]) -> i32 {
    const LANES: usize = 32;
    let mut acc = [0i32; LANES];
    let (wide_a, wide_b) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: i32 = wide_a.remainder().iter().zip(wide_b.remainder()).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
    for (x, y) in wide_a.zip(wide_b) {
        for i in 0..LANES {
            acc[i] += i32::from(i16::from(x[i]) * i16::from(y[i]));
        }
    }
    acc.iter().sum::<i32>() + tail
}

fn norm(v: &[i8]) -> f32 {
    (dot(v, v) as f32).sqrt()
}

/// The vectors of the indexed pieces for one embedding model, by piece id.
#[derive(Debug, Default)]
pub struct VectorSet {
    /// The model they came from (`provider/model`).
    pub model: String,
    pub dim: usize,
    data: Vec<i8>,
    ids: Vec<i64>,
    norms: Vec<f32>,
    at: HashMap<i64, usize>,
}

impl VectorSet {
    pub fn new(model: &str) -> Self {
        Self { model: model.to_owned(), ..Self::default() }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Adds (or replaces) piece `id`'s vector, as stored. A vector of another dimension than the
    /// set's (the model changed what it returns) is left out.
    pub fn insert(&mut self, id: i64, stored: &[u8]) {
        if self.dim == 0 {
            self.dim = stored.len();
        }
        if stored.len() != self.dim || stored.is_empty() {
            return;
        }
        self.remove(id);
        let v = as_i8(stored);
        self.at.insert(id, self.ids.len());
        self.ids.push(id);
        self.norms.push(norm(&v));
        self.data.extend_from_slice(&v);
    }

    pub fn remove(&mut self, id: i64) {
        let Some(i) = self.at.remove(&id) else { return };
        let last = self.ids.len() - 1;
        if i != last {
            let moved = self.ids[last];
            self.ids[i] = moved;
            self.norms[i] = self.norms[last];
            let (head, tail) = self.data.split_at_mut(last * self.dim);
            head[i * self.dim..(i + 1) * self.dim].copy_from_slice(&tail[..self.dim]);
            self.at.insert(moved, i);
        }
        self.ids.pop();
        self.norms.pop();
        self.data.truncate(last * self.dim);
    }

    pub fn contains(&self, id: i64) -> bool {
        self.at.contains_key(&id)
    }

    /// The cosine of piece `id`'s vector and `query` (as [`quantize`] stores it).
    pub fn cosine(&self, id: i64, query: &[u8]) -> Option<f32> {
        let i = *self.at.get(&id)?;
        let q = as_i8(query);
        (q.len() == self.dim).then(|| cos(dot(&q, self.row(i)), norm(&q), self.norms[i]))
    }

    fn row(&self, i: usize) -> &[i8] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// The `k` pieces nearest `query`, nearest first: (id, cosine).
    pub fn nearest(&self, query: &[u8], k: usize) -> Vec<(i64, f32)> {
        let q = as_i8(query);
        if q.len() != self.dim || k == 0 || self.is_empty() {
            return Vec::new();
        }
        let qn = norm(&q);
        let mut scored: Vec<(i64, f32)> = self
            .data
            .chunks_exact(self.dim)
            .zip(self.ids.iter().zip(&self.norms))
            .map(|(row, (id, n))| (*id, cos(dot(&q, row), qn, *n)))
            .collect();
        let by = |a: &(i64, f32), b: &(i64, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if scored.len() > k {
            scored.select_nth_unstable_by(k - 1, by);
            scored.truncate(k);
        }
        scored.sort_unstable_by(by);
        scored
    }

    /// Bytes the vectors take in memory.
    pub fn bytes(&self) -> usize {
        self.data.len() + self.ids.len() * (8 + 4 + 24)
    }
}

fn cos(dot: i32, a: f32, b: f32) -> f32 {
    if a == 0.0 || b == 0.0 { 0.0 } else { dot as f32 / (a * b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantized_cosines_are_close_and_the_set_stays_consistent() {
        let a = [0.3f32, -0.2, 0.9, 0.1];
        let b = [0.25f32, -0.1, 0.95, 0.0];
        let exact = {
            let d: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
            d / (n(&a) * n(&b))
        };
        let mut set = VectorSet::new("m/e");
        set.insert(7, &quantize(&b));
        set.insert(8, &quantize(&[-0.3, 0.2, -0.9, -0.1]));
        set.insert(9, &quantize(&[0.0, 1.0, 0.0, 0.0]));
        let got = set.cosine(7, &quantize(&a)).unwrap();
        assert!((got - exact).abs() < 0.01, "{got} vs {exact}");
        let near = set.nearest(&quantize(&a), 2);
        assert_eq!(near.iter().map(|n| n.0).collect::<Vec<_>>(), vec![7, 9]);
        // Removing one moves the last into its place; every id still finds its own vector.
        set.remove(7);
        assert_eq!((set.len(), set.contains(7)), (2, false));
        assert!((set.cosine(9, &quantize(&[0.0, 1.0, 0.0, 0.0])).unwrap() - 1.0).abs() < 1e-6);
        assert!(set.cosine(8, &quantize(&a)).unwrap() < -0.99);
        // Another dimension is left out.
        set.insert(10, &quantize(&[1.0, 0.0]));
        assert!(!set.contains(10));
        assert_eq!(quantize(&[0.0, 0.0]), vec![0, 0]);
    }
}
