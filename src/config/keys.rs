//! The annotation and label names the webhook and its controller read or
//! write (contract: intent.known-names), listed once: [`Keys`] spells them
//! under the configured prefix, and [`ANNOTATION_NAMES`] is the list the
//! did-you-mean warning compares unknown keys with.

/// Declares [`Keys`], its constructor and [`ANNOTATION_NAMES`] from one
/// list of `field = "name"` pairs, so a new name cannot reach one and not
/// the other.
macro_rules! keys {
    ($($field:ident = $name:literal,)*) => {
        /// `<prefix>/<name>` for every annotation and label the webhook
        /// reads or writes.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Keys {
            $(pub $field: String,)*
        }

        /// The names after `<prefix>/`, in [`Keys`]' order.
        pub const ANNOTATION_NAMES: [&str; [$($name),*].len()] = [$($name),*];

        impl Keys {
            pub(super) fn new(prefix: &str) -> Self {
                Keys {
                    $($field: format!("{prefix}/{}", $name),)*
                }
            }
        }
    };
}

keys! {
    id = "id",
    inject = "inject",
    platform = "platform",
    timeout = "timeout",
    expires_at = "expires-at",
    network_policy = "network-policy",
    egress_mode = "egress-mode",
    credential_proxy = "credential-proxy",
    entrypoint = "entrypoint",
    main_container = "main-container",
    egress_auth_token = "egress-auth-token",
    manual_cleanup = "manual-cleanup",
    egress_env = "egress-env",
    execd_isolation = "execd-isolation",
    lifecycle = "lifecycle",
    injected = "injected",
    rev = "rev",
}
