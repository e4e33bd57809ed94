//! The stand-in for an embeddings model: deterministic vectors from a text's words and their
//! character 3- and 4-grams, hashed into [`DIM`] dimensions (as fastText's subword hashing does),
//! common English function words left out, unit length. Texts sharing words or word stems
//! ("deploy", "deploying", "deployments") get close vectors; it knows no synonyms, so it stands in
//! for a model's behaviour on word forms only.

/// Dimensions of the vectors the mock serves.
pub const DIM: usize = 1024;

const STOP: &[&str] = &[
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "with", "by", "is", "are", "was", "were", "be",
    "we", "you", "i", "it", "this", "that", "what", "when", "who", "how", "which", "do", "does", "did", "after",
    "again",
];

pub fn vector(text: &str) -> Vec<f32> {
    vector_of(text, DIM)
}

/// The vector of `text` in `dim` dimensions.
pub fn vector_of(text: &str, dim: usize) -> Vec<f32> {
    let mut v = vec![0f32; dim];
    let lower = text.to_lowercase();
    for word in lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty() && !STOP.contains(w)) {
        v[slot(word.as_bytes(), 1, dim)] += 1.0;
        let padded: Vec<char> = format!("<{word}>").chars().collect();
        for n in [3, 4] {
            for gram in padded.windows(n) {
                let gram: String = gram.iter().collect();
                v[slot(gram.as_bytes(), n as u64, dim)] += 0.5;
            }
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// FNV-1a of `bytes` (seeded), folded into a dimension.
fn slot(bytes: &[u8], seed: u64, dim: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % dim as u64) as usize
}
