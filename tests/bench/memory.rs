//! Benchmarks of the memory index (run by `tests/bench/run`; docs/memory.md): indexing 10,000
//! Markdown files / 50 MB from scratch and again after one file changes, peak RSS while indexing,
//! `memory_search` latency over 100,000 pieces by words (BM25) and hybrid (BM25 + vectors of 768
//! dimensions, the query's vector cached), and the recall@5 of both on a small labelled set.
//! Figures, not pass/fail: targets are printed beside them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr, dead_code)]

#[path = "../support/embeddings.rs"]
mod embeddings;

use std::path::Path;
use std::time::{Duration, Instant};

use acp::memory::Memory;
use acp::memory::index::Index;

fn report(name: &str, value: String, target: &str) {
    println!("{name:<58} {value:>14}   (target {target})");
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// xorshift64*: the corpus is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// 6,000 made-up words and a Zipf-like draw from them (common words often, most rarely).
struct Words {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Words {
    fn new(rng: &mut Rng) -> Self {
        const SYLLABLES: [&str; 24] = [
            "ka", "lo", "mi", "ter", "van", "su", "dor", "pel", "ri", "om", "na", "qu", "zen", "bra", "fi", "tol",
            "ex", "gar", "ly", "mon", "spa", "ut", "wex", "hol",
        ];
        let mut words = Vec::new();
        while words.len() < 6_000 {
            let n = 1 + rng.below(3);
            let w: String = (0..n).map(|_| SYLLABLES[rng.below(SYLLABLES.len())]).collect();
            if !words.contains(&w) {
                words.push(w);
            }
        }
        let mut total = 0.0;
        let cumulative = (0..words.len())
            .map(|i| {
                total += 1.0 / (i as f64 + 1.0);
                total
            })
            .collect();
        Self { words, cumulative }
    }

    fn pick(&self, rng: &mut Rng) -> &str {
        let total = *self.cumulative.last().unwrap();
        let x = (rng.next() as f64 / u64::MAX as f64) * total;
        let i = self.cumulative.partition_point(|c| *c < x).min(self.words.len() - 1);
        &self.words[i]
    }

    fn sentence(&self, rng: &mut Rng) -> String {
        let n = 6 + rng.below(12);
        let mut s: Vec<&str> = (0..n).map(|_| self.pick(rng)).collect();
        s[0] = self.words[rng.below(self.words.len())].as_str();
        format!("{}.", s.join(" "))
    }
}

/// Writes `files` Markdown files of `sections` headed sections of about `section_bytes` each.
fn corpus(dir: &Path, words: &Words, rng: &mut Rng, files: usize, sections: usize, section_bytes: usize) -> u64 {
    let mut bytes = 0;
    for f in 0..files {
        let sub = dir.join(format!("{:03}", f % 100));
        std::fs::create_dir_all(&sub).unwrap();
        let mut text = String::new();
        for s in 0..sections {
            text.push_str(&format!("## Note {f}.{s} {}\n\n", words.pick(rng)));
            let start = text.len();
            while text.len() - start < section_bytes {
                text.push_str(&words.sentence(rng));
                text.push(if rng.below(4) == 0 { '\n' } else { ' ' });
            }
            text.push_str("\n\n");
        }
        bytes += text.len() as u64;
        std::fs::write(sub.join(format!("{f:05}.md")), text).unwrap();
    }
    bytes
}

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
}

fn config(home: &Path) -> acp::config::Config {
    let home = home.display().to_string();
    acp::config::Config::load_with(&|name| (name == "ACP_HOME").then(|| home.clone()))
}

fn main() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let words = Words::new(&mut rng);

    // 1. 10,000 files, 50 MB: from scratch, then after one change.
    let home = tempfile::tempdir().unwrap();
    let bytes = corpus(&home.path().join("workspace/memory"), &words, &mut rng, 10_000, 5, 1_000);
    let memory = Memory::of(&config(home.path()));
    // Peak RSS above what the process holds before indexing (VmHWM reset through clear_refs).
    let idle = rss_kib("VmRSS:");
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let started = Instant::now();
    let synced = memory.sync().unwrap();
    let scratch = started.elapsed();
    let peak = rss_kib("VmHWM:").saturating_sub(idle);
    report(
        &format!("index {} files / {:.1} MB from scratch", synced.added, bytes as f64 / 1e6),
        format!("{:.2} s", scratch.as_secs_f64()),
        "≤ 10 s",
    );
    report("peak RSS while indexing, above idle", format!("{:.1} MiB", peak as f64 / 1024.0), "≤ 64 MiB");
    let mut again = Vec::new();
    for i in 0..11 {
        let path = home.path().join(format!("workspace/memory/{:03}/{:05}.md", i % 100, i));
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&format!("\nOne more line, number {i}.\n"));
        std::fs::write(&path, text).unwrap();
        let started = Instant::now();
        let synced = memory.sync().unwrap();
        again.push(started.elapsed());
        assert_eq!(synced.changed, 1);
    }
    again.sort();
    report("re-index after one file changed, no watcher (walk all)", ms(percentile(&again, 0.5)), "≤ 20 ms");
    // What the watcher of an open session does: the changed file alone.
    let mut watched = Vec::new();
    for i in 11..22 {
        let path = home.path().join(format!("workspace/memory/{:03}/{:05}.md", i % 100, i));
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&format!("\nOne more line, number {i}.\n"));
        std::fs::write(&path, text).unwrap();
        let started = Instant::now();
        let synced = memory.sync_paths(vec![path]).unwrap();
        watched.push(started.elapsed());
        assert_eq!(synced.changed, 1);
    }
    watched.sort();
    report("re-index after one file changed, watched (that file)", ms(percentile(&watched, 0.5)), "≤ 20 ms");

    // 2. 100,000 pieces: 20,000 files of five short sections.
    let home = tempfile::tempdir().unwrap();
    corpus(&home.path().join("workspace/memory"), &words, &mut rng, 20_000, 5, 250);
    let memory = Memory::of(&config(home.path()));
    let sources = memory.sources();
    let mut index = Index::open(memory.index_path()).unwrap();
    index.sync(&sources).unwrap();
    let pieces = index.counts().unwrap().chunks;
    let queries: Vec<String> = (0..300)
        .map(|_| (0..2 + rng.below(2)).map(|_| words.words[rng.below(3_000)].clone()).collect::<Vec<_>>().join(" "))
        .collect();
    let mut times = Vec::new();
    for q in &queries {
        let started = Instant::now();
        let hits = index.search(q, 6, 0.0).unwrap();
        times.push(started.elapsed());
        std::hint::black_box(hits);
    }
    times.sort();
    report(&format!("memory_search by words over {pieces} pieces: p50"), ms(percentile(&times, 0.5)), "—");
    report(&format!("memory_search by words over {pieces} pieces: p99"), ms(percentile(&times, 0.99)), "≤ 10 ms");

    // Hybrid: every piece embedded (768 dimensions, the stand-in's vectors), queries' vectors cached.
    let model = "bench/embed-768";
    let (missing, _) = index.unembedded(model, usize::MAX >> 1).unwrap();
    let vectors: Vec<(String, Vec<f32>)> =
        missing.into_iter().map(|(hash, text)| (hash, embeddings::vector_of(&text, 768))).collect();
    for batch in vectors.chunks(5_000) {
        index.store_vectors(model, batch, None).unwrap();
    }
    let before = rss_kib("VmRSS:");
    let cached: Vec<Vec<u8>> = queries
        .iter()
        .map(|q| index.store_vectors(model, &[], Some((q, &embeddings::vector_of(q, 768)))).unwrap().unwrap())
        .collect();
    // The first hybrid search loads the vectors; the rest reuse them.
    let started = Instant::now();
    index.hybrid(model, &queries[0], &cached[0], 6, 0.0).unwrap();
    let load = started.elapsed();
    let loaded = rss_kib("VmRSS:").saturating_sub(before);
    let mut times = Vec::new();
    for (q, v) in queries.iter().zip(&cached) {
        let started = Instant::now();
        let hits = index.hybrid(model, q, v, 6, 0.0).unwrap();
        times.push(started.elapsed());
        std::hint::black_box(hits);
    }
    times.sort();
    report("hybrid: load the vectors (first search of a process)", ms(load), "—");
    report("hybrid: memory the vectors take", format!("{:.1} MiB", loaded as f64 / 1024.0), "—");
    report(&format!("memory_search hybrid over {pieces} pieces: p50"), ms(percentile(&times, 0.5)), "—");
    report(&format!("memory_search hybrid over {pieces} pieces: p99"), ms(percentile(&times, 0.99)), "≤ 30 ms");

    // 3. Recall@5 on the labelled set.
    let (bm25, hybrid) = recall();
    report("recall@5 on the labelled set, BM25", format!("{bm25:.2}"), "—");
    report("recall@5 on the labelled set, hybrid (stand-in vectors)", format!("{hybrid:.2}"), "—");
}

/// Notes (one file each) and queries with the note that answers them.
const NOTES: &[&str] = &[
    "The staging database listens on port 6543 since the January move.",
    "Production deployments happen on Thursdays after the code freeze.",
    "Grace owns the billing service and its on-call rotation.",
    "The owner prefers tea in the morning and never drinks coffee after noon.",
    "Invoices are exported to accounting on the first Monday of each month.",
    "The VPN certificate expires in March; renewal needs the security team.",
    "Backups of the photo library run nightly to the NAS in the basement.",
    "Ada is allergic to peanuts; order lunch accordingly.",
    "The mobile app's crash reports go to the #mobile-alerts channel.",
    "Kubernetes clusters are upgraded one minor version per quarter.",
    "The dentist appointment moved to Friday at three.",
    "Passwords live in the team vault, never in the wiki.",
    "The analytics pipeline reprocesses yesterday's events at 2 am.",
    "Customer refunds above 500 euros need a manager's approval.",
    "The office router was replaced; the admin page is at 192.168.1.1.",
    "Marketing newsletters go out every second Tuesday.",
    "The search service caches results for ten minutes.",
    "Our flight to Lisbon leaves on the 14th from terminal 2.",
    "Interviews for the frontend role are scheduled by Priya.",
    "Logs older than ninety days are deleted from the cluster.",
    "The garden irrigation timer runs at six in the evening.",
    "Rotating the API signing keys requires restarting the gateway.",
    "The quarterly report is due to the board two weeks after quarter end.",
    "Bob maintains the legacy billing scripts written in Perl.",
    "Translations are managed in the localization platform, not in code.",
];

const QUERIES: &[(&str, usize)] = &[
    ("which port does the staging database use", 0),
    ("when are we deploying to production", 1),
    ("who is responsible for billing", 2),
    ("does the owner like coffee", 3),
    ("when do invoices get exported", 4),
    ("VPN certificate renewal", 5),
    ("photo backups schedule", 6),
    ("food allergies for team lunch", 7),
    ("where do crash reports of the mobile app go", 8),
    ("how often do we upgrade kubernetes", 9),
    ("when is the dentist", 10),
    ("where are passwords stored", 11),
    ("analytics reprocessing time", 12),
    ("who approves large refunds", 13),
    ("router admin page address", 14),
    ("newsletter cadence", 15),
    ("how long are search results cached", 16),
    ("flights to lisbon", 17),
    ("who schedules frontend interviews", 18),
    ("log retention", 19),
    ("irrigation schedule for the garden", 20),
    ("rotate signing keys", 21),
    ("deadline for the quarterly board report", 22),
    ("who maintains the perl scripts", 23),
    ("where do translations live", 24),
];

/// The share of queries whose note is among the first five results: by words alone, and hybrid.
fn recall() -> (f64, f64) {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("workspace/memory");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, note) in NOTES.iter().enumerate() {
        std::fs::write(dir.join(format!("note-{i:02}.md")), format!("{note}\n")).unwrap();
    }
    let memory = Memory::of(&config(home.path()));
    let mut index = Index::open(memory.index_path()).unwrap();
    index.sync(&memory.sources()).unwrap();
    let model = "bench/embed";
    let (missing, _) = index.unembedded(model, 1_000).unwrap();
    let vectors: Vec<(String, Vec<f32>)> =
        missing.into_iter().map(|(hash, text)| (hash, embeddings::vector(&text))).collect();
    index.store_vectors(model, &vectors, None).unwrap();
    let found =
        |hits: &[acp::memory::Hit], note: usize| hits.iter().any(|h| h.path == format!("memory/note-{note:02}.md"));
    let (mut words, mut hybrid) = (0, 0);
    for (query, note) in QUERIES {
        if found(&index.search(query, 5, 0.0).unwrap(), *note) {
            words += 1;
        }
        let v = index.store_vectors(model, &[], Some((query, &embeddings::vector(query)))).unwrap().unwrap();
        if found(&index.hybrid(model, query, &v, 5, 0.0).unwrap(), *note) {
            hybrid += 1;
        }
    }
    (words as f64 / QUERIES.len() as f64, hybrid as f64 / QUERIES.len() as f64)
}
