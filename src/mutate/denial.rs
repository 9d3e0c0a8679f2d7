//! Why a pod cannot be admitted. Each variant renders as one sentence that
//! names the annotation or field and what to change; the HTTP-style code goes
//! into `status.code` of the `AdmissionResponse`.

use thiserror::Error;

use crate::config::EgressMode;

use super::intent::IntentError;
use super::intent::platform::PlatformError;
use super::intent::policy::PolicyError;
use super::intent::token::TokenError;
use super::quote::clip;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Denial {
    /// The request object is not a readable Pod.
    #[error("the pod could not be read: {}.", clip(.0))]
    MalformedPod(String),

    #[error("annotation {key} {problem}.")]
    MalformedAnnotation { key: String, problem: String },

    #[error("the pod has no containers; add the sandbox container to spec.containers.")]
    NoContainers,

    #[error(
        "annotation {key} names container '{}', which is not in spec.containers; set it to one of: {}.",
        clip(.name),
        clip(.known)
    )]
    MainContainerNotFound {
        key: String,
        name: String,
        known: String,
    },

    #[error(
        "container '{}' has no command and annotation {key} is not set; set spec.containers[].command or {key} (a JSON array of strings), because the image's ENTRYPOINT cannot be known at admission.",
        clip(.container)
    )]
    MissingEntrypoint { container: String, key: String },

    /// Messages ported verbatim from the seed's platform checks.
    #[error("{0}")]
    Platform(#[source] PlatformError),

    #[error("annotation {key} {source}.")]
    Policy {
        key: String,
        #[source]
        source: PolicyError,
    },

    #[error(
        "annotation {key} is {seconds}s, below the minimum sandbox timeout of 60s; set it to 60 or more."
    )]
    TimeoutTooShort { key: String, seconds: u64 },

    #[error("Sandbox timeout {seconds}s exceeds configured maximum of {max}s.")]
    TimeoutAboveMaximum { seconds: u64, max: u64 },

    /// `shown` is the timeout as the message quotes it: `3600s`, or the
    /// annotation's text when it is too long for a number of seconds.
    #[error(
        "annotation {key} is {}, which puts the expiry beyond the representable time range; use a shorter timeout.",
        clip(.shown)
    )]
    TimeoutOutOfRange { key: String, shown: String },

    #[error(
        "annotation {key} is set on a pod with spec.hostNetwork: true; egress control cannot work on the host network, so remove one of them."
    )]
    HostNetworkWithPolicy { key: String },

    /// `list` is "container" or "init container".
    #[error(
        "{list} '{}' is privileged and annotation {key} asks for egress control, which a privileged container could undo; drop privileged or the network policy.",
        clip(.container)
    )]
    PrivilegedWithPolicy {
        list: &'static str,
        container: String,
        key: String,
    },

    /// `unusual`: the item is written otherwise than the capability's own
    /// name (`net_admın` is `NET_ADMIN` to containerd).
    #[error(
        "{list} '{}' adds {} and annotation {key} asks for egress control, which that capability could undo; remove {} from securityContext.capabilities.add.",
        clip(.container),
        adds(.capability, *.unusual),
        item(.capability, *.unusual)
    )]
    NetCapabilityWithPolicy {
        list: &'static str,
        container: String,
        capability: &'static str,
        unusual: bool,
        key: String,
    },

    /// `via` names what lets the container see the sidecar's processes:
    /// `spec.shareProcessNamespace: true`, `spec.hostPID: true` or its
    /// `targetContainerName`.
    #[error(
        "{list} '{}' adds {} while {via}, so it could trace the egress sidecar's processes and take its token or rules, and annotation {key} asks for egress control; remove {} from securityContext.capabilities.add or {undo}.",
        clip(.container),
        adds("SYS_PTRACE", *.unusual),
        item("SYS_PTRACE", *.unusual)
    )]
    PtraceWithSharedProcesses {
        list: &'static str,
        container: String,
        unusual: bool,
        via: &'static str,
        undo: &'static str,
        key: String,
    },

    /// `place` says where, in words and with its field: `container
    /// 'sandbox' (env[2].valueFrom.fieldRef)`, `volume 'podinfo'`.
    #[error(
        "{} reads {} through the downward API, which holds the egress token (annotation {token_key}) with which code in the sandbox could change its own egress policy, and annotation {key} asks for egress control; read only the annotations or labels it needs.",
        clip(.place),
        clip(.field_path)
    )]
    TokenByDownwardApi {
        place: String,
        field_path: String,
        token_key: String,
        key: String,
    },

    #[error(
        "{} holds the value of annotation {token_key}, the egress token, with which code in the sandbox could change its own egress policy; the token goes to the egress sidecar only, so remove it there (or leave the annotation out to have a token generated).",
        clip(.place)
    )]
    TokenCopied { place: String, token_key: String },

    #[error(
        "annotation {token_key}, the egress token, is a part of '{}', which the webhook writes into the sandbox's containers, where code in the sandbox could read it and change its own egress policy; choose another token (or leave the annotation out to have one generated).",
        clip(.written)
    )]
    TokenWritten { written: String, token_key: String },

    #[error(
        "annotation {key} sets OPENSANDBOX_EGRESS_POLICY_FILE to '{}', {why}, so code in the sandbox could write the policy the egress sidecar loads; point it at a path of the sidecar's own filesystem or leave it out.",
        clip(.path)
    )]
    PolicyFileWritable {
        key: String,
        path: String,
        why: &'static str,
    },

    #[error(
        "spec.dnsConfig.nameservers is set and annotation {key} asks for egress control in mode dns+nft, whose sidecar lets the pod's nameservers through on every port, so those addresses would be open to the sandbox; remove spec.dnsConfig.nameservers (and dnsPolicy: None) or use egress mode dns."
    )]
    NameserversWithNft { key: String },

    #[error(
        "annotation {key} asks for egress control but annotation {platform_key} is a Windows platform, and the webhook injects no egress sidecar into Windows pods, so the pod would run without egress control; remove one of them."
    )]
    WindowsWithPolicy { key: String, platform_key: String },

    /// An UPDATE that changes the image of a container the webhook
    /// injected.
    #[error(
        "{list} '{container}' was injected by the webhook and its image cannot change after admission (from '{}' to '{}'): it runs with the privileges of egress control beside the sandbox; delete and create the pod again instead.",
        clip(.from),
        clip(.to)
    )]
    InjectedImageChanged {
        list: &'static str,
        container: &'static str,
        from: String,
        to: String,
    },

    #[error(
        "annotation {key} asks for egress control but the webhook has no egress image configured; ask the cluster operator to set egress.image or remove the annotation."
    )]
    NoEgressImage { key: String },

    #[error(
        "annotation {key} is \"true\" but annotation {policy_key} is not set; the credential proxy runs in the egress sidecar, so add a network policy or remove {key}."
    )]
    CredentialProxyWithoutPolicy { key: String, policy_key: String },

    #[error(
        "annotation {key} sets environment for the egress sidecar but annotation {policy_key} is not set; there is no sidecar without a network policy, so add one or remove {key}."
    )]
    WithoutPolicy { key: String, policy_key: String },

    #[error(
        "credential proxy requires egress mode dns+nft, and annotation {key} asks for it with mode {}: with DNS filtering alone a credential-bound host can be reached by its IP, bypassing the proxy; set annotation {mode_key} to \"dns+nft\".",
        .mode.as_str()
    )]
    CredentialProxyNeedsNft {
        key: String,
        mode_key: String,
        mode: EgressMode,
    },

    #[error(
        "annotation {key} sets OPENSANDBOX_EGRESS_MITMPROXY_SSL_INSECURE while annotation {credential_key} is \"true\"; that would turn off the certificate checks that protect the credentials, so remove one of them."
    )]
    SslInsecureWithCredentialProxy { key: String, credential_key: String },

    #[error(
        "annotation {key} asks for execd isolated sessions, which need SYS_ADMIN and no seccomp or AppArmor profile, and this webhook's configuration does not allow them (execd.allowIsolation is false); remove the annotation or ask the cluster operator to set execd.allowIsolation."
    )]
    IsolationNotAllowed { key: String },

    #[error(
        "annotation {key} asks for egress control, but runtime class '{}' cannot run the egress sidecar: it needs the iptables nat table, which that runtime does not provide, so the pod would never become ready; use a compatible runtime class (such as kata) or remove {key}.",
        clip(.runtime)
    )]
    IncompatibleRuntime { runtime: String, key: String },

    #[error(
        "annotation {mode_key} is \"dns\", but this cluster sends egress through an upstream proxy (egress.upstreamProxy), which the egress sidecar chains to in mode dns+nft only; remove the annotation or set it to \"dns+nft\"."
    )]
    UpstreamProxyNeedsNft { mode_key: String },

    #[error(
        "annotation {key} turns on OPENSANDBOX_EGRESS_MITMPROXY_SSL_INSECURE, which this cluster's upstream proxy (egress.upstreamProxy) does not allow: the proxied connections would go unchecked; remove that entry."
    )]
    UpstreamProxySslInsecure { key: String },

    #[error(
        "annotation {policy_key} asks for egress control, and this cluster sends egress through an upstream proxy (egress.upstreamProxy), which only the sidecar's transparent proxy chains to; set annotation {credential_key} to \"true\", or add \"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT\": \"true\" to annotation {env_key}."
    )]
    UpstreamProxyNeedsTransparent {
        policy_key: String,
        credential_key: String,
        env_key: String,
    },

    #[error("label {key} must be a string; set it to the sandbox's id.")]
    MalformedLabel { key: String },

    #[error(
        "volume '{volume}' is not an emptyDir; the webhook owns that volume name, so rename your volume."
    )]
    VolumeNotEmptyDir { volume: String },

    #[error(
        "container '{}' mounts volume '{}' at {path}, where the webhook installs execd; mount it elsewhere.",
        clip(.container),
        clip(.volume)
    )]
    MountPathTaken {
        container: String,
        volume: String,
        path: String,
    },

    #[error(
        "{list} '{name}' was not injected by this webhook but uses a name it reserves; rename that container."
    )]
    ReservedContainerName { list: &'static str, name: String },

    #[error(
        "the pod names '{name}' more than once among its containers and init containers; container names must be unique, and the webhook owns that one."
    )]
    DuplicateContainerName { name: String },

    #[error(
        "the sandbox container would be '{name}', a name the webhook reserves for a container it injects; rename it, or name the sandbox container with annotation {key}."
    )]
    ReservedMainContainer { name: String, key: String },

    #[error("the webhook could not generate an egress token ({0}); retry the request.")]
    TokenUnavailable(#[source] TokenError),

    /// A workload's pod template whose pods would be denied (contract:
    /// workload.denial): the pod's denial, prefixed by the template's path.
    #[error("{path}: {denial}")]
    InTemplate {
        path: &'static str,
        denial: Box<Denial>,
    },

    /// Only a broken `Serialize` impl in this crate could cause it.
    #[error("the webhook could not encode its patch ({0}); this is a bug in the webhook.")]
    PatchEncoding(String),
}

impl Denial {
    /// 403 for what the security rules forbid; 400 for everything that is
    /// malformed or cannot be satisfied.
    #[must_use]
    pub fn code(&self) -> u16 {
        match self {
            Denial::InTemplate { denial, .. } => denial.code(),
            Denial::HostNetworkWithPolicy { .. }
            | Denial::PrivilegedWithPolicy { .. }
            | Denial::NetCapabilityWithPolicy { .. }
            | Denial::PtraceWithSharedProcesses { .. }
            | Denial::TokenByDownwardApi { .. }
            | Denial::TokenCopied { .. }
            | Denial::TokenWritten { .. }
            | Denial::PolicyFileWritable { .. }
            | Denial::NameserversWithNft { .. }
            | Denial::InjectedImageChanged { .. }
            | Denial::IsolationNotAllowed { .. } => 403,
            Denial::TokenUnavailable(_) | Denial::PatchEncoding(_) => 500,
            _ => 400,
        }
    }

    /// The machine-readable `status.reason` of the response.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self.code() {
            403 => "Forbidden",
            500 => "InternalError",
            _ => "BadRequest",
        }
    }
}

/// What a container adds, in a sentence: the capability, or an item
/// written otherwise that runtimes read as it.
fn adds(capability: &str, unusual: bool) -> String {
    if unusual {
        format!("an item that runtimes read as capability {capability}")
    } else {
        format!("capability {capability}")
    }
}

/// What to remove: the capability, or that item.
fn item(capability: &str, unusual: bool) -> &str {
    if unusual { "that item" } else { capability }
}

/// The one place an annotation the intent could not read becomes a sentence.
impl From<IntentError> for Denial {
    fn from(e: IntentError) -> Self {
        match e {
            IntentError::MalformedAnnotation { key, problem } => {
                Denial::MalformedAnnotation { key, problem }
            }
            IntentError::Platform(e) => Denial::Platform(e),
            IntentError::Policy { key, source } => Denial::Policy { key, source },
            IntentError::CredentialProxyWithoutPolicy { key, policy_key } => {
                Denial::CredentialProxyWithoutPolicy { key, policy_key }
            }
            IntentError::TimeoutOutOfRange { key, shown } => {
                Denial::TimeoutOutOfRange { key, shown }
            }
            IntentError::WithoutPolicy { key, policy_key } => {
                Denial::WithoutPolicy { key, policy_key }
            }
            IntentError::CredentialProxyNeedsNft {
                key,
                mode_key,
                mode,
            } => Denial::CredentialProxyNeedsNft {
                key,
                mode_key,
                mode,
            },
            IntentError::SslInsecureWithCredentialProxy {
                key,
                credential_key,
            } => Denial::SslInsecureWithCredentialProxy {
                key,
                credential_key,
            },
            IntentError::IsolationNotAllowed { key } => Denial::IsolationNotAllowed { key },
            IntentError::UpstreamProxyNeedsNft { mode_key } => {
                Denial::UpstreamProxyNeedsNft { mode_key }
            }
            IntentError::UpstreamProxySslInsecure { key } => {
                Denial::UpstreamProxySslInsecure { key }
            }
            IntentError::UpstreamProxyNeedsTransparent {
                policy_key,
                credential_key,
                env_key,
            } => Denial::UpstreamProxyNeedsTransparent {
                policy_key,
                credential_key,
                env_key,
            },
            IntentError::MalformedLabel { key } => Denial::MalformedLabel { key },
            IntentError::PolicyFileWritable { key, path, why } => {
                Denial::PolicyFileWritable { key, path, why }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::quote::MAX_QUOTED;

    #[test]
    fn long_values_are_cut_short_ones_kept() {
        let short = "x".repeat(MAX_QUOTED);
        assert_eq!(clip(&short), short.as_str());
        let long = "é".repeat(10_000);
        let cut = clip(&long);
        assert_eq!(cut.chars().count(), MAX_QUOTED + 1);
        assert!(cut.ends_with("é…"));
        let denial = Denial::MissingEntrypoint {
            container: long.clone(),
            key: "opensandbox.io/entrypoint".into(),
        };
        let message = denial.to_string();
        assert!(message.len() < 1_000, "{}", message.len());
        assert!(message.starts_with(&format!("container '{cut}' has no command")));
    }
}
