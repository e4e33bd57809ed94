//! Reading prompts as commands.
use super::*;

fn p(text: &str) -> Parsed {
    parse(&[UserBlock::text(text)])
}

#[test]
fn commands_and_their_arguments() {
    assert_eq!(p("/help"), Parsed::Command(Command::Help));
    assert_eq!(p("  /status \n"), Parsed::Command(Command::Status));
    assert_eq!(p("/context detail"), Parsed::Command(Command::Context { detail: true }));
    assert_eq!(p("/context"), Parsed::Command(Command::Context { detail: false }));
    assert_eq!(
        p("/compact keep the API decisions"),
        Parsed::Command(Command::Compact { instructions: Some("keep the API decisions".into()) })
    );
    assert_eq!(p("/model openai/gpt-5"), Parsed::Command(Command::Model(Some("openai/gpt-5".into()))));
    assert_eq!(p("/think high"), Parsed::Command(Command::Think(Some(ReasoningEffort::High))));
    assert_eq!(p("/think off"), Parsed::Command(Command::Think(None)));
    assert_eq!(p("/thinking XHIGH"), Parsed::Command(Command::Think(Some(ReasoningEffort::XHigh))));
    assert_eq!(
        p("/think minimal /model a/b"),
        Parsed::Command(Command::Directives {
            reasoning: Some(Some(ReasoningEffort::Minimal)),
            model: Some("a/b".into())
        })
    );
    // With other words they are the message's own (taken out later, in `inline`).
    assert_eq!(p("/think high why?"), Parsed::NotACommand);
    assert_eq!(p("/model a/b explain this"), Parsed::NotACommand);
    assert!(matches!(p("/verbose on"), Parsed::BadArgs(t) if t.contains("chat channel")));
    assert_eq!(p("/new"), Parsed::Command(Command::New { model: None }));
}

#[test]
fn bad_arguments_get_the_usage() {
    for (input, usage) in [
        ("/think hard", "/think off|minimal|low|medium|high|xhigh"),
        ("/think", "/think off|minimal|low|medium|high|xhigh"),
        ("/context everything", "/context [list|detail]"),
        ("/status now", "/status"),
    ] {
        let Parsed::BadArgs(text) = p(input) else { panic!("{input}") };
        assert!(text.contains(&format!("Usage: `{usage}`")), "{input}: {text}");
    }
}

#[test]
fn other_slashes_go_to_the_model() {
    assert_eq!(p("/usr/bin/env is missing"), Parsed::NotACommand);
    assert_eq!(p("/unknown"), Parsed::NotACommand);
    assert_eq!(p("please /help"), Parsed::NotACommand);
    let with_link = [
        UserBlock::text("/help"),
        UserBlock::ResourceLink {
            uri: "file:///a".into(),
            name: "a".into(),
            title: None,
            description: None,
            mime_type: None,
        },
    ];
    assert_eq!(parse(&with_link), Parsed::NotACommand);
}

#[test]
fn numbers_get_separators() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(1234567), "1,234,567");
}
