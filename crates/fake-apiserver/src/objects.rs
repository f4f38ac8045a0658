//! The programmatic API on objects: what a test (or the cluster's own components, which a
//! real cluster runs as controllers and kubelets) writes and reads without HTTP.

use serde_json::Value;

use crate::{
    Error, FakeApiServer,
    ops::{DeleteOptions, Deleted, Part, Patch},
    registry::{Gvr, ResourceType},
    status::ApiError,
    storage::StoredObject,
};

fn object_value(ty_kind: &str, api_version: &str, object: &StoredObject) -> Value {
    object.value(ty_kind, api_version)
}

impl FakeApiServer {
    /// Registers a resource type (a custom resource) while running.
    pub fn register(&self, ty: ResourceType) {
        self.inner.storage.lock().register(ty);
    }

    fn kind_of(&self, gvr: &Gvr) -> Result<(String, String), Error> {
        let storage = self.inner.storage.lock();
        let ty = storage
            .resource(gvr)
            .map(|r| r.ty.clone())
            .ok_or_else(ApiError::not_found_path)?;
        Ok((ty.kind.clone(), ty.gvr.api_version()))
    }

    /// Creates an object, as a POST would (the namespace must exist and not be terminating).
    /// Returns it as stored.
    ///
    /// The programmatic writes stand in for the cluster's own components (controllers,
    /// kubelets): they may set `status` directly, where an HTTP client has to write it
    /// through the `status` subresource of types that have one.
    pub fn create(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, Error> {
        let (kind, api_version) = self.kind_of(gvr)?;
        let stored = self
            .inner
            .create(gvr, namespace, object, "fake-apiserver", Part::All)?;
        Ok(object_value(&kind, &api_version, &stored))
    }

    /// Replaces an object, as a PUT would (409 if its resourceVersion is set and stale).
    pub fn update(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, Error> {
        let (kind, api_version) = self.kind_of(gvr)?;
        let name = object["metadata"]["name"].as_str().unwrap_or("").to_owned();
        let stored =
            self.inner
                .update(gvr, namespace, &name, object, "fake-apiserver", Part::All)?;
        Ok(object_value(&kind, &api_version, &stored))
    }

    /// Applies a JSON merge patch, as a PATCH with `application/merge-patch+json` would
    /// (status included, as for [`FakeApiServer::create`]).
    pub fn patch(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        patch: Value,
    ) -> Result<Value, Error> {
        let (kind, api_version) = self.kind_of(gvr)?;
        let stored = self.inner.patch(
            gvr,
            namespace,
            name,
            &Patch::Merge(patch),
            "fake-apiserver",
            Part::All,
        )?;
        Ok(object_value(&kind, &api_version, &stored))
    }

    /// Deletes an object, as a DELETE would: `Some(object)` when deletion was deferred by
    /// finalizers, `None` when it is gone.
    pub fn delete(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, Error> {
        let (kind, api_version) = self.kind_of(gvr)?;
        match self
            .inner
            .delete(gvr, namespace, name, &DeleteOptions::default())?
        {
            Deleted::Now(_) => Ok(None),
            Deleted::Deferred(stored) => Ok(Some(object_value(&kind, &api_version, &stored))),
        }
    }

    /// The current object.
    pub fn get(&self, gvr: &Gvr, namespace: Option<&str>, name: &str) -> Result<Value, Error> {
        let (kind, api_version) = self.kind_of(gvr)?;
        let stored = self.inner.get(gvr, namespace, name)?;
        Ok(object_value(&kind, &api_version, &stored))
    }

    /// Every current object of a type (all namespaces), in key order.
    pub fn list(&self, gvr: &Gvr) -> Result<Vec<Value>, Error> {
        let (kind, api_version) = self.kind_of(gvr)?;
        let storage = self.inner.storage.lock();
        let store = storage.resource(gvr).ok_or_else(ApiError::not_found_path)?;
        let objects = store.scan(storage.revision(), None, None, |_| true);
        Ok(objects
            .map(|(_, o)| object_value(&kind, &api_version, o))
            .collect())
    }

    /// Creates many objects fast, creating their namespaces as needed.
    pub fn seed(&self, gvr: &Gvr, objects: impl IntoIterator<Item = Value>) -> Result<(), Error> {
        let namespaces = Gvr::core("namespaces");
        for object in objects {
            let ns = object["metadata"]["namespace"].as_str().map(str::to_owned);
            if let Some(ns) = &ns
                && self.inner.get(&namespaces, None, ns).is_err()
            {
                let namespace = serde_json::json!({"metadata": {"name": ns}});
                self.create(&namespaces, None, namespace)?;
            }
            self.inner
                .create(gvr, ns.as_deref(), object, "fake-apiserver", Part::All)?;
        }
        Ok(())
    }
}
