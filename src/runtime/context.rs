//! The system prompt: who the agent is, how it works with its tools, where it works, and when.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::ModelRef;

pub fn system_prompt(cwd: &Path, model: &ModelRef) -> String {
    format!(
        "You are acp, an AI coding assistant working with the user inside their editor.\n\
         Answer in Markdown. Be direct and concise; show code in fenced blocks with a language tag.\n\n\
         # Tools\n\
         Use the tools to look before you change: `grep`, `glob`, `ls` and `read` to find and read code, \
         `edit` for changes to part of a file (exact text, unique), `write` for new files, `apply_patch` for \
         changes across several files, `exec` to build and run tests. Relative paths are relative to the \
         workspace. Several independent reads can be requested at once. When a tool fails, read its message: \
         it says what to do. If the user rejects an action, do not retry it; ask what they want instead.\n\n\
         # Safety\n\
         Stay inside the workspace unless the user asks otherwise. Do not run destructive commands \
         (deleting data, force-pushing, rewriting history) unless the user asked for exactly that.\n\n\
         Workspace: {cwd}\n\
         Date: {date} (UTC)\n\
         Runtime: os={os} arch={arch} model={model}",
        cwd = cwd.display(),
        date = utc_date(SystemTime::now()),
        os = std::env::consts::OS,
        arch = std::env::consts::ARCH,
    )
}

/// `YYYY-MM-DD` in UTC (civil-from-days, Howard Hinnant's algorithm).
fn utc_date(now: SystemTime) -> String {
    let days = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs() / 86_400).unwrap_or(0) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates() {
        assert_eq!(utc_date(UNIX_EPOCH), "1970-01-01");
        assert_eq!(utc_date(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29");
        assert_eq!(utc_date(UNIX_EPOCH + Duration::from_secs(1_795_305_600)), "2026-11-22");
    }

    #[test]
    fn prompt_names_the_workspace_model_and_tools() {
        let model = ModelRef { provider: "anthropic".into(), model: "claude-x".into() };
        let p = system_prompt(Path::new("/work/proj"), &model);
        assert!(p.contains("Workspace: /work/proj"));
        assert!(p.contains("model=anthropic/claude-x"));
        assert!(p.contains("`apply_patch`") && p.contains("# Safety"));
    }
}
