//! [`Selectors`]: which objects of a type are listed and watched, by label and by field.
//! One type for every level that sets them (the factory's default, an informer's
//! [`InformerSpec`](crate::InformerSpec), the [`Reflector`](crate::reflector::Reflector)
//! that sends them).

/// Label and field selectors, as the API server takes them (`app=web,tier!=db`,
/// `status.phase=Running`). Either may be absent.
///
/// ```
/// use kube_informer::{FactoryOptions, list_watch::Selectors};
///
/// let web = Selectors::default().labels("app=web").fields("status.phase=Running");
/// assert_eq!(web.label_selector(), Some("app=web"));
/// let options = FactoryOptions::default().selectors(web);
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selectors {
    label: Option<String>,
    field: Option<String>,
}

impl Selectors {
    /// Only objects whose labels match `selector`.
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label = Some(selector.into());
        self
    }

    /// Only objects whose fields match `selector`.
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field = Some(selector.into());
        self
    }

    /// The label selector, if any.
    pub fn label_selector(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// The field selector, if any.
    pub fn field_selector(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// These selectors, each falling back to `defaults`' where unset.
    pub(crate) fn or(&self, defaults: &Self) -> Self {
        Self {
            label: self.label.clone().or_else(|| defaults.label.clone()),
            field: self.field.clone().or_else(|| defaults.field.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_selector_falls_back_on_its_own() {
        let factory = Selectors::default().labels("team=a").fields("f=1");
        let spec = Selectors::default().labels("app=web");
        let merged = spec.or(&factory);
        assert_eq!(merged.label_selector(), Some("app=web"));
        assert_eq!(merged.field_selector(), Some("f=1"));
        assert_eq!(
            Selectors::default().or(&Selectors::default()),
            Selectors::default()
        );
    }
}
