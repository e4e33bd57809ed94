//! A tool call's previous state and its new one → only the fields that changed, so each update
//! carries what is new and nothing else.

use serde_json::Value;

use crate::tools::{Location, ToolCallState, ToolContent, ToolKind, ToolStatus};

/// The changed fields of a tool call (`None`: unchanged). Lists replace wholesale.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Patch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<Location>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolContent>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Value>,
}

impl Patch {
    pub fn is_empty(&self) -> bool {
        *self == Patch::default()
    }

    /// Brings `state` up to date.
    pub fn apply(self, state: &mut ToolCallState) {
        if let Some(v) = self.title {
            state.title = v;
        }
        if let Some(v) = self.kind {
            state.kind = v;
        }
        if let Some(v) = self.status {
            state.status = v;
        }
        if let Some(v) = self.locations {
            state.locations = v;
        }
        if let Some(v) = self.content {
            state.content = v;
        }
        if let Some(v) = self.raw_input {
            state.raw_input = v;
        }
        if let Some(v) = self.raw_output {
            state.raw_output = Some(v);
        }
    }
}

pub fn changes(prev: &ToolCallState, next: &ToolCallState) -> Patch {
    fn changed<T: PartialEq + Clone>(a: &T, b: &T) -> Option<T> {
        (a != b).then(|| b.clone())
    }
    Patch {
        title: changed(&prev.title, &next.title),
        kind: changed(&prev.kind, &next.kind),
        status: changed(&prev.status, &next.status),
        locations: changed(&prev.locations, &next.locations),
        content: changed(&prev.content, &next.content),
        raw_input: changed(&prev.raw_input, &next.raw_input),
        raw_output: if prev.raw_output == next.raw_output { None } else { next.raw_output.clone() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state() -> ToolCallState {
        ToolCallState {
            id: "c1".into(),
            name: "edit".into(),
            title: "Edit a.rs".into(),
            kind: ToolKind::Edit,
            status: ToolStatus::Pending,
            locations: vec![Location::file("/w/a.rs")],
            raw_input: json!({"path": "a.rs"}),
            content: vec![ToolContent::Text("diff".into())],
            raw_output: None,
            streams_output: false,
        }
    }

    #[test]
    fn only_what_changed() {
        let a = state();
        assert!(changes(&a, &a).is_empty());
        let mut b = a.clone();
        b.status = ToolStatus::InProgress;
        assert_eq!(changes(&a, &b), Patch { status: Some(ToolStatus::InProgress), ..Patch::default() });
        let mut c = b.clone();
        c.status = ToolStatus::Completed;
        c.content = vec![ToolContent::Text("done".into())];
        c.raw_output = Some(json!({"ok": true}));
        let p = changes(&b, &c);
        assert_eq!(p.status, Some(ToolStatus::Completed));
        assert_eq!(p.content, Some(vec![ToolContent::Text("done".into())]));
        assert_eq!(p.raw_output, Some(json!({"ok": true})));
        assert_eq!((p.title.clone(), p.kind, p.locations.clone(), p.raw_input.clone()), (None, None, None, None));
        let mut applied = b.clone();
        p.apply(&mut applied);
        assert_eq!(applied, c);
    }
}
