//! Server-side `Table` output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), the
//! shape `kubectl get` asks for: column definitions and one row of cells per object, with
//! the columns the real server prints for the built-in types (pods: Ready, Status,
//! Restarts, ...) and Name/Age for the rest, as for a custom resource without printer
//! columns. In a watch, each event carries a one-row Table; only the first has columns.

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

/// A column: (name, type, format, priority).
type Column = (&'static str, &'static str, &'static str, u8);

const NAME: Column = ("Name", "string", "name", 0);
const AGE: Column = ("Age", "string", "", 0);

fn columns(ty: &ResourceType) -> Vec<Column> {
    match (ty.gvr.group.as_str(), ty.gvr.resource.as_str()) {
        ("", "pods") => vec![
            NAME,
            ("Ready", "string", "", 0),
            ("Status", "string", "", 0),
            ("Restarts", "string", "", 0),
            AGE,
            ("IP", "string", "", 1),
            ("Node", "string", "", 1),
        ],
        ("", "configmaps") => vec![NAME, ("Data", "integer", "", 0), AGE],
        ("", "secrets") => vec![
            NAME,
            ("Type", "string", "", 0),
            ("Data", "integer", "", 0),
            AGE,
        ],
        ("", "namespaces") => vec![NAME, ("Status", "string", "", 0), AGE],
        ("", "nodes") => vec![
            NAME,
            ("Status", "string", "", 0),
            ("Roles", "string", "", 0),
            AGE,
            ("Version", "string", "", 0),
        ],
        ("apps", "deployments") => vec![
            NAME,
            ("Ready", "string", "", 0),
            ("Up-to-date", "integer", "", 0),
            ("Available", "integer", "", 0),
            AGE,
        ],
        _ => vec![NAME, AGE],
    }
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
            let cells: Vec<Value> = columns.iter().map(|c| cell(c.0, object, now)).collect();
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
            .map(|(name, type_, format, priority)| {
                json!({"name": name, "type": type_, "format": format, "description": "", "priority": priority})
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
