//! How many tokens OpenLang saves, measured: for each exchange of a corpus (JSON lines with
//! `id`, `kind`, `english`, `l2`, optional `l3`, `l1`), the English message and its L2 (and L3)
//! form are counted with the o200k_base and cl100k_base tokenizers, exactly as sent (the
//! `~openlang` first line included), and the English/L2 ratios summarised.
//!
//! cargo run --release --manifest-path tools/openlang-ratio/Cargo.toml -- fixtures/openlang/corpus.jsonl

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::Value;
use tiktoken_rs::CoreBPE;

struct Exchange {
    id: String,
    kind: String,
    english: String,
    l2: String,
    l3: Option<String>,
    l1: Vec<String>,
}

fn load(path: &str) -> Result<Vec<Exchange>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{path}:{}: {e}", n + 1))?;
        let field = |k: &str| v[k].as_str().map(str::to_owned);
        let missing = |k: &str| format!("{path}:{}: no \"{k}\"", n + 1);
        out.push(Exchange {
            id: field("id").ok_or_else(|| missing("id"))?,
            kind: field("kind").ok_or_else(|| missing("kind"))?,
            english: field("english").ok_or_else(|| missing("english"))?,
            l2: field("l2").ok_or_else(|| missing("l2"))?,
            l3: field("l3"),
            l1: v["l1"]
                .as_array()
                .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
                .unwrap_or_default(),
        });
    }
    Ok(out)
}

/// Linear interpolation between closest ranks (numpy's default); `sorted` is not empty.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

type MakeTokenizer = fn() -> Result<CoreBPE, String>;

fn count(bpe: &CoreBPE, text: &str) -> usize {
    bpe.encode_ordinary(text).len()
}

/// Token counts of one exchange: English, L2, L3, the L2 tokens spent on `~L1:` lines and those
/// of its `"quoted strings"` (paths, commands, messages: text English carries too).
struct Counts {
    english: usize,
    l2: usize,
    l3: Option<usize>,
    l1_lines: usize,
    strings: usize,
}

/// The `"quoted strings"` of the L2 lines of a message (not `~L1:` lines), quotes included.
fn quoted_strings(l2: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in l2.lines().filter(|l| !l.trim_start().starts_with("~L1:")) {
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'"' {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                out.push(&line[start..(i + 1).min(line.len())]);
            }
            i += 1;
        }
    }
    out
}

fn summary(out: &mut String, label: &str, rows: &[(&Exchange, usize, usize)]) {
    // rows: (exchange, English tokens, compact tokens)
    let english: usize = rows.iter().map(|r| r.1).sum();
    let compact: usize = rows.iter().map(|r| r.2).sum();
    let mut ratios: Vec<(f64, &str)> = rows.iter().map(|r| (r.1 as f64 / r.2 as f64, r.0.id.as_str())).collect();
    ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
    let sorted: Vec<f64> = ratios.iter().map(|r| r.0).collect();
    let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
    out.push_str(&format!("  {label} ({} exchanges)\n", rows.len()));
    out.push_str(&format!("    English tokens      {english:>7}\n"));
    out.push_str(&format!("    {:<20}{compact:>7}\n", format!("{} tokens", label.split(' ').next().unwrap_or(label))));
    out.push_str(&format!(
        "    aggregate ratio     {:>7.2}x   (English / compact, totals)\n",
        english as f64 / compact as f64
    ));
    out.push_str("    per-exchange ratio   min    p10    p25    med    p75    p90    max   mean\n");
    out.push_str(&format!(
        "                      {:>5.2}  {:>5.2}  {:>5.2}  {:>5.2}  {:>5.2}  {:>5.2}  {:>5.2}  {:>5.2}\n",
        sorted[0],
        percentile(&sorted, 10.0),
        percentile(&sorted, 25.0),
        percentile(&sorted, 50.0),
        percentile(&sorted, 75.0),
        percentile(&sorted, 90.0),
        sorted[sorted.len() - 1],
        mean
    ));
    let n = ratios.len().min(5);
    let list = |it: &mut dyn Iterator<Item = &(f64, &str)>| {
        it.map(|(r, id)| format!("{id} {r:.2}")).collect::<Vec<_>>().join(", ")
    };
    out.push_str(&format!("    lowest  {}\n", list(&mut ratios.iter().take(n))));
    out.push_str(&format!("    highest {}\n", list(&mut ratios.iter().rev().take(n))));
}

/// `--request FILE`: the tokens of a request's fixed part (`system` and `tools`, as sent).
fn request_tokens(path: &str) -> ExitCode {
    let body: Value = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let system: String = match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    };
    let tools = body["tools"].to_string();
    let Ok(bpe) = tiktoken_rs::o200k_base() else {
        eprintln!("the o200k_base tokenizer did not load");
        return ExitCode::FAILURE;
    };
    let (s, t) = (bpe.encode_ordinary(&system).len(), bpe.encode_ordinary(&tools).len());
    println!("first request (o200k_base): system prompt {s} + tool schemas {t} = {} tokens   (target ≤ 3,500)", s + t);
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--request") {
        return request_tokens(&std::env::args().nth(2).unwrap_or_default());
    }
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: openlang-ratio CORPUS.jsonl");
        return ExitCode::from(2);
    };
    let corpus = match load(&path) {
        Ok(c) if !c.is_empty() => c,
        Ok(_) => {
            eprintln!("{path}: no exchanges");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let tokenizers: [(&str, MakeTokenizer); 2] = [
        ("o200k_base", || tiktoken_rs::o200k_base().map_err(|e| e.to_string())),
        ("cl100k_base", || tiktoken_rs::cl100k_base().map_err(|e| e.to_string())),
    ];

    let mut out = String::new();
    let with_l3 = corpus.iter().filter(|e| e.l3.is_some()).count();
    out.push_str(&format!("corpus {path}: {} exchanges, {with_l3} with L3\n", corpus.len()));
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &corpus {
        *kinds.entry(e.kind.as_str()).or_default() += 1;
    }
    out.push_str(&format!("kinds: {}\n", kinds.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")));
    let chars_en: usize = corpus.iter().map(|e| e.english.chars().count()).sum();
    let chars_l2: usize = corpus.iter().map(|e| e.l2.chars().count()).sum();
    out.push_str(&format!(
        "characters: English {chars_en}, L2 {chars_l2} ({:.2}x)\n",
        chars_en as f64 / chars_l2 as f64
    ));

    for (name, make) in tokenizers {
        let bpe = match make() {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{name}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let counts: Vec<Counts> = corpus
            .iter()
            .map(|e| Counts {
                english: count(&bpe, &e.english),
                l2: count(&bpe, &e.l2),
                l3: e.l3.as_deref().map(|t| count(&bpe, t)),
                l1_lines: e.l2.lines().filter(|l| l.trim_start().starts_with("~L1:")).map(|l| count(&bpe, l) + 1).sum(),
                strings: quoted_strings(&e.l2).iter().map(|q| count(&bpe, q)).sum(),
            })
            .collect();
        out.push_str(&format!("\n== {name} ==\n"));
        let rows: Vec<_> = corpus.iter().zip(&counts).map(|(e, c)| (e, c.english, c.l2)).collect();
        summary(&mut out, "L2 (all)", &rows);

        let l1_tokens: usize = counts.iter().map(|c| c.l1_lines).sum();
        let l2_tokens: usize = counts.iter().map(|c| c.l2).sum();
        let string_tokens: usize = counts.iter().map(|c| c.strings).sum();
        out.push_str(&format!(
            "    of the L2 tokens, {l1_tokens} ({:.1}%) are in ~L1: lines, about {string_tokens} ({:.1}%) in \"quoted strings\"\n",
            100.0 * l1_tokens as f64 / l2_tokens as f64,
            100.0 * string_tokens as f64 / l2_tokens as f64
        ));

        out.push_str("    by kind              n  English     L2   ratio\n");
        for kind in kinds.keys() {
            let (n, en, l2) = corpus
                .iter()
                .zip(&counts)
                .filter(|(e, _)| e.kind == *kind)
                .fold((0, 0, 0), |(n, en, l2), (_, c)| (n + 1, en + c.english, l2 + c.l2));
            out.push_str(&format!("      {kind:<15}{n:>3}  {en:>7}  {l2:>5}  {:>5.2}x\n", en as f64 / l2 as f64));
        }
        out.push_str("    by English size      n  English     L2   ratio\n");
        for (label, lo, hi) in [("< 40 tokens", 0, 40), ("40-119", 40, 120), (">= 120", 120, usize::MAX)] {
            let (n, en, l2) = counts
                .iter()
                .filter(|c| (lo..hi).contains(&c.english))
                .fold((0, 0, 0), |(n, en, l2), c| (n + 1, en + c.english, l2 + c.l2));
            if n > 0 {
                out.push_str(&format!("      {label:<15}{n:>3}  {en:>7}  {l2:>5}  {:>5.2}x\n", en as f64 / l2 as f64));
            }
        }

        let rows: Vec<_> = corpus.iter().zip(&counts).filter_map(|(e, c)| c.l3.map(|l3| (e, c.english, l3))).collect();
        if !rows.is_empty() {
            out.push('\n');
            summary(&mut out, "L3 (where present)", &rows);
            let (en, l2, l3) = corpus
                .iter()
                .zip(&counts)
                .filter_map(|(_, c)| c.l3.map(|l3| (c.english, c.l2, l3)))
                .fold((0, 0, 0), |(a, b, c), (en, l2, l3)| (a + en, b + l2, c + l3));
            out.push_str(&format!(
                "    same exchanges: English {en}, L2 {l2}, L3 {l3}  (English/L2 {:.2}x, L2/L3 {:.2}x)\n",
                en as f64 / l2 as f64,
                l2 as f64 / l3 as f64
            ));
        }
    }

    let needing: Vec<&Exchange> = corpus.iter().filter(|e| !e.l1.is_empty()).collect();
    out.push_str(&format!("\nL1: {} of {} exchanges needed it\n", needing.len(), corpus.len()));
    for e in needing {
        for what in &e.l1 {
            out.push_str(&format!("  {:<28} {what}\n", e.id));
        }
    }
    print!("{out}");
    ExitCode::SUCCESS
}
