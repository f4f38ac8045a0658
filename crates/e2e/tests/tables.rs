//! The Tables `kubectl get` reads, the same on both servers: a pod's and a Deployment's
//! columns with those `-o wide` adds (priority 1), and a custom resource's
//! `additionalPrinterColumns` (Name, then the CRD's columns: no Age unless it lists one; a
//! `date` cell as an age).

use std::time::Duration;

use e2e::{Answer, Backend, both, send};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};

const JSON: &str = "application/json";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// `path` as a Table: (name, type, format, priority) per column, and the rows' cells.
async fn table(
    client: &kube::Client,
    path: &str,
) -> (Vec<(String, String, String, i64)>, Vec<Value>) {
    let request = http::Request::get(path)
        .header("accept", TABLE)
        .body(kube::client::Body::empty())
        .unwrap();
    let response = client.send(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let table: Value = serde_json::from_slice(&body).unwrap();
    let columns = table["columnDefinitions"]
        .as_array()
        .unwrap_or_else(|| panic!("not a Table: {table}"))
        .iter()
        .map(|c| {
            let text = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
            (
                text("name"),
                text("type"),
                text("format"),
                c["priority"].as_i64().unwrap(),
            )
        })
        .collect();
    let rows = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].clone())
        .collect();
    (columns, rows)
}

fn column(name: &str, type_: &str, format: &str, priority: i64) -> (String, String, String, i64) {
    (name.into(), type_.into(), format.into(), priority)
}

async fn tables_show_the_real_servers_columns(backend: Backend) {
    let client = backend.client();
    let (name, text) = (column("Name", "string", "name", 0), |n| {
        column(n, "string", "", 0)
    });
    let wide = |n| column(n, "string", "", 1);

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]}});
    send(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods",
        JSON,
        &pod.to_string(),
    )
    .await
    .object();
    let (columns, rows) = table(&client, "/api/v1/namespaces/default/pods").await;
    let expected = [
        name.clone(),
        text("Ready"),
        text("Status"),
        text("Restarts"),
        text("Age"),
        wide("IP"),
        wide("Node"),
        wide("Nominated Node"),
        wide("Readiness Gates"),
    ];
    assert_eq!(columns, expected, "{}", backend.name());
    let cells = rows[0].as_array().unwrap();
    let without_age: Vec<&Value> = cells
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 4)
        .map(|(_, c)| c)
        .collect();
    assert_eq!(
        without_age,
        [
            "p1", "0/1", "Pending", "0", "<none>", "<none>", "<none>", "<none>"
        ]
        .map(|s| json!(s))
        .iter()
        .collect::<Vec<_>>(),
        "{}",
        backend.name()
    );

    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web", "tier": "front"}},
            "template": {"metadata": {"labels": {"app": "web", "tier": "front"}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}, {"name": "side", "image": "busybox"}]}}}});
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    send(&client, "POST", deployments, JSON, &deployment.to_string())
        .await
        .object();
    let (columns, rows) = table(&client, deployments).await;
    let expected = [
        name.clone(),
        text("Ready"),
        text("Up-to-date"),
        text("Available"),
        text("Age"),
        wide("Containers"),
        wide("Images"),
        wide("Selector"),
    ];
    assert_eq!(columns, expected, "{}", backend.name());
    let cells = rows[0].as_array().unwrap();
    assert_eq!(
        cells[5..],
        [
            json!("main,side"),
            json!("nginx,busybox"),
            json!("app=web,tier=front")
        ],
        "{}",
        backend.name()
    );

    let group = "tables.e2e.example.com";
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
                    {"name": "Created", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ]}]},
    });
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    send(&client, "POST", crds, JSON, &crd.to_string())
        .await
        .object();
    let gadgets = format!("/apis/{group}/v1/namespaces/default/gadgets");
    let gadget = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
        "metadata": {"name": "g1"}, "spec": {"size": 3, "color": "red"}});
    let mut created = false;
    for _ in 0..600 {
        // Served once the CRD is established (setup, not a verdict: a minute at most).
        if let Answer::Object(_) = send(&client, "POST", &gadgets, JSON, &gadget.to_string()).await
        {
            created = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(created, "{}: the CRD was never served", backend.name());
    let (columns, rows) = table(&client, &gadgets).await;
    let expected = [
        name,
        column("Size", "integer", "", 0),
        column("Color", "string", "", 1),
        column("Created", "date", "", 0),
    ];
    assert_eq!(columns, expected, "{}", backend.name());
    let cells = rows[0].as_array().unwrap();
    assert_eq!(
        cells[..3],
        [json!("g1"), json!(3), json!("red")],
        "{}",
        backend.name()
    );
    let age = cells[3].as_str().unwrap_or_default();
    assert!(
        age.ends_with('s') || age.ends_with('m'),
        "{}: an age, not {age:?}",
        backend.name()
    );

    let _ = send(
        &client,
        "DELETE",
        &format!("{crds}/gadgets.{group}"),
        JSON,
        "",
    )
    .await;
}

both!(tables_show_the_real_servers_columns);
