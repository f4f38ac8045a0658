//! Field paths and field sets, in the two spellings the real server uses: `FieldsV1`
//! (`{"f:data": {"f:a": {}}}`, stored in `managedFields`) and the dotted form of conflict
//! messages (`.spec.containers[name="a"].image`).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Step {
    /// A field of a map: `f:name`.
    Field(String),
    /// An item of a list keyed by its merge key: `k:{"name":"a"}` (the key object as
    /// compact JSON).
    Key(String),
    /// An item of a set: `v:"x"` (the item as compact JSON).
    Value(String),
}

/// A path from the object's root.
pub(crate) type Path = Vec<Step>;

/// The fields a manager owns.
pub(crate) type FieldSet = BTreeSet<Path>;

impl Step {
    fn encoded(&self) -> String {
        match self {
            Self::Field(name) => format!("f:{name}"),
            Self::Key(key) => format!("k:{key}"),
            Self::Value(value) => format!("v:{value}"),
        }
    }

    fn decoded(text: &str) -> Option<Self> {
        let (kind, rest) = text.split_at_checked(2)?;
        match kind {
            "f:" => Some(Self::Field(rest.to_owned())),
            "k:" => Some(Self::Key(rest.to_owned())),
            "v:" => Some(Self::Value(rest.to_owned())),
            _ => None,
        }
    }
}

/// `set` in the `FieldsV1` shape: a member with members below it carries `".": {}`.
pub(crate) fn to_fields_v1(set: &FieldSet) -> Value {
    #[derive(Default)]
    struct Node {
        member: bool,
        below: std::collections::BTreeMap<String, Node>,
    }
    fn render(node: &Node) -> Value {
        let mut map = Map::new();
        if node.member && !node.below.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (step, child) in &node.below {
            map.insert(step.clone(), render(child));
        }
        Value::Object(map)
    }
    let mut root = Node::default();
    for path in set {
        let mut node = &mut root;
        for step in path {
            node = node.below.entry(step.encoded()).or_default();
        }
        node.member = true;
    }
    render(&root)
}

/// The set a `FieldsV1` value spells (steps it cannot read are skipped).
pub(crate) fn from_fields_v1(value: &Value) -> FieldSet {
    fn walk(value: &Value, path: &mut Path, out: &mut FieldSet) {
        let Some(map) = value.as_object() else {
            return;
        };
        if map.is_empty() || map.contains_key(".") {
            out.insert(path.clone());
        }
        for (text, below) in map {
            if let Some(step) = Step::decoded(text) {
                path.push(step);
                walk(below, path, out);
                path.pop();
            }
        }
    }
    let mut out = FieldSet::new();
    if let Some(map) = value.as_object() {
        for (text, below) in map {
            if let Some(step) = Step::decoded(text) {
                let mut path = vec![step];
                walk(below, &mut path, &mut out);
            }
        }
    }
    out
}

/// The dotted spelling of a conflict message: `.data.a`, `.spec.containers[name="a"]`,
/// `.metadata.finalizers[="x"]`.
pub(crate) fn dotted(path: &Path) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            Step::Key(key) => {
                let fields: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            Step::Value(value) => out.push_str(&format!("[={value}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn field(name: &str) -> Step {
        Step::Field(name.into())
    }

    #[test]
    fn fields_v1_round_trips_the_real_servers_spelling() {
        // As kube-apiserver 1.36 recorded a Deployment applied by one manager.
        let recorded = json!({
            "f:metadata": {"f:finalizers": {"v:\"x/y\"": {}}},
            "f:spec": {"f:selector": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}},
            }}}},
        });
        let set = from_fields_v1(&recorded);
        assert!(set.contains(&vec![field("spec"), field("selector")]));
        let item = vec![
            field("spec"),
            field("template"),
            field("spec"),
            field("containers"),
            Step::Key("{\"name\":\"a\"}".into()),
        ];
        assert!(set.contains(&item));
        assert!(!set.contains(&vec![field("spec")]), "no `.`: not a member");
        assert_eq!(to_fields_v1(&set), recorded);
    }

    #[test]
    fn paths_read_as_in_the_real_servers_conflict_messages() {
        let path = vec![
            field("spec"),
            field("containers"),
            Step::Key("{\"name\":\"a\"}".into()),
            field("image"),
        ];
        assert_eq!(dotted(&path), ".spec.containers[name=\"a\"].image");
        let finalizer = vec![
            field("metadata"),
            field("finalizers"),
            Step::Value("\"x\"".into()),
        ];
        assert_eq!(dotted(&finalizer), ".metadata.finalizers[=\"x\"]");
    }
}
