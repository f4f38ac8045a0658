//! Server-side `Table` output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), the
//! shape `kubectl get` asks for: column definitions and one row of cells per object, with
//! the columns the real server prints for the built-in types (pods: Ready, Status,
//! Restarts, ..., and what `-o wide` adds), a CRD's `additionalPrinterColumns`, and
//! Name/Age for the rest. In a watch, each event carries a one-row Table; only the first
//! has columns.

use std::time::SystemTime;

use serde_json::{Value, json};

use crate::registry::ResourceType;

/// Whether the `Accept` header asks for a Table.
pub(crate) fn wanted(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    })
}

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub(crate) fn from_query(value: Option<&str>) -> Self {
        match value {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// A column: its definition, and where a custom resource's cell is read (`None`: a
/// built-in kind's cell, by name).
struct Column {
    name: String,
    type_: String,
    format: String,
    priority: i64,
    description: String,
    json_path: Option<String>,
}

/// A built-in column: (name, type, format, priority).
type Builtin = (&'static str, &'static str, &'static str, i64);

const NAME: Builtin = ("Name", "string", "name", 0);
const AGE: Builtin = ("Age", "string", "", 0);

/// The real server's own description of the Name column.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when \
    creating resources, although some resources may allow a client to request the \
    generation of an appropriate name automatically. Name is primarily intended for creation \
    idempotence and configuration definition. Cannot be updated. More info: \
    https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// The columns of `ty`'s Table, those `-o wide` adds (priority 1) included, as
/// kube-apiserver 1.36 defines them.
fn columns(ty: &ResourceType) -> Vec<Column> {
    let builtin = |(name, type_, format, priority): Builtin| Column {
        name: name.to_owned(),
        type_: type_.to_owned(),
        format: format.to_owned(),
        priority,
        description: if name == "Name" {
            NAME_DESCRIPTION.to_owned()
        } else {
            String::new()
        },
        json_path: None,
    };
    if !ty.printer_columns.is_empty() {
        // A CRD's printer columns replace Age (which it may list itself).
        let printed = ty.printer_columns.iter().map(|c| Column {
            name: c.name.clone(),
            type_: c.type_.clone(),
            format: c.format.clone(),
            priority: c.priority,
            description: format!(
                "Custom resource definition column (in JSONPath format): {}",
                c.json_path
            ),
            json_path: Some(c.json_path.clone()),
        });
        return std::iter::once(builtin(NAME)).chain(printed).collect();
    }
    let text = |name| (name, "string", "", 0);
    let wide = |name| (name, "string", "", 1);
    let list: Vec<Builtin> = match (ty.gvr.group.as_str(), ty.gvr.resource.as_str()) {
        ("", "pods") => vec![
            NAME,
            text("Ready"),
            text("Status"),
            text("Restarts"),
            AGE,
            wide("IP"),
            wide("Node"),
            wide("Nominated Node"),
            wide("Readiness Gates"),
        ],
        ("", "configmaps") => vec![NAME, text("Data"), AGE],
        ("", "secrets") => vec![NAME, text("Type"), text("Data"), AGE],
        ("", "namespaces") => vec![NAME, text("Status"), AGE],
        ("", "nodes") => vec![NAME, text("Status"), text("Roles"), AGE, text("Version")],
        ("apps", "deployments") => vec![
            NAME,
            text("Ready"),
            text("Up-to-date"),
            text("Available"),
            AGE,
            wide("Containers"),
            wide("Images"),
            wide("Selector"),
        ],
        _ => vec![NAME, AGE],
    };
    list.into_iter().map(builtin).collect()
}

/// A custom resource's cell: the value at `path` (`.spec.size`; `None` when absent), a
/// `date` as an age.
fn printed_cell(column: &Column, path: &str, object: &Value, now: SystemTime) -> Value {
    let pointer = path.trim_start_matches('.').replace('.', "/");
    let value = object
        .pointer(&format!("/{pointer}"))
        .cloned()
        .unwrap_or(Value::Null);
    match (column.type_.as_str(), value.as_str()) {
        ("date", Some(when)) => json!(age(Some(when), now)),
        _ => value,
    }
}

/// The containers' names or images, comma-separated, as `-o wide` shows them.
fn containers(spec: &Value, field: &str) -> Value {
    let all = spec["template"]["spec"]["containers"]
        .as_array()
        .map_or(&[][..], |c| c);
    let joined: Vec<&str> = all.iter().filter_map(|c| c[field].as_str()).collect();
    json!(joined.join(","))
}

/// A label selector as kubectl prints it: `matchLabels` as `k=v`, sorted, comma-separated.
fn selector(spec: &Value) -> Value {
    let labels = spec["selector"]["matchLabels"].as_object();
    let mut pairs: Vec<String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    json!(if pairs.is_empty() {
        "<none>".to_owned()
    } else {
        pairs.join(",")
    })
}

/// The cell of `column` for `object`.
fn cell(column: &str, object: &Value, now: SystemTime) -> Value {
    let (meta, spec, status) = (&object["metadata"], &object["spec"], &object["status"]);
    let count = |v: &Value| v.as_object().map_or(0, |m| m.len());
    let int = |v: &Value| json!(v.as_i64().unwrap_or(0));
    let text_or_none = |v: &Value| json!(v.as_str().unwrap_or("<none>"));
    match column {
        "Name" => meta["name"].clone(),
        "Age" => json!(age(meta["creationTimestamp"].as_str(), now)),
        "Ready" if object["kind"] == "Pod" => {
            let statuses = status["containerStatuses"].as_array();
            let ready = statuses.map_or(0, |s| s.iter().filter(|c| c["ready"] == true).count());
            let total = spec["containers"].as_array().map_or(0, Vec::len);
            json!(format!("{ready}/{total}"))
        }
        "Ready" => json!(format!(
            "{}/{}",
            status["readyReplicas"].as_i64().unwrap_or(0),
            spec["replicas"].as_i64().unwrap_or(1)
        )),
        "Status" if object["kind"] == "Node" => {
            let ready = status["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            json!(if ready { "Ready" } else { "NotReady" })
        }
        "Status" if !meta["deletionTimestamp"].is_null() => json!("Terminating"),
        "Status" => json!(status["phase"].as_str().unwrap_or("Unknown")),
        "Restarts" => {
            let restarts: i64 = status["containerStatuses"].as_array().map_or(0, |s| {
                s.iter().filter_map(|c| c["restartCount"].as_i64()).sum()
            });
            json!(restarts.to_string())
        }
        "IP" => text_or_none(&status["podIP"]),
        "Node" => text_or_none(&spec["nodeName"]),
        "Nominated Node" => text_or_none(&status["nominatedNodeName"]),
        "Readiness Gates" => match spec["readinessGates"].as_array() {
            Some(gates) if !gates.is_empty() => {
                let conditions = status["conditions"].as_array().map_or(&[][..], |c| c);
                let ready = gates
                    .iter()
                    .filter(|g| {
                        conditions
                            .iter()
                            .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
                    })
                    .count();
                json!(format!("{ready}/{}", gates.len()))
            }
            _ => json!("<none>"),
        },
        "Containers" => containers(spec, "name"),
        "Images" => containers(spec, "image"),
        "Selector" => selector(spec),
        "Data" => json!(count(&object["data"]) + count(&object["binaryData"])),
        "Type" => json!(object["type"].as_str().unwrap_or("Opaque")),
        "Roles" => json!("<none>"),
        "Version" => json!(status["nodeInfo"]["kubeletVersion"].as_str().unwrap_or("")),
        "Up-to-date" => int(&status["updatedReplicas"]),
        "Available" => int(&status["availableReplicas"]),
        _ => Value::Null,
    }
}

/// A Table of `objects` (full objects, with kind and apiVersion).
pub(crate) fn table(
    ty: &ResourceType,
    objects: &[Value],
    metadata: Value,
    include: Include,
    with_columns: bool,
) -> Value {
    let columns = columns(ty);
    let now = SystemTime::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let cells: Vec<Value> = columns
                .iter()
                .map(|c| match &c.json_path {
                    Some(path) => printed_cell(c, path, object, now),
                    None => cell(&c.name, object, now),
                })
                .collect();
            let mut row = json!({"cells": cells});
            match include {
                Include::None => {}
                Include::Metadata => {
                    row["object"] = json!({"kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]});
                }
                Include::Object => row["object"] = object.clone(),
            }
            row
        })
        .collect();
    let definitions: Vec<Value> = if with_columns {
        columns
            .iter()
            .map(|c| {
                json!({"name": c.name, "type": c.type_, "format": c.format,
                       "description": c.description, "priority": c.priority})
            })
            .collect()
    } else {
        Vec::new()
    };
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
           "columnDefinitions": definitions, "rows": rows})
}

/// kubectl's age of an object created at `created` (RFC 3339): `45s`, `5m10s`, `3h`,
/// `2d5h`, ... as the real server's printers write it.
fn age(created: Option<&str>, now: SystemTime) -> String {
    let Some(created) = created.and_then(|c| c.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let now = jiff::Timestamp::try_from(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let seconds = now.as_second() - created.as_second();
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    match seconds {
        s if s < 0 => "0s".into(),
        s if s < 120 => format!("{s}s"),
        s if minutes < 10 && s % 60 == 0 => format!("{minutes}m"),
        s if minutes < 10 => format!("{minutes}m{}s", s % 60),
        _ if hours < 3 => format!("{minutes}m"),
        _ if hours < 8 && minutes % 60 == 0 => format!("{hours}h"),
        _ if hours < 8 => format!("{hours}h{}m", minutes % 60),
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 24 * 8 && hours % 24 == 0 => format!("{}d", hours / 24),
        _ if hours < 24 * 8 => format!("{}d{}h", hours / 24, hours % 24),
        _ if hours < 24 * 365 * 2 => format!("{}d", hours / 24),
        _ if hours < 24 * 365 * 8 => format!("{}y{}d", hours / 24 / 365, hours / 24 % 365),
        _ => format!("{}y", hours / 24 / 365),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        let created = "2026-11-20T10:00:00Z";
        let at = |secs: u64| {
            let t: jiff::Timestamp = created.parse().unwrap();
            SystemTime::from(t) + Duration::from_secs(secs)
        };
        let ages: Vec<String> = [
            5,
            119,
            310,
            600,
            4000,
            4 * 3600 + 60,
            30 * 3600,
            2 * 86_400 + 3600,
            30 * 86_400,
        ]
        .iter()
        .map(|s| age(Some(created), at(*s)))
        .collect();
        assert_eq!(
            ages,
            [
                "5s", "119s", "5m10s", "10m", "66m", "4h1m", "30h", "2d1h", "30d"
            ]
        );
    }

    #[test]
    fn only_a_meta_k8s_io_table_is_a_table() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
        assert!(!wanted(
            "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
        ));
    }
}
