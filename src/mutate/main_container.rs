//! Which container of a pod is the sandbox (contract: intent.main-container):
//! the one execd goes into and the decisions judge as the app.

use super::denial::Denial;
use super::inject;
use super::intent::Intent;
use super::read::{self, pod::SpecView};
use crate::config::Config;

/// The sandbox container: the one the annotation names, else `sandbox`, else
/// the first that is not an egress sidecar (the classic `OpenSandbox` layout
/// puts the sidecar among the containers).
pub(crate) fn main_container(
    spec: &SpecView<'_>,
    intent: &Intent,
    config: &Config,
) -> Result<usize, Denial> {
    let containers = spec.containers();
    if containers.is_empty() {
        return Err(Denial::NoContainers);
    }
    if let Some(name) = &intent.main_container {
        let found = containers
            .iter()
            .position(|c| c.name == name.as_str())
            .ok_or_else(|| Denial::MainContainerNotFound {
                key: config.keys().main_container.clone(),
                name: name.clone(),
                known: containers
                    .iter()
                    .map(|c| c.name.as_ref())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        reserved_main(&containers[found], config)?;
        return Ok(found);
    }
    let main = containers
        .iter()
        .position(|c| c.name == "sandbox")
        .or_else(|| {
            containers
                .iter()
                .position(|c| c.name != inject::owned::EGRESS)
        })
        .unwrap_or(0);
    reserved_main(&containers[main], config)?;
    Ok(main)
}

/// The sandbox container cannot be one the webhook owns the name of: it
/// would be checked, and replaced, as the sidecar.
fn reserved_main(c: &read::pod::ContainerView<'_>, config: &Config) -> Result<(), Denial> {
    if c.name == inject::owned::EGRESS || c.name == inject::owned::INSTALLER {
        return Err(Denial::ReservedMainContainer {
            name: c.name.to_string(),
            key: config.keys().main_container.clone(),
        });
    }
    Ok(())
}
