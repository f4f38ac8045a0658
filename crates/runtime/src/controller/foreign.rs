//! Relations to objects outside the controller's own factory — another cluster's, such as a
//! fleet member's ([`Controller::watches_fleet`](crate::fleet)): whoever follows those
//! informers attaches this controller's handlers to them and detaches them, and the
//! controller runs the following as one of its feeds (started with its workers, aborted
//! when it stops).

use std::{future::Future, sync::Arc};

use kube::Resource;
use kube_informer::{
    ObjectKey, ReadOnlyStore,
    informer::{HandlerOptions, SharedIndexInformer},
    meta_namespace_key,
};

use super::{
    Controller,
    attachments::{self, Attached},
    enqueue::Enqueue,
    handlers::{self, EventFilter, Updates},
    trigger::{self, Trigger},
};

/// Makes handlers on foreign informers of `O` that queue this controller's keys, as its
/// `watches` relations do (its event filter applies).
pub(crate) struct Foreign {
    enqueue: Enqueue,
    filter: EventFilter,
    name: String,
}

impl Foreign {
    /// Attaches to `informer` a handler queueing the keys `map` gives for every change.
    pub(crate) fn attach<O: Resource + Clone + Send + Sync + 'static>(
        &self,
        informer: SharedIndexInformer<O>,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Box<dyn Attached> {
        let updates = Updates {
            predicate: None,
            filter: self.filter.clone(),
        };
        let handler = handlers::mapped(self.enqueue.clone(), map, updates);
        let options = HandlerOptions::default().name(self.name.clone());
        attachments::attach_now(informer, handler, options)
    }

    /// Queues once more the keys `map` gives for every object `store` holds (the cache of
    /// a source that went away), noting `event` as their trigger.
    pub(crate) fn requeue<O: Resource + Send + Sync + 'static>(
        &self,
        store: &ReadOnlyStore<O>,
        map: impl Fn(&O) -> Vec<ObjectKey>,
        event: &'static str,
    ) {
        for object in store.list() {
            for key in map(&object) {
                self.enqueue.triggers.note(&key, || Trigger {
                    event,
                    relation: self.enqueue.relation,
                    kind: self.enqueue.kind.clone(),
                    object: meta_namespace_key(object.as_ref()).ok(),
                });
                self.enqueue.add(key);
            }
        }
    }
}

impl<K> Controller<K>
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    /// Handlers for foreign informers of `O`, named after `what` (in the handlers' names).
    pub(crate) fn foreign<O: 'static>(&self, what: &str) -> Arc<Foreign> {
        Arc::new(Foreign {
            enqueue: self.enqueue.via("watches", trigger::short_type_name::<O>()),
            filter: self.event_filter.clone(),
            name: format!("{} {what}", self.name),
        })
    }

    /// Runs `following` while the controller reconciles (aborted when it stops).
    pub(crate) fn follow(mut self, following: impl Future<Output = ()> + Send + 'static) -> Self {
        self.feeds
            .push(parking_lot::Mutex::new(Box::pin(following)));
        self
    }
}
