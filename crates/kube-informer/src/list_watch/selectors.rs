//! [`Selectors`]: which objects of a type are listed and watched: by namespace, by label
//! and by field. One type for every level that sets them (the factory's default, an
//! informer's [`InformerSpec`](crate::InformerSpec), the
//! [`Reflector`](crate::reflector::Reflector) that sends them).

/// Namespaces, label and field selectors, as the API server takes them (`shop`,
/// `app=web,tier!=db`, `status.phase=Running`). Each may be absent; at every level, what
/// is absent is taken from the level above (an informer's from the factory's).
///
/// ```
/// use kube_informer::{FactoryOptions, list_watch::Selectors};
///
/// let web = Selectors::default()
///     .in_namespaces(["shop", "checkout"])
///     .labels("app=web")
///     .fields("status.phase=Running");
/// assert_eq!(web.label_selector(), Some("app=web"));
/// assert_eq!(web.namespaces(), Some(&["checkout".to_owned(), "shop".to_owned()][..]));
/// let options = FactoryOptions::default().selectors(web);
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selectors {
    namespaces: Option<Vec<String>>,
    label: Option<String>,
    field: Option<String>,
    shards: Option<super::live_share::Shards>,
}

impl Selectors {
    /// Only objects of `namespace` (for namespaced types; cluster-scoped ones, such as
    /// nodes and namespaces, are listed cluster-wide whatever this says, as in client-go).
    #[must_use]
    pub fn in_namespace(self, namespace: impl Into<String>) -> Self {
        self.in_namespaces([namespace.into()])
    }

    /// Only objects of these namespaces: an informer watches each (one watch per
    /// namespace, merged into one cache: for an operator that watches N namespaces, not
    /// all and not one). An empty set means all namespaces.
    ///
    /// A [`Reflector`](crate::reflector::Reflector) watches the one namespace of its
    /// source (a `kube::Api` of that namespace); the factory, which makes the sources,
    /// is where several namespaces are set.
    #[must_use]
    pub fn in_namespaces<S: Into<String>>(
        mut self,
        namespaces: impl IntoIterator<Item = S>,
    ) -> Self {
        let mut namespaces: Vec<String> = namespaces.into_iter().map(Into::into).collect();
        namespaces.sort();
        namespaces.dedup();
        self.namespaces = Some(namespaces);
        self
    }

    /// Only objects whose labels match `selector`.
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label = Some(selector.into());
        self
    }

    /// Also require `selector` of the labels: `app=web` and `tier=front` make
    /// `app=web,tier=front` (a label selector's requirements all apply).
    ///
    /// ```
    /// use kube_informer::Selectors;
    ///
    /// let web = Selectors::default().labels("app=web").and_labels("tier=front");
    /// assert_eq!(web.label_selector(), Some("app=web,tier=front"));
    /// assert_eq!(Selectors::default().and_labels("a=b").label_selector(), Some("a=b"));
    /// ```
    #[must_use]
    pub fn and_labels(mut self, selector: impl Into<String>) -> Self {
        let more = selector.into();
        self.label = Some(match self.label.take().filter(|l| !l.is_empty()) {
            Some(label) => format!("{label},{more}"),
            None => more,
        });
        self
    }

    /// Only objects whose fields match `selector`.
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field = Some(selector.into());
        self
    }

    /// Only the share of the objects `selector` names, by hash range of their uid or
    /// namespace (KEP-5866 `shardSelector`): sent with every LIST and WATCH, and enforced
    /// by the reflector whatever the server does with it (see [`ShardSelector`](super::ShardSelector)).
    ///
    /// ```
    /// use kube_informer::list_watch::{HASH_SPACE_END, Selectors, ShardField, ShardSelector};
    ///
    /// let first_half = ShardSelector::new(ShardField::Uid, 0..HASH_SPACE_END / 2)?;
    /// let mine = Selectors::default().shards(first_half);
    /// # let _ = mine;
    /// # Ok::<(), kube_informer::list_watch::InvalidShardSelector>(())
    /// ```
    #[must_use]
    pub fn shards(mut self, selector: super::ShardSelector) -> Self {
        self.shards = Some(super::live_share::Shards::Fixed(selector));
        self
    }

    /// Only the share `share` names, whatever it names now: see [`LiveShare`](super::LiveShare).
    #[must_use]
    pub fn live_shards(mut self, share: super::LiveShare) -> Self {
        self.shards = Some(super::live_share::Shards::Live(share));
        self
    }

    /// The shard selector, if a fixed one is set.
    pub(crate) fn shard_selector(&self) -> Option<&super::ShardSelector> {
        match &self.shards {
            Some(super::live_share::Shards::Fixed(selector)) => Some(selector),
            _ => None,
        }
    }

    /// The share, fixed or live.
    pub(crate) fn share(&self) -> Option<&super::live_share::Shards> {
        self.shards.as_ref()
    }

    /// The label selector, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// The field selector, if any.
    pub fn field_selector(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The namespaces, sorted, if set (empty: all namespaces).
    pub fn namespaces(&self) -> Option<&[String]> {
        self.namespaces.as_deref()
    }

    /// The label and field selectors alone.
    pub(crate) fn without_namespaces(&self) -> Self {
        Self {
            namespaces: None,
            ..self.clone()
        }
    }

    /// These selectors, each falling back to `defaults`' where unset.
    pub(crate) fn or(&self, defaults: &Self) -> Self {
        Self {
            namespaces: self
                .namespaces
                .clone()
                .or_else(|| defaults.namespaces.clone()),
            label: self.label.clone().or_else(|| defaults.label.clone()),
            field: self.field.clone().or_else(|| defaults.field.clone()),
            shards: self.shards.clone().or_else(|| defaults.shards.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_selector_falls_back_on_its_own() {
        let factory = Selectors::default()
            .in_namespace("shop")
            .labels("team=a")
            .fields("f=1");
        let spec = Selectors::default().labels("app=web");
        let merged = spec.or(&factory);
        assert_eq!(merged.label_selector(), Some("app=web"));
        assert_eq!(merged.field_selector(), Some("f=1"));
        assert_eq!(merged.namespaces(), Some(&["shop".to_owned()][..]));
        // An empty set (all namespaces) is a choice, not an absence.
        let all = Selectors::default().in_namespaces(Vec::<String>::new());
        assert_eq!(all.or(&factory).namespaces(), Some(&[][..]));
        assert_eq!(
            Selectors::default().or(&Selectors::default()),
            Selectors::default()
        );
    }
}
