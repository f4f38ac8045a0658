//! Every built-in kind k8s-openapi has, decoded from Kubernetes' own protobuf golden files
//! (k8s.io/api `testdata/HEAD`, the same fuzzed object in protobuf and in JSON) equals the
//! same object decoded from the JSON by serde: the protobuf decoder is as faithful as JSON
//! for each of them, field by field (times, quantities, int-or-strings, raw extensions,
//! managed fields, maps, inlined structs, bytes, zero values JSON omits).

use std::path::Path;

use kube_informer::protobuf::{ProtoKind, decode_object_of};
use serde::{Serialize, de::DeserializeOwned};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/protobuf/testdata");

/// The first path where two JSON values differ.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                let (l, r) = (
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                );
                if let Some(found) = first_difference(l, r, &format!("{path}.{key}")) {
                    return Some(found);
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (l, r))| first_difference(l, r, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: protobuf {a} / JSON {b}")),
    }
}

fn check<K>(name: &str, failures: &mut Vec<String>, unreadable: &mut Vec<String>)
where
    K: k8s_openapi::Resource + DeserializeOwned + Serialize + PartialEq + 'static,
{
    let dir = Path::new(DIR);
    let pb = std::fs::read(dir.join(format!("{name}.pb"))).unwrap();
    let json = std::fs::read(dir.join(format!("{name}.json"))).unwrap();
    // The fuzzer writes values k8s-openapi's types refuse (`null` where they want a time,
    // say): such a file says nothing about protobuf.
    let from_json: K = match serde_json::from_slice(&json) {
        Ok(object) => object,
        Err(error) => {
            unreadable.push(format!("{name}: {error}"));
            return;
        }
    };
    let kind = ProtoKind::of_type::<K>().expect("a built-in kind");
    assert!(kind.has_generated_decoder(), "{name}: no generated decoder");
    // The generated decoder, and the serde path (which DynamicObject and compact objects
    // take): each equal to JSON.
    for (path, kind) in [
        ("generated", kind),
        ("serde", kind.without_generated_decoder()),
    ] {
        match decode_object_of::<K>(&pb, kind) {
            Err(error) => failures.push(format!("{name} ({path}): {error}")),
            Ok(from_pb) if from_pb != from_json => {
                let (a, b) = (
                    serde_json::to_value(&from_pb).unwrap(),
                    serde_json::to_value(&from_json).unwrap(),
                );
                let found =
                    first_difference(&a, &b, "").unwrap_or_else(|| "equal as JSON".to_owned());
                failures.push(format!("{name} ({path}): {found}"));
            }
            Ok(_) => {}
        }
    }
}

macro_rules! kinds {
    ($($name:literal => $ty:ty,)*) => {
        #[test]
        fn every_built_in_kind_decodes_from_protobuf_as_from_json() {
            let (mut failures, mut unreadable) = (Vec::new(), Vec::new());
            let mut checked = 0;
            $(
                check::<$ty>($name, &mut failures, &mut unreadable);
                checked += 1;
            )*
            eprintln!("{} kinds; JSON that k8s-openapi cannot read ({}):\n{}", checked, unreadable.len(), unreadable.join("\n"));
            assert!(failures.is_empty(), "{} of {checked} kinds differ:\n{}", failures.len(), failures.join("\n"));
            assert!(unreadable.len() * 10 < checked, "too few kinds compared: {}", unreadable.len());
        }
    };
}

kinds! {
    "admissionregistration.k8s.io.v1.MutatingAdmissionPolicy" => k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy,
    "admissionregistration.k8s.io.v1.MutatingAdmissionPolicyBinding" => k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicyBinding,
    "admissionregistration.k8s.io.v1.MutatingWebhookConfiguration" => k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
    "admissionregistration.k8s.io.v1.ValidatingAdmissionPolicy" => k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
    "admissionregistration.k8s.io.v1.ValidatingAdmissionPolicyBinding" => k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    "admissionregistration.k8s.io.v1.ValidatingWebhookConfiguration" => k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    "admissionregistration.k8s.io.v1alpha1.MutatingAdmissionPolicy" => k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicy,
    "admissionregistration.k8s.io.v1alpha1.MutatingAdmissionPolicyBinding" => k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding,
    "admissionregistration.k8s.io.v1beta1.MutatingAdmissionPolicy" => k8s_openapi::api::admissionregistration::v1beta1::MutatingAdmissionPolicy,
    "admissionregistration.k8s.io.v1beta1.MutatingAdmissionPolicyBinding" => k8s_openapi::api::admissionregistration::v1beta1::MutatingAdmissionPolicyBinding,
    "apps.v1.ControllerRevision" => k8s_openapi::api::apps::v1::ControllerRevision,
    "apps.v1.DaemonSet" => k8s_openapi::api::apps::v1::DaemonSet,
    "apps.v1.Deployment" => k8s_openapi::api::apps::v1::Deployment,
    "apps.v1.ReplicaSet" => k8s_openapi::api::apps::v1::ReplicaSet,
    "apps.v1.StatefulSet" => k8s_openapi::api::apps::v1::StatefulSet,
    "authentication.k8s.io.v1.SelfSubjectReview" => k8s_openapi::api::authentication::v1::SelfSubjectReview,
    "authentication.k8s.io.v1.TokenRequest" => k8s_openapi::api::authentication::v1::TokenRequest,
    "authentication.k8s.io.v1.TokenReview" => k8s_openapi::api::authentication::v1::TokenReview,
    "authorization.k8s.io.v1.LocalSubjectAccessReview" => k8s_openapi::api::authorization::v1::LocalSubjectAccessReview,
    "authorization.k8s.io.v1.SelfSubjectAccessReview" => k8s_openapi::api::authorization::v1::SelfSubjectAccessReview,
    "authorization.k8s.io.v1.SelfSubjectRulesReview" => k8s_openapi::api::authorization::v1::SelfSubjectRulesReview,
    "authorization.k8s.io.v1.SubjectAccessReview" => k8s_openapi::api::authorization::v1::SubjectAccessReview,
    "autoscaling.v1.HorizontalPodAutoscaler" => k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler,
    "autoscaling.v1.Scale" => k8s_openapi::api::autoscaling::v1::Scale,
    "autoscaling.v2.HorizontalPodAutoscaler" => k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
    "batch.v1.CronJob" => k8s_openapi::api::batch::v1::CronJob,
    "batch.v1.Job" => k8s_openapi::api::batch::v1::Job,
    "certificates.k8s.io.v1.CertificateSigningRequest" => k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    "certificates.k8s.io.v1alpha1.ClusterTrustBundle" => k8s_openapi::api::certificates::v1alpha1::ClusterTrustBundle,
    "certificates.k8s.io.v1beta1.ClusterTrustBundle" => k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle,
    "certificates.k8s.io.v1beta1.PodCertificateRequest" => k8s_openapi::api::certificates::v1beta1::PodCertificateRequest,
    "coordination.k8s.io.v1.Lease" => k8s_openapi::api::coordination::v1::Lease,
    "coordination.k8s.io.v1alpha2.LeaseCandidate" => k8s_openapi::api::coordination::v1alpha2::LeaseCandidate,
    "coordination.k8s.io.v1beta1.LeaseCandidate" => k8s_openapi::api::coordination::v1beta1::LeaseCandidate,
    "core.v1.Binding" => k8s_openapi::api::core::v1::Binding,
    "core.v1.ComponentStatus" => k8s_openapi::api::core::v1::ComponentStatus,
    "core.v1.ConfigMap" => k8s_openapi::api::core::v1::ConfigMap,
    "core.v1.Endpoints" => k8s_openapi::api::core::v1::Endpoints,
    "core.v1.Event" => k8s_openapi::api::core::v1::Event,
    "core.v1.LimitRange" => k8s_openapi::api::core::v1::LimitRange,
    "core.v1.Namespace" => k8s_openapi::api::core::v1::Namespace,
    "core.v1.Node" => k8s_openapi::api::core::v1::Node,
    "core.v1.PersistentVolume" => k8s_openapi::api::core::v1::PersistentVolume,
    "core.v1.PersistentVolumeClaim" => k8s_openapi::api::core::v1::PersistentVolumeClaim,
    "core.v1.Pod" => k8s_openapi::api::core::v1::Pod,
    "core.v1.PodTemplate" => k8s_openapi::api::core::v1::PodTemplate,
    "core.v1.ReplicationController" => k8s_openapi::api::core::v1::ReplicationController,
    "core.v1.ResourceQuota" => k8s_openapi::api::core::v1::ResourceQuota,
    "core.v1.Secret" => k8s_openapi::api::core::v1::Secret,
    "core.v1.Service" => k8s_openapi::api::core::v1::Service,
    "core.v1.ServiceAccount" => k8s_openapi::api::core::v1::ServiceAccount,
    "discovery.k8s.io.v1.EndpointSlice" => k8s_openapi::api::discovery::v1::EndpointSlice,
    "events.k8s.io.v1.Event" => k8s_openapi::api::events::v1::Event,
    "flowcontrol.apiserver.k8s.io.v1.FlowSchema" => k8s_openapi::api::flowcontrol::v1::FlowSchema,
    "flowcontrol.apiserver.k8s.io.v1.PriorityLevelConfiguration" => k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
    "internal.apiserver.k8s.io.v1alpha1.StorageVersion" => k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion,
    "networking.k8s.io.v1.IPAddress" => k8s_openapi::api::networking::v1::IPAddress,
    "networking.k8s.io.v1.Ingress" => k8s_openapi::api::networking::v1::Ingress,
    "networking.k8s.io.v1.IngressClass" => k8s_openapi::api::networking::v1::IngressClass,
    "networking.k8s.io.v1.NetworkPolicy" => k8s_openapi::api::networking::v1::NetworkPolicy,
    "networking.k8s.io.v1.ServiceCIDR" => k8s_openapi::api::networking::v1::ServiceCIDR,
    "networking.k8s.io.v1beta1.IPAddress" => k8s_openapi::api::networking::v1beta1::IPAddress,
    "networking.k8s.io.v1beta1.ServiceCIDR" => k8s_openapi::api::networking::v1beta1::ServiceCIDR,
    "node.k8s.io.v1.RuntimeClass" => k8s_openapi::api::node::v1::RuntimeClass,
    "policy.v1.Eviction" => k8s_openapi::api::policy::v1::Eviction,
    "policy.v1.PodDisruptionBudget" => k8s_openapi::api::policy::v1::PodDisruptionBudget,
    "rbac.authorization.k8s.io.v1.ClusterRole" => k8s_openapi::api::rbac::v1::ClusterRole,
    "rbac.authorization.k8s.io.v1.ClusterRoleBinding" => k8s_openapi::api::rbac::v1::ClusterRoleBinding,
    "rbac.authorization.k8s.io.v1.Role" => k8s_openapi::api::rbac::v1::Role,
    "rbac.authorization.k8s.io.v1.RoleBinding" => k8s_openapi::api::rbac::v1::RoleBinding,
    "resource.k8s.io.v1.DeviceClass" => k8s_openapi::api::resource::v1::DeviceClass,
    "resource.k8s.io.v1.ResourceClaim" => k8s_openapi::api::resource::v1::ResourceClaim,
    "resource.k8s.io.v1.ResourceClaimTemplate" => k8s_openapi::api::resource::v1::ResourceClaimTemplate,
    "resource.k8s.io.v1.ResourceSlice" => k8s_openapi::api::resource::v1::ResourceSlice,
    "resource.k8s.io.v1alpha3.DeviceTaintRule" => k8s_openapi::api::resource::v1alpha3::DeviceTaintRule,
    "resource.k8s.io.v1alpha3.ResourcePoolStatusRequest" => k8s_openapi::api::resource::v1alpha3::ResourcePoolStatusRequest,
    "resource.k8s.io.v1beta1.DeviceClass" => k8s_openapi::api::resource::v1beta1::DeviceClass,
    "resource.k8s.io.v1beta1.ResourceClaim" => k8s_openapi::api::resource::v1beta1::ResourceClaim,
    "resource.k8s.io.v1beta1.ResourceClaimTemplate" => k8s_openapi::api::resource::v1beta1::ResourceClaimTemplate,
    "resource.k8s.io.v1beta1.ResourceSlice" => k8s_openapi::api::resource::v1beta1::ResourceSlice,
    "resource.k8s.io.v1beta2.DeviceClass" => k8s_openapi::api::resource::v1beta2::DeviceClass,
    "resource.k8s.io.v1beta2.DeviceTaintRule" => k8s_openapi::api::resource::v1beta2::DeviceTaintRule,
    "resource.k8s.io.v1beta2.ResourceClaim" => k8s_openapi::api::resource::v1beta2::ResourceClaim,
    "resource.k8s.io.v1beta2.ResourceClaimTemplate" => k8s_openapi::api::resource::v1beta2::ResourceClaimTemplate,
    "resource.k8s.io.v1beta2.ResourceSlice" => k8s_openapi::api::resource::v1beta2::ResourceSlice,
    "scheduling.k8s.io.v1.PriorityClass" => k8s_openapi::api::scheduling::v1::PriorityClass,
    "scheduling.k8s.io.v1alpha2.PodGroup" => k8s_openapi::api::scheduling::v1alpha2::PodGroup,
    "scheduling.k8s.io.v1alpha2.Workload" => k8s_openapi::api::scheduling::v1alpha2::Workload,
    "storage.k8s.io.v1.CSIDriver" => k8s_openapi::api::storage::v1::CSIDriver,
    "storage.k8s.io.v1.CSINode" => k8s_openapi::api::storage::v1::CSINode,
    "storage.k8s.io.v1.CSIStorageCapacity" => k8s_openapi::api::storage::v1::CSIStorageCapacity,
    "storage.k8s.io.v1.StorageClass" => k8s_openapi::api::storage::v1::StorageClass,
    "storage.k8s.io.v1.VolumeAttachment" => k8s_openapi::api::storage::v1::VolumeAttachment,
    "storage.k8s.io.v1.VolumeAttributesClass" => k8s_openapi::api::storage::v1::VolumeAttributesClass,
    "storage.k8s.io.v1beta1.VolumeAttributesClass" => k8s_openapi::api::storage::v1beta1::VolumeAttributesClass,
    "storagemigration.k8s.io.v1beta1.StorageVersionMigration" => k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration,
}
