//! The LIST path: a (paged) LIST at the version the ladder says, then one `replace`.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use futures_util::{FutureExt, future::BoxFuture};
use kube::{
    Resource,
    api::{ListParams, VersionMatch},
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    ListFrom, Reflector, ReflectorError, Run, Stop,
    error::{Reaction, react},
};
use crate::list_watch::{
    ListerWatcher, ShardSelector,
    decode_pool::{DecodeFailed, DecodePool},
};

/// A LIST page's items, decoded or being decoded.
enum Decoding<K> {
    Ready(Result<Vec<K>, kube::Error>),
    Pooled(BoxFuture<'static, Result<Result<Vec<K>, kube::Error>, DecodeFailed>>),
}

impl<K> Decoding<K> {
    async fn finish(self) -> Result<Vec<K>, kube::Error> {
        match self {
            Self::Ready(items) => items,
            Self::Pooled(task) => task.await.map_err(|e| {
                kube::Error::Service(format!("decoding a LIST page failed: {e}").into())
            })?,
        }
    }
}

/// Why a LIST failed.
pub(super) enum ListFailure {
    Client(kube::Error),
    /// A page got no (complete) answer within the LIST timeout.
    TimedOut(Duration),
}

impl From<kube::Error> for ListFailure {
    fn from(err: kube::Error) -> Self {
        Self::Client(err)
    }
}

impl<K, L> Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    /// Paged LIST + replace, at the version the ladder says.
    pub(super) async fn list_sync(
        &self,
        cancel: &CancellationToken,
        run: &mut Run,
    ) -> Result<(), Stop> {
        let resource_version = match run.list_from {
            ListFrom::Cache => "0".to_owned(),
            ListFrom::LastSynced if !run.resource_version.is_empty() => {
                run.resource_version.clone()
            }
            ListFrom::LastSynced => "0".to_owned(),
            ListFrom::Consistent => String::new(),
        };
        #[cfg(feature = "metrics")]
        self.metric(|m, name| m.list_started(name));
        let started = Instant::now();
        let listed = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Cancelled),
            listed = self.list_all(&resource_version, None) => listed,
        };
        match listed {
            Ok((objects, list_rv)) => {
                let _ = started;
                if !self.usable(&list_rv, "LIST") {
                    return Err(self.wait_for(cancel, run, Reaction::Retry).await);
                }
                #[cfg(feature = "metrics")]
                self.metric(|m, name| {
                    m.list_done(name, started.elapsed().as_secs_f64(), objects.len())
                });
                self.replace(objects, &list_rv);
                self.synced(run, list_rv);
                Ok(())
            }
            Err(failure) => {
                let reaction = self.report_list_failure(failure);
                if matches!(reaction, Reaction::Gone | Reaction::TooLarge) {
                    run.list_from = ListFrom::Consistent;
                }
                Err(self.wait_for(cancel, run, reaction).await)
            }
        }
    }

    /// Reports a failed LIST request; how to react to it (a timeout: retry).
    pub(super) fn report_list_failure(&self, failure: ListFailure) -> Reaction {
        match failure {
            ListFailure::TimedOut(after) => {
                self.report(ReflectorError::Timeout {
                    resource: self.name.clone(),
                    request: "LIST",
                    after,
                });
                Reaction::Retry
            }
            ListFailure::Client(source) => {
                let reaction = react(&source);
                self.report(ReflectorError::List {
                    resource: self.name.clone(),
                    source,
                });
                reaction
            }
        }
    }

    /// One LIST page (of `part` only, when given), within the LIST timeout.
    pub(super) async fn list_page(
        &self,
        params: &ListParams,
        part: Option<&ShardSelector>,
    ) -> Result<crate::list_watch::ListPage<K>, ListFailure> {
        let limit = self.options.list_timeout;
        let page = async {
            match part {
                Some(part) => self.lw.list_page_of(params, part).await,
                None => self.lw.list_page(params).await,
            }
        };
        match tokio::time::timeout(limit, page).await {
            Ok(page) => Ok(page?),
            Err(_) => Err(ListFailure::TimedOut(limit)),
        }
    }

    /// Every page of a LIST at `resource_version` (keyed), and the list's version. With
    /// `part`, a LIST of that share only, exactly at `resource_version` (the ranges a
    /// sharded cache gained, read at the version it is at).
    ///
    /// Pages are fetched one after the other (each needs the previous one's continue
    /// token) but decoded on the decoding threads, up to one page per thread at a time,
    /// so fetching and decoding overlap and pages decode in parallel; an unpaged list's one
    /// page is decoded in shares, one per thread.
    pub(super) async fn list_all(
        &self,
        resource_version: &str,
        part: Option<&ShardSelector>,
    ) -> Result<(Vec<Arc<K>>, String), ListFailure> {
        // Only a consistent ("") list is paged. A list at "0" or at a version is served
        // whole from the API server's cache (which ignores a limit), and kube drops
        // `resourceVersion=0` when a limit is set, which would turn the cheap cache read
        // into a consistent etcd read.
        let paged = resource_version.is_empty();
        let first = ListParams {
            limit: paged.then_some(self.options.page_size),
            resource_version: (!resource_version.is_empty()).then(|| resource_version.to_owned()),
            version_match: part.map(|_| VersionMatch::Exact),
            ..self.selectors_list()
        };
        let parallel = crate::list_watch::decoders();
        let pool = DecodePool::shared();
        let mut params = first.clone();
        let mut objects = Vec::new();
        let mut decoding = VecDeque::new();
        let mut list_rv = None;
        loop {
            match self.list_page(&params, part).await {
                Ok(page) => {
                    list_rv
                        .get_or_insert(page.metadata.resource_version.clone().unwrap_or_default());
                    let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
                    self.check_echo(page.shard_selector(), part);
                    if page.is_decoded() {
                        decoding.push_back(Decoding::Ready(page.into_items()));
                    } else if params.limit.is_none() {
                        // The whole list in one page (a list from the cache at "0", or the
                        // fallback after an expired continue token): in shares, one per
                        // decoding thread, as a paged list's pages would be.
                        let shares = pool.run(move || page.into_parts(parallel)).await;
                        let shares = shares.map_err(|e| {
                            kube::Error::Service(format!("splitting a LIST failed: {e}").into())
                        })?;
                        for share in shares {
                            decoding.push_back(Decoding::Pooled(pool.run(share).boxed()));
                        }
                    } else {
                        decoding.push_back(Decoding::Pooled(
                            pool.run(move || page.into_items()).boxed(),
                        ));
                    }
                    while let Some(front) = (decoding.len() >= parallel
                        || (next.is_none() && !decoding.is_empty()))
                    .then(|| decoding.pop_front())
                    .flatten()
                    {
                        objects.extend(self.keyed(self.only_share(front.finish().await?, part)));
                    }
                    match next {
                        Some(token) => {
                            params.continue_token = Some(token);
                            params.resource_version = None;
                            params.version_match = None;
                        }
                        None => return Ok((objects, list_rv.unwrap_or_default())),
                    }
                }
                Err(ListFailure::Client(err))
                    if params.continue_token.is_some() && react(&err) == Reaction::Gone =>
                {
                    // The continue token expired: one full, unpaged list instead.
                    params = ListParams {
                        limit: None,
                        ..first.clone()
                    };
                    objects.clear();
                    decoding.clear();
                    list_rv = None;
                }
                Err(err) => return Err(err),
            }
        }
    }
}
