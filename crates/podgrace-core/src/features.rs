//! The feature gates whose defaults change what a release does, as [`KubeVersion`] methods named
//! after their entries in upstream's `pkg/features/kube_features.go`.
//!
//! Each method says whether the gate is on **by default** in the release (podgrace models
//! clusters with default gates, except where a method says otherwise), with the release where it
//! turned on. API removals that are not gates (a group version no longer served) are here too,
//! named after what the release serves, so that no rule compares version numbers by hand.
//!
//! Upstream: `pkg/features/kube_features.go` `defaultVersionedKubernetesFeatureGates` (read at
//! v1.36); API removals from the Kubernetes deprecated API migration guide.

use crate::KubeVersion;

impl KubeVersion {
    /// `SidecarContainers` (KEP-753): init containers with `restartPolicy: Always` run as native
    /// sidecars, started before and stopped after the regular containers. Alpha 1.28 (off),
    /// beta and on by default from 1.29, GA 1.33.
    pub const fn sidecar_containers(self) -> bool {
        self.at_least(1, 29)
    }

    /// `PodLifecycleSleepAction` (KEP-3960): `lifecycle.preStop.sleep` (and postStart). Alpha
    /// 1.29 (off), beta and on by default from 1.30, GA 1.34.
    pub const fn pod_lifecycle_sleep_action(self) -> bool {
        self.at_least(1, 30)
    }

    /// `PodLifecycleSleepActionAllowZero`: a `sleep` of 0 seconds is valid. Alpha 1.32 (off),
    /// beta and on by default from 1.33, GA 1.34.
    pub const fn pod_lifecycle_sleep_action_allow_zero(self) -> bool {
        self.at_least(1, 33)
    }

    /// `ContainerStopSignals` (KEP-4960): the `lifecycle.stopSignal` field exists from 1.33.
    /// The gate is alpha and **off by default** (1.33 to at least 1.36): podgrace models it as
    /// enabled where the field is given, and `lint`/`explain` say so (`stop-signal-feature-gate`:
    /// without the gate the API server drops the field).
    pub const fn container_stop_signals(self) -> bool {
        self.at_least(1, 33)
    }

    /// `RelaxedEnvironmentVariableValidation`: env var names (and `envFrom` prefixes) may be
    /// any printable ASCII but `=`, instead of `[-._a-zA-Z][-._a-zA-Z0-9]*`. Alpha 1.30 (off),
    /// beta and on by default from 1.32, GA 1.34.
    pub const fn relaxed_environment_variable_validation(self) -> bool {
        self.at_least(1, 32)
    }

    /// `EnvFiles`: env vars from a file of an emptyDir (`valueFrom.fileKeyRef`); the API
    /// server's message for a `valueFrom` without a source names it. Alpha 1.34 (off), beta and
    /// on by default from 1.35.
    pub const fn env_files(self) -> bool {
        self.at_least(1, 35)
    }

    /// `KubeletEnsureSecretPulledImages` (KEP-2535): the kubelet re-checks credentials for
    /// images already present, and its `Pulled` event says "... and can be accessed by the
    /// pod". Alpha 1.33 (off), beta and on by default from 1.35.
    pub const fn kubelet_ensure_secret_pulled_images(self) -> bool {
        self.at_least(1, 35)
    }

    /// `LogarithmicScaleDown`: a ReplicaSet's scale-down ranks pods by the logarithm of their
    /// age, so pods created close together count as equally old. Alpha 1.21 (off), beta and on
    /// by default from 1.22, GA 1.31.
    pub const fn logarithmic_scale_down(self) -> bool {
        self.at_least(1, 22)
    }

    /// `PodDeletionCost`: the `controller.kubernetes.io/pod-deletion-cost` annotation orders a
    /// ReplicaSet's scale-down victims. Alpha 1.21 (off), beta and on by default from 1.22.
    pub const fn pod_deletion_cost(self) -> bool {
        self.at_least(1, 22)
    }

    /// `DeploymentReplicaSetTerminatingReplicas` (KEP-3973): Deployments and ReplicaSets count
    /// their terminating pods in `status.terminatingReplicas`. Alpha 1.33 (off), beta and on by
    /// default from 1.35.
    pub const fn deployment_replicaset_terminating_replicas(self) -> bool {
        self.at_least(1, 35)
    }

    /// Whether the release still serves `batch/v1beta1` CronJob and `policy/v1beta1`
    /// PodDisruptionBudget: both were removed in 1.25 (not a gate: an API removal).
    pub const fn serves_v1beta1_cronjob_and_pdb(self) -> bool {
        !self.at_least(1, 25)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The release each gate turned on by default, from `kube_features.go`: off the release
    /// before, on from it.
    #[test]
    fn each_gate_turns_on_in_its_release() {
        type Gate = (&'static str, fn(KubeVersion) -> bool, u32);
        let gates: [Gate; 8] = [
            ("SidecarContainers", KubeVersion::sidecar_containers, 29),
            (
                "PodLifecycleSleepAction",
                KubeVersion::pod_lifecycle_sleep_action,
                30,
            ),
            (
                "PodLifecycleSleepActionAllowZero",
                KubeVersion::pod_lifecycle_sleep_action_allow_zero,
                33,
            ),
            (
                "ContainerStopSignals",
                KubeVersion::container_stop_signals,
                33,
            ),
            (
                "KubeletEnsureSecretPulledImages",
                KubeVersion::kubelet_ensure_secret_pulled_images,
                35,
            ),
            (
                "LogarithmicScaleDown",
                KubeVersion::logarithmic_scale_down,
                22,
            ),
            ("PodDeletionCost", KubeVersion::pod_deletion_cost, 22),
            (
                "DeploymentReplicaSetTerminatingReplicas",
                KubeVersion::deployment_replicaset_terminating_replicas,
                35,
            ),
        ];
        for (name, on, since) in gates {
            assert!(
                !on(KubeVersion::new(1, since - 1)),
                "{name} before 1.{since}"
            );
            assert!(on(KubeVersion::new(1, since)), "{name} in 1.{since}");
            assert!(on(KubeVersion::LATEST), "{name} in the latest release");
        }
        assert!(KubeVersion::new(1, 24).serves_v1beta1_cronjob_and_pdb());
        assert!(!KubeVersion::new(1, 25).serves_v1beta1_cronjob_and_pdb());
    }
}
