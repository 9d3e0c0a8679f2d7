//! The plumbing of a metrics struct, shared by the webhook's and the
//! controller's: registration under the `sandbox_webhook` prefix, the
//! struct declared one row per metric ([`metric_fields!`]), every series
//! created at 0, and the text exposition an admin port serves.

use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Metric, Registry, Unit};

/// Registers metrics under the `sandbox_webhook` prefix, handing back the
/// handle each one is updated through (a clone shares the registered value).
pub(crate) struct Registrar(Registry);

impl Registrar {
    pub(crate) fn new() -> Self {
        Registrar(Registry::with_prefix("sandbox_webhook"))
    }

    pub(crate) fn add<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        let metric = M::default();
        self.0.register(name, help, metric.clone());
        metric
    }

    /// [`Registrar::add`] for a metric measured in `unit`.
    pub(crate) fn add_in<M: Metric + Clone + Default>(
        &mut self,
        name: &str,
        help: &str,
        unit: Unit,
    ) -> M {
        self.add_with(name, help, unit, M::default())
    }

    /// [`Registrar::add_in`] for a metric that is not built by default (a
    /// histogram and its buckets).
    pub(crate) fn add_with<M: Metric + Clone>(
        &mut self,
        name: &str,
        help: &str,
        unit: Unit,
        metric: M,
    ) -> M {
        self.0.register_with_unit(name, help, unit, metric.clone());
        metric
    }

    pub(crate) fn finish(self) -> Registry {
        self.0
    }
}

/// Creates the series of `family` with each of `labels` (at 0), so that a
/// dashboard (or a test) sees an increase rather than a new series.
pub(crate) fn create_series<L, M>(family: &Family<L, M>, labels: impl IntoIterator<Item = L>)
where
    L: Clone + std::hash::Hash + Eq,
{
    for labels in labels {
        let _ = family.get_or_create(&labels);
    }
}

/// Label sets whose values are fixed strings (so a client cannot mint
/// series), each a struct whose fields name its labels.
macro_rules! label_sets {
    ($($(#[$doc:meta])* $name:ident { $($label:ident),+ })*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
            pub struct $name {
                $(pub $label: &'static str,)+
            }
        )*
    };
}
pub(crate) use label_sets;

/// A metrics struct whose fields are its metrics, each declared once: its
/// field, its name in the exposition (after `sandbox_webhook_`), its unit
/// after `in`, and its help. `built` gives a metric that its `Default`
/// does not build (a histogram with its buckets). `Self::registered()`
/// builds and registers every one, in the order declared (the exposition's
/// order), with the registry in the field `registry`.
macro_rules! metric_fields {
    (@add $r:ident, $metric:literal, $help:literal) => {
        $r.add($metric, $help)
    };
    (@add $r:ident, $metric:literal, $help:literal, $unit:ident) => {
        $r.add_in($metric, $help, prometheus_client::registry::Unit::$unit)
    };
    (@add $r:ident, $metric:literal, $help:literal, $unit:ident, $built:expr) => {
        $r.add_with($metric, $help, prometheus_client::registry::Unit::$unit, $built)
    };
    (
        pub struct $name:ident {
            $(
                $(#[$doc:meta])*
                $vis:vis $field:ident: $ty:ty = $metric:literal
                $(in $unit:ident $(built $built:expr)?)?,
                $help:literal;
            )*
        }
    ) => {
        pub struct $name {
            registry: prometheus_client::registry::Registry,
            $($(#[$doc])* $vis $field: $ty,)*
        }

        impl $name {
            fn registered() -> Self {
                let mut r = $crate::admin::metrics::Registrar::new();
                $(
                    let $field: $ty =
                        metric_fields!(@add r, $metric, $help $(, $unit $(, $built)?)?);
                )*
                $name {
                    registry: r.finish(),
                    $($field,)*
                }
            }
        }
    };
}
pub(crate) use metric_fields;

/// What an admin port serves at `/metrics`.
pub(crate) trait Exposition: Send + Sync + 'static {
    /// The registry in the text exposition format.
    fn encode(&self) -> Result<String, std::fmt::Error>;
}

/// `registry` in the text exposition format; `capacity` is a guess at its
/// size, so that a scrape grows the buffer once or not at all.
pub(crate) fn encode(registry: &Registry, capacity: usize) -> Result<String, std::fmt::Error> {
    let mut out = String::with_capacity(capacity);
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}
