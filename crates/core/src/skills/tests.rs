//! Skills discovery: precedence, the bundled skill, gating, the prompt section, broken files.

use super::*;

fn skill(dir: &Path, folder: &str, front: &str) -> PathBuf {
    let path = dir.join(folder).join("SKILL.md");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("---\n{front}\n---\n# Instructions\nDo the thing.\n")).unwrap();
    path
}

fn names(catalog: &Catalog) -> Vec<(String, Source)> {
    catalog.active().map(|s| (s.name.clone(), s.source)).collect()
}

#[test]
fn workspace_beats_user_beats_bundled_and_the_clash_is_reported() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let ws = skill(&cwd.path().join(".acp/skills"), "review", "name: review\ndescription: Review a change");
    skill(&cwd.path().join(".claude/skills"), "review", "name: review\ndescription: Another review");
    skill(&cwd.path().join(".agents/skills"), "deploy", "name: deploy\ndescription: Ship it");
    skill(&home.path().join("skills"), "review", "name: review\ndescription: The user's review");
    skill(&home.path().join("skills"), "notes", "name: notes\ndescription: Keep notes");
    skill(&home.path().join("skills"), "openlang", "name: openlang\ndescription: My own OpenLang");
    let catalog = Catalog::load(home.path(), cwd.path(), &SkillsConfig::default());
    assert_eq!(
        names(&catalog),
        [
            ("review".into(), Source::Workspace),
            ("deploy".into(), Source::Workspace),
            ("notes".into(), Source::User),
            ("openlang".into(), Source::User),
        ]
    );
    let shadowed: Vec<&Found> = catalog.found.iter().filter(|f| matches!(f.status, Status::Shadowed(_))).collect();
    assert_eq!(shadowed.len(), 3, "{shadowed:#?}");
    assert!(shadowed.iter().all(|f| f.status != Status::Active));
    assert_eq!(shadowed[0].status, Status::Shadowed(ws.clone()));
    let report = catalog.report();
    assert!(report.contains("- openlang (bundled): a skill of the same name wins:"), "{report}");
}

#[test]
fn the_bundled_openlang_skill_is_written_out_and_offered() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let catalog = Catalog::load(home.path(), cwd.path(), &SkillsConfig::default());
    let openlang = catalog.active().find(|s| s.name == "openlang").expect("bundled");
    assert_eq!(openlang.source, Source::Bundled);
    let text = std::fs::read_to_string(&openlang.path).unwrap();
    assert!(text.contains("~openlang") && openlang.path.starts_with(home.path().join("skills/.bundled")));
    let off = SkillsConfig { bundled: Some(false), ..SkillsConfig::default() };
    assert!(Catalog::load(home.path(), cwd.path(), &off).found.is_empty(), "bundled = false leaves them out");
    // A damaged copy is written out again; one that cannot be written is not offered (the model
    // could not read it).
    std::fs::write(&openlang.path, "cut sho").unwrap();
    assert_eq!(
        names(&Catalog::load(home.path(), cwd.path(), &SkillsConfig::default())),
        [("openlang".into(), Source::Bundled)]
    );
    assert_eq!(std::fs::read_to_string(&openlang.path).unwrap(), text);
    let blocked = tempfile::tempdir().unwrap();
    std::fs::write(blocked.path().join("skills"), "a file where the folder goes").unwrap();
    assert_eq!(names(&Catalog::load(blocked.path(), cwd.path(), &SkillsConfig::default())), []);
}

#[test]
fn needs_gate_skills_and_config_disables_them() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let dir = cwd.path().join(".acp/skills");
    skill(&dir, "shell", "name: shell\ndescription: Uses sh\nmetadata:\n  acp:\n    requires:\n      bins: [sh]");
    skill(
        &dir,
        "k8s",
        "name: k8s\ndescription: Uses kubectl\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"kubectl-not-here\"]}}}",
    );
    skill(
        &dir,
        "either",
        "name: either\ndescription: Any\nmetadata:\n  acp:\n    requires:\n      anyBins: [nope-a, nope-b]",
    );
    skill(
        &dir,
        "keyed",
        "name: keyed\ndescription: Needs a key\nmetadata:\n  acp:\n    requires:\n      env: [ACP_TEST_SURELY_UNSET_VAR]",
    );
    skill(&dir, "mac", "name: mac\ndescription: macOS only\nmetadata:\n  openclaw:\n    os: [darwin]");
    skill(&dir, "off", "name: off\ndescription: Turned off");
    let config = SkillsConfig { disabled: vec!["off".into()], ..SkillsConfig::default() };
    let catalog = Catalog::load(home.path(), cwd.path(), &config);
    let status = |name: &str| catalog.found.iter().find(|f| f.skill.name == name).unwrap().status.clone();
    assert_eq!(status("shell"), Status::Active);
    assert_eq!(status("k8s"), Status::Gated("needs `kubectl-not-here` on PATH".into()));
    assert_eq!(status("either"), Status::Gated("needs one of `nope-a`, `nope-b` on PATH".into()));
    assert_eq!(status("keyed"), Status::Gated("needs the environment variable ACP_TEST_SURELY_UNSET_VAR".into()));
    assert_eq!(status("mac"), Status::Gated("only for darwin (this is linux)".into()));
    assert_eq!(status("off"), Status::Disabled);
    let report = catalog.report();
    assert!(report.contains("- off (workspace): disabled in config.toml ([skills] disabled)"), "{report}");
    assert!(report.contains("- k8s (workspace): needs `kubectl-not-here` on PATH"), "{report}");
}

#[test]
fn the_prompt_lists_names_descriptions_and_paths_only() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let path = skill(
        &cwd.path().join(".acp/skills"),
        "review",
        "name: review\ndescription: >\n  Review a <change> &\n  say what breaks",
    );
    let config = SkillsConfig { bundled: Some(false), ..SkillsConfig::default() };
    let section = Catalog::load(home.path(), cwd.path(), &config).prompt_section().unwrap();
    assert!(section.contains(&format!(
        "<skill><name>review</name><description>Review a &lt;change&gt; &amp; say what breaks</description><location>{}</location></skill>",
        path.display()
    )), "{section}");
    assert!(!section.contains("Do the thing"), "never the instructions themselves");
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(Catalog::load(home.path(), empty.path(), &config).prompt_section(), None);
}

#[test]
fn broken_skills_are_reported_not_offered() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let dir = cwd.path().join(".acp/skills");
    std::fs::create_dir_all(dir.join("plain")).unwrap();
    std::fs::write(dir.join("plain/SKILL.md"), "# no front matter\n").unwrap();
    skill(&dir, "nodesc", "name: nodesc");
    skill(&dir, "Bad_Name", "name: Bad_Name\ndescription: x");
    skill(&dir, "yaml", "name: [unclosed\ndescription: x");
    let huge = format!("name: huge\ndescription: x\nmetadata: {}", "[".repeat(20_000));
    skill(&dir, "huge", &huge);
    std::fs::create_dir_all(dir.join("open")).unwrap();
    std::fs::write(dir.join("open/SKILL.md"), "---\nname: open\ndescription: x\n").unwrap();
    skill(&dir, "from-folder", "description: named after its folder");
    let config = SkillsConfig { bundled: Some(false), ..SkillsConfig::default() };
    let catalog = Catalog::load(home.path(), cwd.path(), &config);
    assert_eq!(names(&catalog), [("from-folder".into(), Source::Workspace)]);
    let reasons: Vec<String> = catalog.broken.iter().map(|b| b.reason.clone()).collect();
    assert_eq!(reasons.len(), 6, "{reasons:#?}");
    assert!(reasons.iter().any(|r| r.contains("front matter is longer than 16 KiB")));
    assert!(reasons.iter().any(|r| r.contains("must start with a `---` line")));
    assert!(reasons.iter().any(|r| r.contains("no description")));
    assert!(reasons.iter().any(|r| r.contains("name `Bad_Name`")));
    assert!(reasons.iter().any(|r| r.starts_with("front matter:")));
    assert!(reasons.iter().any(|r| r.contains("no closing `---`")));
}

#[test]
fn an_edited_skill_is_read_again() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let config = SkillsConfig { bundled: Some(false), ..SkillsConfig::default() };
    let path = skill(&cwd.path().join(".acp/skills"), "one", "name: one\ndescription: first");
    assert_eq!(Catalog::load(home.path(), cwd.path(), &config).active().next().unwrap().description, "first");
    std::fs::write(&path, "---\nname: one\ndescription: second, longer\n---\n").unwrap();
    assert_eq!(Catalog::load(home.path(), cwd.path(), &config).active().next().unwrap().description, "second, longer");
}
