//! Hooks as real shell commands: each ending of the contract, matchers, the time limit, bounded
//! output, parallel runs.

use super::*;
use serde_json::json;

fn config(hooks: &[(HookEvent, Option<&str>, &str, Option<u64>)]) -> Config {
    let home = tempfile::tempdir().unwrap().path().display().to_string();
    let mut config = Config::load_with(&|name| (name == "ACP_HOME").then(|| home.clone()));
    config.hooks = hooks
        .iter()
        .map(|(event, matcher, command, timeout)| HookConfig {
            event: *event,
            matcher: matcher.map(str::to_owned),
            command: (*command).to_owned(),
            timeout_sec: *timeout,
            kind: None,
            workspace: false,
        })
        .collect();
    config
}

fn run_all(config: &Config, event: HookEvent, subject: Option<&str>, input: Value) -> Vec<HookResult> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hooks = matching(&config.hooks, event, subject);
    rt.block_on(run(config, &hooks, &input, dir.path())).into_iter().map(|r| r.result).collect()
}

#[test]
fn each_ending_of_the_contract() {
    let deny_rm =
        r#"input=$(cat); case "$input" in *'"rm '*) echo "rm is not allowed here" >&2; exit 2;; esac; exit 0"#;
    let c = config(&[
        (HookEvent::PreToolUse, Some("exec"), deny_rm, None),
        (
            HookEvent::PreToolUse,
            Some("write|edit"),
            r#"echo '{"decision":"ask","reason":"writes are reviewed"}'"#,
            None,
        ),
        (HookEvent::UserPromptSubmit, None, "echo 'The repository uses tabs.'", None),
        (HookEvent::Stop, None, "echo broken >&2; exit 3", None),
    ]);
    let rm = json!({"tool_name": "exec", "tool_input": {"command": "rm -rf build"}});
    assert_eq!(
        run_all(&c, HookEvent::PreToolUse, Some("exec"), rm),
        [HookResult::Blocked("rm is not allowed here".into())]
    );
    let ls = json!({"tool_name": "exec", "tool_input": {"command": "ls"}});
    assert_eq!(run_all(&c, HookEvent::PreToolUse, Some("exec"), ls), [HookResult::Done(Said::default())]);
    let [HookResult::Done(said)] = &run_all(&c, HookEvent::PreToolUse, Some("edit"), json!({}))[..] else { panic!() };
    assert_eq!((said.decision.as_deref(), said.reason.as_deref()), (Some("ask"), Some("writes are reviewed")));
    assert!(run_all(&c, HookEvent::PreToolUse, Some("read"), json!({})).is_empty(), "no matcher matches");
    let [HookResult::Done(said)] = &run_all(&c, HookEvent::UserPromptSubmit, None, json!({}))[..] else { panic!() };
    assert_eq!(said.context.as_deref(), Some("The repository uses tabs."));
    assert_eq!(run_all(&c, HookEvent::Stop, None, json!({})), [HookResult::Failed("exit 3: broken".into())]);
}

#[test]
fn a_hook_past_its_time_is_killed_with_its_group_and_output_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("survived");
    let slow = format!("(sleep 3; touch {}) & sleep 30", marker.display());
    let c = config(&[
        (HookEvent::Stop, None, &slow, Some(1)),
        (HookEvent::PostToolUse, None, "head -c 100000000 /dev/zero | tr '\\0' x", None),
    ]);
    let [HookResult::Failed(e)] = &run_all(&c, HookEvent::Stop, None, json!({}))[..] else { panic!() };
    assert!(e.contains("ran past its 1 s"), "{e}");
    std::thread::sleep(Duration::from_millis(3500));
    assert!(!marker.exists(), "what the hook started was killed with it");
    let [HookResult::Done(said)] = &run_all(&c, HookEvent::PostToolUse, None, json!({}))[..] else { panic!() };
    assert_eq!(said.context.as_ref().map(String::len), Some(OUTPUT_KEPT), "100 MB read, 64 KiB kept");
}

#[test]
fn a_hook_is_done_when_it_exits_whatever_it_left_holding_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("left");
    // Its background child holds stdout open: the answer still counts, and the child goes.
    let leaves =
        format!(r#"(sleep 2; touch {}) & echo '{{"decision": "deny", "reason": "not today"}}'"#, marker.display());
    let c = config(&[(HookEvent::PreToolUse, None, &leaves, Some(600))]);
    let [HookResult::Done(said)] = &run_all(&c, HookEvent::PreToolUse, Some("exec"), json!({}))[..] else { panic!() };
    assert_eq!((said.decision.as_deref(), said.reason.as_deref()), (Some("deny"), Some("not today")));
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!marker.exists(), "what it left running was killed");
}

#[test]
fn hooks_of_one_event_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("flag");
    // The first waits for what the second does: one after the other, it would run past its time.
    let waits = format!("for i in $(seq 100); do [ -e {0} ] && exit 0; sleep 0.05; done; exit 1", flag.display());
    let makes = format!("touch {}", flag.display());
    let c = config(&[(HookEvent::SessionStart, None, &waits, Some(30)), (HookEvent::SessionStart, None, &makes, None)]);
    assert_eq!(
        run_all(&c, HookEvent::SessionStart, None, json!({})),
        [HookResult::Done(Said::default()), HookResult::Done(Said::default())]
    );
}

#[test]
fn a_block_wins_then_ask_then_allow() {
    let ran = |results: Vec<HookResult>| -> Vec<Ran> {
        results
            .into_iter()
            .map(|result| Ran { command: "x".into(), result, newly_failed: false, workspace: false })
            .collect()
    };
    let done = |decision: Option<&str>, context: Option<&str>| {
        HookResult::Done(Said {
            decision: decision.map(str::to_owned),
            context: context.map(str::to_owned),
            ..Said::default()
        })
    };
    assert_eq!(
        verdict(&ran(vec![done(Some("allow"), None), HookResult::Blocked("no".into())])),
        Verdict::Block("no".into())
    );
    assert_eq!(verdict(&ran(vec![done(Some("allow"), None), done(Some("ask"), None)])), Verdict::Ask(None));
    assert_eq!(verdict(&ran(vec![done(Some("allow"), None), HookResult::Failed("x".into())])), Verdict::Allow);
    assert_eq!(verdict(&ran(vec![done(None, Some("a")), done(None, Some("b"))])), Verdict::Go(Some("a\n\nb".into())));
    assert_eq!(verdict(&ran(vec![HookResult::Failed("x".into())])), Verdict::Go(None));
    // A workspace's hook may block or ask, never allow (the model can change what it runs).
    let workspace = |result| Ran { command: "w".into(), result, newly_failed: false, workspace: true };
    assert_eq!(verdict(&[workspace(done(Some("allow"), Some("c")))]), Verdict::Go(Some("c".into())));
    assert_eq!(verdict(&[workspace(done(Some("ask"), None))]), Verdict::Ask(None));
    assert_eq!(verdict(&[workspace(HookResult::Blocked("no".into()))]), Verdict::Block("no".into()));
}
