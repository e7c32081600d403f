//! The part of upstream's csi-translation-lib the scheduler needs: which in-tree volume plugins
//! migrate to which CSI drivers, and the CSI driver name and volume handle (plus, for PVs, the
//! node affinity rewritten to the driver's topology key) of a translated in-tree volume.

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, Volume, VolumeNodeAffinity,
};

const ZONE_GA: &str = "topology.kubernetes.io/zone";
const REGION_GA: &str = "topology.kubernetes.io/region";
const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
const MULTI_ZONE_DELIMITER: &str = "__";
const GCE_UNSPECIFIED: &str = "UNSPECIFIED";

/// An in-tree volume plugin with a CSI migration translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InTreePlugin {
    /// kubernetes.io/aws-ebs
    AwsEbs,
    /// kubernetes.io/gce-pd
    GcePd,
    /// kubernetes.io/azure-disk
    AzureDisk,
    /// kubernetes.io/azure-file
    AzureFile,
    /// kubernetes.io/cinder
    Cinder,
    /// kubernetes.io/vsphere-volume
    VSphere,
    /// kubernetes.io/portworx-volume
    Portworx,
}

const ALL: [InTreePlugin; 7] = [
    InTreePlugin::AwsEbs,
    InTreePlugin::GcePd,
    InTreePlugin::AzureDisk,
    InTreePlugin::AzureFile,
    InTreePlugin::Cinder,
    InTreePlugin::VSphere,
    InTreePlugin::Portworx,
];

/// A translated volume: the CSI driver and the volume handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiVolume {
    /// CSI driver name.
    pub driver: String,
    /// Volume handle.
    pub handle: String,
}

impl InTreePlugin {
    /// The in-tree plugin name (`kubernetes.io/...`).
    pub fn in_tree_name(self) -> &'static str {
        match self {
            InTreePlugin::AwsEbs => "kubernetes.io/aws-ebs",
            InTreePlugin::GcePd => "kubernetes.io/gce-pd",
            InTreePlugin::AzureDisk => "kubernetes.io/azure-disk",
            InTreePlugin::AzureFile => "kubernetes.io/azure-file",
            InTreePlugin::Cinder => "kubernetes.io/cinder",
            InTreePlugin::VSphere => "kubernetes.io/vsphere-volume",
            InTreePlugin::Portworx => "kubernetes.io/portworx-volume",
        }
    }

    /// The CSI driver the plugin migrates to.
    pub fn csi_driver(self) -> &'static str {
        match self {
            InTreePlugin::AwsEbs => "ebs.csi.aws.com",
            InTreePlugin::GcePd => "pd.csi.storage.gke.io",
            InTreePlugin::AzureDisk => "disk.csi.azure.com",
            InTreePlugin::AzureFile => "file.csi.azure.com",
            InTreePlugin::Cinder => "cinder.csi.openstack.org",
            InTreePlugin::VSphere => "csi.vsphere.vmware.com",
            InTreePlugin::Portworx => "pxd.portworx.com",
        }
    }

    /// The plugin with this in-tree name.
    pub fn by_in_tree_name(name: &str) -> Option<InTreePlugin> {
        ALL.into_iter().find(|p| p.in_tree_name() == name)
    }

    /// The plugin of an inline pod volume, if it is a migratable in-tree one.
    pub fn of_inline(vol: &Volume) -> Option<InTreePlugin> {
        if vol.gce_persistent_disk.is_some() {
            Some(InTreePlugin::GcePd)
        } else if vol.aws_elastic_block_store.is_some() {
            Some(InTreePlugin::AwsEbs)
        } else if vol.cinder.is_some() {
            Some(InTreePlugin::Cinder)
        } else if vol.azure_disk.is_some() {
            Some(InTreePlugin::AzureDisk)
        } else if vol.azure_file.is_some() {
            Some(InTreePlugin::AzureFile)
        } else if vol.vsphere_volume.is_some() {
            Some(InTreePlugin::VSphere)
        } else if vol.portworx_volume.is_some() {
            Some(InTreePlugin::Portworx)
        } else {
            None
        }
    }

    /// The plugin of a PV, if it is a migratable in-tree one.
    pub fn of_pv(pv: &PersistentVolume) -> Option<InTreePlugin> {
        let s = pv.spec.as_ref()?;
        if s.gce_persistent_disk.is_some() {
            Some(InTreePlugin::GcePd)
        } else if s.aws_elastic_block_store.is_some() {
            Some(InTreePlugin::AwsEbs)
        } else if s.cinder.is_some() {
            Some(InTreePlugin::Cinder)
        } else if s.azure_disk.is_some() {
            Some(InTreePlugin::AzureDisk)
        } else if s.azure_file.is_some() {
            Some(InTreePlugin::AzureFile)
        } else if s.vsphere_volume.is_some() {
            Some(InTreePlugin::VSphere)
        } else if s.portworx_volume.is_some() {
            Some(InTreePlugin::Portworx)
        } else {
            None
        }
    }

    /// True for the plugins whose migration is always on in 1.36 (AWS EBS, GCE PD, Azure Disk,
    /// Cinder, Portworx); Azure File and vSphere are migratable but not counted as migrated.
    pub fn migration_on(self) -> bool {
        matches!(
            self,
            InTreePlugin::AwsEbs
                | InTreePlugin::GcePd
                | InTreePlugin::AzureDisk
                | InTreePlugin::Cinder
                | InTreePlugin::Portworx
        )
    }

    /// The topology key of the CSI driver the PV's zone affinity is rewritten to, if any.
    fn csi_topology_key(self) -> Option<&'static str> {
        match self {
            InTreePlugin::AwsEbs => Some("topology.ebs.csi.aws.com/zone"),
            InTreePlugin::GcePd => Some("topology.gke.io/zone"),
            InTreePlugin::Cinder => Some("topology.cinder.csi.openstack.org/zone"),
            _ => None,
        }
    }
}

/// Translates an inline in-tree volume; `Ok(None)` for types whose translation carries no CSI
/// source the scheduler can count.
pub fn translate_inline(vol: &Volume) -> Result<Option<CsiVolume>, String> {
    let Some(plugin) = InTreePlugin::of_inline(vol) else {
        return Err(format!("could not find in-tree plugin translation logic for {:?}", vol.name));
    };
    let handle = match plugin {
        InTreePlugin::AwsEbs => ebs_volume_id(&vol.aws_elastic_block_store.as_ref().expect("checked").volume_id)?,
        InTreePlugin::GcePd => {
            gce_zonal_handle(GCE_UNSPECIFIED, &vol.gce_persistent_disk.as_ref().expect("checked").pd_name)
        }
        InTreePlugin::AzureDisk => {
            let d = vol.azure_disk.as_ref().expect("checked");
            if let Some(kind) = d.kind.as_deref().filter(|k| !k.eq_ignore_ascii_case("managed")) {
                return Err(format!("kind({kind}) is not supported in csi migration"));
            }
            d.disk_uri.clone()
        }
        InTreePlugin::Cinder => vol.cinder.as_ref().expect("checked").volume_id.clone(),
        InTreePlugin::Portworx => vol.portworx_volume.as_ref().expect("checked").volume_id.clone(),
        // Their handles are never counted: migration is off for them in the scheduler.
        InTreePlugin::AzureFile | InTreePlugin::VSphere => return Ok(None),
    };
    Ok(Some(CsiVolume { driver: plugin.csi_driver().to_string(), handle }))
}

/// Translates an in-tree PV: the CSI volume plus the PV with its zone affinity rewritten to the
/// driver's topology key (what node-affinity checks of migrated volumes use).
pub fn translate_pv(pv: &PersistentVolume) -> Result<(CsiVolume, PersistentVolume), String> {
    let Some(plugin) = InTreePlugin::of_pv(pv) else {
        return Err(format!(
            "could not find in-tree plugin translation logic for {:?}",
            pv.metadata.name.as_deref().unwrap_or_default()
        ));
    };
    let spec = pv.spec.as_ref().expect("of_pv checked the spec");
    let mut out = pv.clone();
    let handle = match plugin {
        InTreePlugin::AwsEbs => ebs_volume_id(&spec.aws_elastic_block_store.as_ref().expect("checked").volume_id)
            .map_err(|e| format!("failed to translate Kubernetes ID to EBS Volume ID {e}"))?,
        InTreePlugin::GcePd => gce_pv_handle(pv, &spec.gce_persistent_disk.as_ref().expect("checked").pd_name)?,
        InTreePlugin::AzureDisk => {
            let d = spec.azure_disk.as_ref().expect("checked");
            if let Some(kind) = d.kind.as_deref().filter(|k| !k.eq_ignore_ascii_case("managed")) {
                return Err(format!("kind({kind}) is not supported in csi migration"));
            }
            d.disk_uri.clone()
        }
        InTreePlugin::Cinder => spec.cinder.as_ref().expect("checked").volume_id.clone(),
        InTreePlugin::Portworx => spec.portworx_volume.as_ref().expect("checked").volume_id.clone(),
        InTreePlugin::AzureFile => spec.azure_file.as_ref().expect("checked").share_name.clone(),
        InTreePlugin::VSphere => spec.vsphere_volume.as_ref().expect("checked").volume_path.clone(),
    };
    if let Some(key) = plugin.csi_topology_key() {
        translate_topology(&mut out, key);
    }
    Ok((CsiVolume { driver: plugin.csi_driver().to_string(), handle }, out))
}

fn gce_zonal_handle(zone: &str, pd: &str) -> String {
    format!("projects/{GCE_UNSPECIFIED}/zones/{zone}/disks/{pd}")
}

fn gce_pv_handle(pv: &PersistentVolume, pd: &str) -> Result<String, String> {
    let labels = pv.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str).unwrap_or_default();
    let zones_label = if label(ZONE_BETA).is_empty() { label(ZONE_GA) } else { label(ZONE_BETA) };
    let zones: Vec<&str> = zones_label.split(MULTI_ZONE_DELIMITER).collect();
    match zones.as_slice() {
        [z] if !z.is_empty() => Ok(gce_zonal_handle(z, pd)),
        [_] => Ok(gce_zonal_handle(GCE_UNSPECIFIED, pd)),
        many => {
            let mut regions = std::collections::BTreeSet::new();
            for z in many {
                let parts: Vec<&str> = z.split('-').collect();
                if parts.len() != 3 {
                    return Err(format!(
                        "failed to get region from zones: zone in unexpected format, expected: \
                         {{locale}}-{{region}}-{{zone}}, got: {z}"
                    ));
                }
                regions.insert(format!("{}-{}", parts[0], parts[1]));
            }
            if regions.len() != 1 {
                return Err(format!(
                    "failed to get region from zones: multiple or no regions gotten from zones, got: {regions:?}"
                ));
            }
            let region = regions.into_iter().next().expect("one region");
            Ok(format!("projects/{GCE_UNSPECIFIED}/regions/{region}/disks/{pd}"))
        }
    }
}

/// `aws://<zone>/vol-...` to `vol-...`; other forms pass through.
fn ebs_volume_id(id: &str) -> Result<String, String> {
    let Some(rest) = id.strip_prefix("aws://") else { return Ok(id.to_string()) };
    let path = rest.find('/').map(|i| &rest[i..]).unwrap_or_default();
    let aws_id = path.trim_matches('/');
    if !aws_id.starts_with("vol-") || aws_id.contains('/') {
        return Err(format!("Invalid format for AWS volume ({id})"));
    }
    Ok(aws_id.to_string())
}

fn terms_mut(pv: &mut PersistentVolume) -> Option<&mut Vec<NodeSelectorTerm>> {
    let terms = &mut pv.spec.as_mut()?.node_affinity.as_mut()?.required.as_mut()?.node_selector_terms;
    Some(terms)
}

fn affinity_has_key(pv: &PersistentVolume, key: &str) -> bool {
    topology_values(pv, key).is_some()
}

/// Values of `key` across the required terms; `None` when no requirement uses the key.
fn topology_values(pv: &PersistentVolume, key: &str) -> Option<Vec<String>> {
    let terms = &pv.spec.as_ref()?.node_affinity.as_ref()?.required.as_ref()?.node_selector_terms;
    let mut found = false;
    let mut vals = std::collections::BTreeSet::new();
    for r in terms.iter().flat_map(|t| t.match_expressions.iter().flatten()) {
        if r.key == key {
            found = true;
            vals.extend(r.values.iter().flatten().cloned());
        }
    }
    found.then(|| vals.into_iter().collect())
}

fn replace_key(pv: &mut PersistentVolume, old: &str, new: &str) {
    if let Some(terms) = terms_mut(pv) {
        for r in terms.iter_mut().flat_map(|t| t.match_expressions.iter_mut().flatten()) {
            if r.key == old {
                r.key = new.to_string();
            }
        }
    }
}

/// Rewrites the PV's zone topology to `csi_key` (from its affinity, or from its zone label when
/// the affinity has none) and its beta region requirement to the GA key.
fn translate_topology(pv: &mut PersistentVolume, csi_key: &str) {
    let has_label = |pv: &PersistentVolume, k: &str| pv.metadata.labels.as_ref().is_some_and(|l| l.contains_key(k));
    let (zone, region) = if affinity_has_key(pv, ZONE_GA) {
        (ZONE_GA, REGION_GA)
    } else if affinity_has_key(pv, ZONE_BETA) {
        (ZONE_BETA, REGION_BETA)
    } else if has_label(pv, ZONE_GA) {
        (ZONE_GA, REGION_GA)
    } else if has_label(pv, ZONE_BETA) {
        (ZONE_BETA, REGION_BETA)
    } else {
        (ZONE_GA, REGION_GA)
    };
    if topology_values(pv, zone).is_some_and(|v| !v.is_empty()) {
        replace_key(pv, zone, csi_key);
    } else if let Some(label) = pv.metadata.labels.as_ref().and_then(|l| l.get(zone)).cloned() {
        let zones: std::collections::BTreeSet<String> =
            label.split(MULTI_ZONE_DELIMITER).map(str::trim).filter(|z| !z.is_empty()).map(String::from).collect();
        if !zones.is_empty() {
            let req = NodeSelectorRequirement {
                key: csi_key.to_string(),
                operator: "In".to_string(),
                values: Some(zones.into_iter().collect()),
            };
            let spec = pv.spec.get_or_insert_with(Default::default);
            let aff = spec.node_affinity.get_or_insert_with(VolumeNodeAffinity::default);
            let req_sel = aff.required.get_or_insert_with(NodeSelector::default);
            if req_sel.node_selector_terms.is_empty() {
                req_sel.node_selector_terms.push(NodeSelectorTerm::default());
            }
            for t in &mut req_sel.node_selector_terms {
                t.match_expressions.get_or_insert_with(Vec::new).push(req.clone());
            }
        }
    }
    if region == REGION_BETA && topology_values(pv, region).is_some_and(|v| !v.is_empty()) {
        replace_key(pv, region, REGION_GA);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vol(v: serde_json::Value) -> Volume {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn inline_handles() {
        let cases = [
            (
                json!({"name": "v", "awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}),
                "ebs.csi.aws.com",
                "vol-1",
            ),
            (json!({"name": "v", "awsElasticBlockStore": {"volumeID": "vol-2"}}), "ebs.csi.aws.com", "vol-2"),
            (
                json!({"name": "v", "gcePersistentDisk": {"pdName": "d"}}),
                "pd.csi.storage.gke.io",
                "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d",
            ),
            (json!({"name": "v", "azureDisk": {"diskName": "n", "diskURI": "uri"}}), "disk.csi.azure.com", "uri"),
            (json!({"name": "v", "cinder": {"volumeID": "c"}}), "cinder.csi.openstack.org", "c"),
        ];
        for (v, driver, handle) in cases {
            let got = translate_inline(&vol(v)).unwrap().unwrap();
            assert_eq!((got.driver.as_str(), got.handle.as_str()), (driver, handle));
        }
        assert!(
            translate_inline(&vol(json!({"name": "v", "awsElasticBlockStore": {"volumeID": "aws://z/bad"}}))).is_err()
        );
    }

    #[test]
    fn gce_pv_uses_zone_labels_and_rewrites_affinity() {
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": "pv", "labels": {ZONE_GA: "us-central1-a__us-central1-b"}},
            "spec": {"gcePersistentDisk": {"pdName": "d"}}}))
        .unwrap();
        let (csi, out) = translate_pv(&pv).unwrap();
        assert_eq!(csi.handle, "projects/UNSPECIFIED/regions/us-central1/disks/d");
        let terms = &out.spec.unwrap().node_affinity.unwrap().required.unwrap().node_selector_terms;
        let r = &terms[0].match_expressions.as_ref().unwrap()[0];
        assert_eq!(r.key, "topology.gke.io/zone");
        assert_eq!(r.values.as_ref().unwrap(), &["us-central1-a", "us-central1-b"]);
    }
}
