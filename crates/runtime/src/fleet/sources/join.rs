//! What an inventory source knows of each member, and the [`ClusterEvent`]s that follow
//! from it: an inventory object (a Cluster API `Cluster`, a `ClusterProfile`) says whether
//! the member exists and is ready, credentials (a Secret, or the object itself) say how to
//! reach it. A member is engaged once both are there, given new credentials when they
//! change, and disengaged only when its inventory object goes — never because a Secret
//! went or changed into something else.

use std::collections::BTreeMap;

use super::super::ClusterEvent;

/// One input of a join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Input {
    /// The inventory object of `name` is there (created or changed).
    Object {
        name: String,
        /// Whether it says the member can be reached (provisioned, healthy).
        ready: bool,
        /// Going away (a deletion timestamp): disengage now.
        deleting: bool,
        labels: BTreeMap<String, String>,
    },
    /// The inventory object of `name` is gone.
    ObjectGone { name: String },
    /// `name`'s kubeconfig as its credentials say now (`None`: they are gone).
    Credentials {
        name: String,
        kubeconfig: Option<String>,
    },
}

/// The inventory object of one member.
#[derive(Debug, Default)]
struct Object {
    /// Ready once: a member engaged stays engaged while its object is there, whatever its
    /// status says later (a control plane briefly unhealthy is not a member gone).
    ready: bool,
    labels: BTreeMap<String, String>,
}

/// The members of one source: objects, credentials, and what was last sent.
#[derive(Debug, Default)]
pub(super) struct Join {
    objects: BTreeMap<String, Object>,
    credentials: BTreeMap<String, String>,
    /// What each engaged member was last engaged with: kubeconfig and labels.
    sent: BTreeMap<String, (String, BTreeMap<String, String>)>,
}

impl Join {
    /// The events `input` leads to (none, one engage or one removal).
    pub(super) fn apply(&mut self, input: Input) -> Option<ClusterEvent> {
        match input {
            Input::Object {
                name,
                deleting: true,
                ..
            }
            | Input::ObjectGone { name } => {
                self.objects.remove(&name);
                self.sent
                    .remove(&name)
                    .map(|_| ClusterEvent::Remove { name })
            }
            Input::Object {
                name,
                ready,
                labels,
                ..
            } => {
                let object = self.objects.entry(name.clone()).or_default();
                object.ready |= ready;
                object.labels = labels;
                self.engage(name)
            }
            Input::Credentials { name, kubeconfig } => {
                match kubeconfig {
                    Some(kubeconfig) => self.credentials.insert(name.clone(), kubeconfig),
                    None => {
                        // Kept engaged with what it has: a Secret deleted to be made anew
                        // (or by mistake) does not take a live member away.
                        if self.sent.contains_key(&name) {
                            tracing::warn!(cluster = %name, "the member's kubeconfig is gone; it stays engaged with its current credentials");
                        }
                        self.credentials.remove(&name)
                    }
                };
                self.engage(name)
            }
        }
    }

    /// Engages `name` (or sends it new credentials or labels) if its object is ready, its
    /// credentials are there, and either differs from what was sent.
    fn engage(&mut self, name: String) -> Option<ClusterEvent> {
        let object = self.objects.get(&name).filter(|o| o.ready)?;
        let kubeconfig = self.credentials.get(&name)?;
        let now = (kubeconfig.clone(), object.labels.clone());
        if self.sent.get(&name) == Some(&now) {
            return None;
        }
        let (kubeconfig, labels) = now.clone();
        self.sent.insert(name.clone(), now);
        Some(ClusterEvent::Kubeconfig {
            name,
            kubeconfig,
            labels,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, ready: bool) -> Input {
        Input::Object {
            name: name.into(),
            ready,
            deleting: false,
            labels: BTreeMap::new(),
        }
    }

    fn credentials(name: &str, kubeconfig: Option<&str>) -> Input {
        Input::Credentials {
            name: name.into(),
            kubeconfig: kubeconfig.map(str::to_owned),
        }
    }

    fn engaged(event: Option<ClusterEvent>) -> Option<(String, String)> {
        match event? {
            ClusterEvent::Kubeconfig {
                name, kubeconfig, ..
            } => Some((name, kubeconfig)),
            other => panic!("not an engagement: {other:?}"),
        }
    }

    #[test]
    fn engaged_once_ready_with_credentials_in_either_order() {
        let mut join = Join::default();
        assert!(join.apply(credentials("ns/a", Some("k1"))).is_none());
        assert!(join.apply(object("ns/a", false)).is_none(), "not ready yet");
        let event = engaged(join.apply(object("ns/a", true)));
        assert_eq!(event, Some(("ns/a".into(), "k1".into())));
        assert!(join.apply(object("ns/a", true)).is_none(), "nothing new");

        let mut join = Join::default();
        assert!(join.apply(object("ns/b", true)).is_none());
        assert!(engaged(join.apply(credentials("ns/b", Some("k")))).is_some());
    }

    #[test]
    fn only_the_object_going_disengages() {
        let mut join = Join::default();
        join.apply(object("ns/a", true));
        join.apply(credentials("ns/a", Some("k1")));
        // Not ready any more, credentials deleted: still engaged, nothing sent.
        assert!(join.apply(object("ns/a", false)).is_none());
        assert!(join.apply(credentials("ns/a", None)).is_none());
        // Recreated with new credentials: rotated.
        let event = engaged(join.apply(credentials("ns/a", Some("k2"))));
        assert_eq!(event, Some(("ns/a".into(), "k2".into())));
        let gone = join.apply(Input::ObjectGone {
            name: "ns/a".into(),
        });
        assert!(matches!(gone, Some(ClusterEvent::Remove { name }) if name == "ns/a"));
        assert!(
            join.apply(Input::ObjectGone {
                name: "ns/a".into()
            })
            .is_none(),
            "removed once"
        );
    }

    #[test]
    fn a_deleting_object_disengages_and_labels_are_sent() {
        let mut join = Join::default();
        join.apply(object("ns/a", true));
        join.apply(credentials("ns/a", Some("k")));
        let relabelled = join.apply(Input::Object {
            name: "ns/a".into(),
            ready: true,
            deleting: false,
            labels: [("env".to_owned(), "prod".to_owned())].into(),
        });
        assert!(
            matches!(relabelled, Some(ClusterEvent::Kubeconfig { labels, .. }) if labels["env"] == "prod")
        );
        let deleting = join.apply(Input::Object {
            name: "ns/a".into(),
            ready: true,
            deleting: true,
            labels: BTreeMap::new(),
        });
        assert!(matches!(deleting, Some(ClusterEvent::Remove { .. })));
    }
}
