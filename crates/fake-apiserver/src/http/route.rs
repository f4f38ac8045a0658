//! Routing: which API path leads to which discovery document or resource.

use std::sync::Arc;

use crate::registry::ResourceType;

/// Where a path leads.
pub(super) enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    Resources(String, String),
    OpenApiIndex,
    OpenApi(String),
    Metrics,
    Resource {
        ty: Arc<ResourceType>,
        namespace: Option<String>,
        name: Option<String>,
        subresource: Option<String>,
    },
    NotFound,
    /// Outside the API, or under a group nobody serves: the real server's mux answers a
    /// plain-text 404 there, not a `Status`.
    NoHandler,
}

pub(super) fn route(path: &str, types: &[Arc<ResourceType>]) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "readyz" | "livez", ..] => return Route::Health,
        ["metrics"] => return Route::Metrics,
        ["api"] => return Route::CoreVersions,
        ["api", "v1"] => return Route::Resources(String::new(), "v1".into()),
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis"] => return Route::Groups,
        ["apis", g] if !types.iter().any(|t| t.gvr.group == *g) => return Route::NoHandler,
        ["apis", g] => return Route::Group((*g).to_owned()),
        ["apis", g, v] if !types.iter().any(|t| t.gvr.group == *g) => return Route::NoHandler,
        ["apis", g, v] => return Route::Resources((*g).to_owned(), (*v).to_owned()),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        ["openapi", "v3"] => return Route::OpenApiIndex,
        ["openapi", "v3", gv @ ..] => return Route::OpenApi(gv.join("/")),
        ["api", ..] => return Route::NotFound,
        _ => return Route::NoHandler,
    };
    if !group.is_empty() && !types.iter().any(|t| t.gvr.group == group) {
        return Route::NoHandler;
    }
    let find = |resource: &str| {
        types
            .iter()
            .find(|t| {
                t.gvr.group == group && t.gvr.version == version && t.gvr.resource == resource
            })
            .cloned()
    };
    let namespaced = |resource: &str| find(resource).filter(|t| t.namespaced);
    let (ty, namespace, rest) = match rest {
        ["namespaces", ns, resource, rest @ ..] if namespaced(resource).is_some() => {
            (namespaced(resource), Some((*ns).to_owned()), rest)
        }
        [resource, rest @ ..] => (find(resource), None, rest),
        [] => return Route::NotFound,
    };
    let Some(ty) = ty else { return Route::NotFound };
    match rest {
        [] => Route::Resource {
            ty,
            namespace,
            name: None,
            subresource: None,
        },
        [name] => Route::Resource {
            ty,
            namespace,
            name: Some((*name).to_owned()),
            subresource: None,
        },
        [name, sub] => Route::Resource {
            ty,
            namespace,
            name: Some((*name).to_owned()),
            subresource: Some((*sub).to_owned()),
        },
        _ => Route::NotFound,
    }
}
