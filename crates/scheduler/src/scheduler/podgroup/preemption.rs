//! Making room for a pod group that does not fit, after its algorithm ran:
//!
//! - upstream's workload-aware preemption (WorkloadAwarePreemption): DefaultPreemption's
//!   PodGroupPostFilter over the whole cluster, for groups without scheduling constraints,
//!   victims being pods and `disruptionMode: PodGroup` groups;
//! - past upstream, on request (GangScheduling args): gang preemption (`gangPreemption`), where
//!   every gang is one victim (never half of one) and a group with a topology constraint
//!   preempts within the one domain that costs least; and reservations (`reserveAfterSeconds`):
//!   the same search over pods of lower or equal priority, evicting nobody, whose result
//!   nominates the members so that the room freed there is kept for the gang.
//!
//! Either way the victims are only those without which the whole group fits, as the group's
//! own algorithm decides on the snapshot without them.

use std::collections::HashMap;
use std::time::Instant;

use ksched_framework::podgroup::{topology_key, PodGroupPreemption, PodGroupVictims};
use ksched_framework::{Code, PodGroupPostFilterPlugin, Snapshot, Status};

use super::algorithm::{Cycle, PostFilters};
use super::{GroupResult, GroupStatus, WAITING_FOR_PREEMPTION, WAITING_ON_RESERVATION};

/// Upstream's reason when the profile has no DefaultPreemption.
pub const NO_DEFAULT_PREEMPTION: &str =
    "default preemption plugin is not registered, workload aware preemption is disabled";
/// Upstream's reason for groups with a topology constraint.
pub const NOT_SUPPORTED_WITH_CONSTRAINTS: &str =
    "workload aware preemption is not supported for pod groups with scheduling constraints";

/// Why gang preemption made no room, for the PodGroup's condition.
fn gang_preemption_reason(s: &Status) -> String {
    let msg = s.message();
    if msg.starts_with(super::POD_GROUP_UNSCHEDULABLE) {
        return "gang preemption: the gang does not fit even without every pod and gang of lower priority".into();
    }
    format!("gang preemption: {msg}")
}

/// Nodes victims may come from: snapshot indices, or `None` for the whole cluster.
type Domain = Option<Vec<usize>>;

/// The victims chosen in one domain and where each member goes once they are gone (by UID).
struct DomainChoice {
    victims: PodGroupVictims,
    hosts: HashMap<String, String>,
}

impl Cycle<'_> {
    /// After the algorithm: preemption (upstream's or, on request, the gang's) for a group that
    /// is Unschedulable, then a reservation for a gang that has waited long enough.
    pub fn after_algorithm(&self, snap: &mut Snapshot, result: &mut GroupResult) {
        if result.status.code != Code::Unschedulable {
            return;
        }
        if self.args.gang_preemption {
            if !result.waiting_on_preemption {
                match self.gang_preemption(snap) {
                    Ok(hosts) => {
                        result.status = GroupStatus::unschedulable(&[WAITING_FOR_PREEMPTION]);
                        result.waiting_on_preemption = true;
                        result.nominations = Some(hosts);
                        return;
                    }
                    Err(s) if s.code() == Code::Error => result.status = GroupStatus::from_status(&s),
                    Err(s) => result.status.push_reason(gang_preemption_reason(&s)),
                }
            }
        } else if self.fw.handle().features.workload_aware_preemption {
            let s = self.workload_aware_preemption(snap);
            if s.is_success() {
                result.waiting_on_preemption = true;
            } else if s.code() == Code::Error {
                result.status = GroupStatus::from_status(&s);
            } else {
                result.status.push_reason(s.message());
            }
        }
        if result.status.is_rejected() && !result.waiting_on_preemption {
            if let Some(after) = self.args.reserve_after() {
                if self.waited() >= after {
                    if let Ok(choice) = self.choose_domain(snap, true) {
                        result.status.push_reason(WAITING_ON_RESERVATION);
                        result.nominations = Some(choice.hosts);
                        tracing::debug!(
                            podGroup = %format!("{}/{}", self.info.namespace, self.info.name),
                            waitFor = choice.victims.pods.len(),
                            "Reserved nodes for a gang"
                        );
                    }
                }
            }
        }
    }

    /// How long the group has waited: since its members' first attempt.
    fn waited(&self) -> std::time::Duration {
        let first = self.members.iter().filter_map(|q| q.initial_attempt_timestamp).min();
        first.map_or(std::time::Duration::ZERO, |t| Instant::now().saturating_duration_since(t))
    }

    fn post_filter_plugin(&self) -> Option<&dyn PodGroupPostFilterPlugin> {
        self.fw.plugin(ksched_plugins::names::DEFAULT_PREEMPTION).and_then(|p| p.as_pod_group_post_filter())
    }

    /// Upstream's `runWorkloadAwarePreemption`: victims over the whole cluster, checked with the
    /// group's algorithm without PostFilter, then evicted; Success means the group waits for it.
    fn workload_aware_preemption(&self, snap: &mut Snapshot) -> Status {
        let Some(plugin) = self.post_filter_plugin() else {
            return Status::unschedulable(NO_DEFAULT_PREEMPTION);
        };
        let Some(pg) = self.groups.get(&self.info.namespace, &self.info.name) else {
            return Status::error(format!(
                "failed to get pod group object: podgroup.scheduling.k8s.io {:?} not found",
                self.info.name
            ));
        };
        if topology_key(&pg).is_some() {
            return Status::unschedulable(NOT_SUPPORTED_WITH_CONSTRAINTS);
        }
        let request = PodGroupPreemption {
            pod_group: &pg,
            pods: &self.info.unscheduled_pods,
            domain: None,
            atomic_gangs: false,
            include_equal_priority: false,
        };
        let mut fits = |s: &mut Snapshot| self.algorithm(s, PostFilters::Skip).status.to_status();
        match plugin.select_pod_group_victims(&request, snap, &mut fits) {
            Ok(victims) => {
                plugin.actuate_pod_group_preemption(self.fw, &pg, &self.info.unscheduled_pods, &victims);
                Status::success()
            }
            Err(s) => s,
        }
    }

    /// Gang preemption (past upstream): the cheapest domain's victims are evicted and every
    /// member is nominated where the whole gang fits without them.
    fn gang_preemption(&self, snap: &mut Snapshot) -> Result<HashMap<String, String>, Status> {
        let choice = self.choose_domain(snap, false)?;
        if let (Some(plugin), Some(pg)) =
            (self.post_filter_plugin(), self.groups.get(&self.info.namespace, &self.info.name))
        {
            plugin.actuate_pod_group_preemption(self.fw, &pg, &self.info.unscheduled_pods, &choice.victims);
        }
        Ok(choice.hosts)
    }

    /// Searches victims in each domain the group may go to (its topology domains, else the
    /// whole cluster) and keeps the cheapest: fewest PDB violations, lowest highest victim
    /// priority, fewest pods; the first domain on ties. `reserve`: victims of equal priority
    /// too, to wait for rather than evict.
    fn choose_domain(&self, snap: &mut Snapshot, reserve: bool) -> Result<DomainChoice, Status> {
        let plugin = self.post_filter_plugin().ok_or_else(|| Status::unschedulable(NO_DEFAULT_PREEMPTION))?;
        let pg = self.groups.get(&self.info.namespace, &self.info.name).ok_or_else(|| {
            Status::error(format!(
                "failed to get pod group object: podgroup.scheduling.k8s.io {:?} not found",
                self.info.name
            ))
        })?;
        let (domains, fallback) = self.domains(snap);
        let mut best: Option<DomainChoice> = None;
        let mut last_err = Status::unschedulable(super::POD_GROUP_UNSCHEDULABLE);
        for (i, domain) in domains.iter().chain(fallback.iter()).enumerate() {
            if i >= domains.len() && best.is_some() {
                break;
            }
            let request = PodGroupPreemption {
                pod_group: &pg,
                pods: &self.info.unscheduled_pods,
                domain: domain.as_deref(),
                atomic_gangs: true,
                include_equal_priority: reserve,
            };
            let mut hosts = HashMap::new();
            let mut fits = |s: &mut Snapshot| {
                let r = self.default_algorithm(s, domain.as_deref(), PostFilters::Off);
                if r.status.is_success() {
                    hosts = r.hosts(self.members);
                }
                r.status.to_status()
            };
            match plugin.select_pod_group_victims(&request, snap, &mut fits) {
                Ok(victims) => {
                    if best.as_ref().is_none_or(|b| victims.cost() < b.victims.cost()) {
                        best = Some(DomainChoice { victims, hosts });
                    }
                }
                Err(s) if s.code() == Code::Error => return Err(s),
                Err(s) => last_err = s,
            }
        }
        best.ok_or(last_err)
    }

    /// The domains (snapshot indices) to make room in: the group's topology placements with
    /// TopologyAwareWorkloadScheduling, else the whole cluster (`None`); plus, in the
    /// generator's preferred mode, the whole cluster as a last resort.
    fn domains(&self, snap: &Snapshot) -> (Vec<Domain>, Vec<Domain>) {
        if !self.fw.handle().features.topology_aware_workload_scheduling {
            return (vec![None], vec![]);
        }
        match self.placements(snap) {
            Ok(placements) => {
                let (fallbacks, domains): (Vec<_>, Vec<_>) = placements.into_iter().partition(|p| p.fallback);
                if domains.len() == 1 && domains[0].name.is_empty() {
                    return (vec![None], vec![]);
                }
                let fallback = if fallbacks.is_empty() { vec![] } else { vec![None] };
                (domains.iter().map(|p| Some(Self::indices(snap, p))).collect(), fallback)
            }
            Err(_) => (vec![], vec![]),
        }
    }
}
