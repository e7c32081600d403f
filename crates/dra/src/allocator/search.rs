//! One allocation attempt on one node: validation of the requests, the depth-first search and
//! the assembly of the results.
//!
//! Devices are addressed by their position ([`Loc`]) in the node's pools, which is stable for
//! the attempt and unique per device (pools validate device names).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::resource::v1::{
    AllocationResult, CapacityRequirements, Device, DeviceClass, DeviceRequest, DeviceSelector, DeviceSubRequest,
    DeviceToleration, ExactDeviceRequest, ResourceClaim, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use ksched_framework::node::Node;

use super::capacity::{self, Amount, Consumed};
use super::constraints::Constraint;
use super::counters::{self, CounterSets};
use super::pools::{node_matches, Pool};
use super::selection;
use super::{config_entry, device_result, empty_result, node_selector_for, AllocError, Allocator, DeviceId};
use crate::cel::DeviceView;
use crate::claim::{kobj, tolerates_taint, ALLOCATION_RESULTS_MAX_SIZE};

/// A device's position: pool, slice within the pool, device within the slice.
pub(crate) type Loc = (usize, usize, usize);

/// A request (or one subrequest of a `firstAvailable` request) of a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct ReqKey {
    claim: usize,
    request: usize,
    sub: usize,
}

/// Read access to the fields a request and a subrequest share.
#[derive(Clone, Copy)]
enum Req<'a> {
    Exact(&'a DeviceRequest),
    Sub(&'a DeviceSubRequest),
}

static NO_EXACT: ExactDeviceRequest = ExactDeviceRequest {
    admin_access: None,
    allocation_mode: None,
    capacity: None,
    count: None,
    device_class_name: String::new(),
    selectors: None,
    tolerations: None,
};

impl<'a> Req<'a> {
    fn exact(&self) -> &'a ExactDeviceRequest {
        match self {
            Req::Exact(r) => r.exactly.as_ref().unwrap_or(&NO_EXACT),
            Req::Sub(_) => &NO_EXACT,
        }
    }
    fn name(&self) -> &'a str {
        match self {
            Req::Exact(r) => &r.name,
            Req::Sub(s) => &s.name,
        }
    }
    fn class_name(&self) -> &'a str {
        match self {
            Req::Exact(_) => &self.exact().device_class_name,
            Req::Sub(s) => &s.device_class_name,
        }
    }
    fn mode(&self) -> &'a str {
        match self {
            Req::Exact(_) => self.exact().allocation_mode.as_deref().unwrap_or(""),
            Req::Sub(s) => s.allocation_mode.as_deref().unwrap_or(""),
        }
    }
    fn count(&self) -> i64 {
        match self {
            Req::Exact(_) => self.exact().count.unwrap_or(0),
            Req::Sub(s) => s.count.unwrap_or(0),
        }
    }
    fn admin_access(&self) -> bool {
        matches!(self, Req::Exact(_)) && self.exact().admin_access == Some(true)
    }
    fn has_admin_access(&self) -> bool {
        matches!(self, Req::Exact(_)) && self.exact().admin_access.is_some()
    }
    fn selectors(&self) -> &'a [DeviceSelector] {
        match self {
            Req::Exact(_) => self.exact().selectors.as_deref().unwrap_or_default(),
            Req::Sub(s) => s.selectors.as_deref().unwrap_or_default(),
        }
    }
    fn tolerations(&self) -> Option<&'a Vec<DeviceToleration>> {
        match self {
            Req::Exact(_) => self.exact().tolerations.as_ref(),
            Req::Sub(s) => s.tolerations.as_ref(),
        }
    }
    fn capacities(&self) -> Option<&'a CapacityRequirements> {
        match self {
            Req::Exact(_) => self.exact().capacity.as_ref(),
            Req::Sub(s) => s.capacity.as_ref(),
        }
    }
}

struct RequestData<'a> {
    request: Req<'a>,
    parent: Option<&'a DeviceRequest>,
    class: Option<Arc<DeviceClass>>,
    num_devices: usize,
    selected_sub_request: usize,
    all_devices: Vec<Loc>,
}

impl RequestData<'_> {
    fn request_name(&self) -> String {
        match self.parent {
            Some(p) => format!("{}/{}", p.name, self.request.name()),
            None => self.request.name().to_string(),
        }
    }
}

struct DeviceResult {
    request: String,
    parent: Option<String>,
    loc: Loc,
    id: DeviceId,
    share_id: Option<String>,
    consumed: Option<BTreeMap<String, Amount>>,
    admin_access: Option<bool>,
}

/// Why the search stopped early.
enum Stop {
    /// The claim would exceed the device limit: try other subrequests further up.
    MaxSizeExceeded,
    /// Fatal, node failure or timeout: give up.
    Abort(AllocError),
}

impl From<AllocError> for Stop {
    fn from(e: AllocError) -> Self {
        Stop::Abort(e)
    }
}

/// What `allocate_device` changed, to undo it when backtracking.
struct Undo {
    base_request: String,
    sub_request: String,
    allow_multiple: bool,
    result_index: usize,
}

pub(crate) struct Run<'a> {
    a: &'a Allocator,
    node: &'a Node,
    claims: &'a [&'a ResourceClaim],
    pub pools: Cow<'a, [Pool]>,
    requests: HashMap<ReqKey, RequestData<'a>>,
    constraints: Vec<Vec<Constraint>>,
    consumed_counters: HashMap<String, CounterSets>,
    /// Devices being allocated in this attempt, with the claims they are for.
    allocating: HashMap<Loc, Vec<usize>>,
    allocating_capacity: HashMap<Loc, Consumed>,
    results: Vec<Vec<DeviceResult>>,
    /// Selector results per device and request (selectors do not depend on the search).
    matches: RefCell<HashMap<(Loc, ReqKey), bool>>,
    /// Per pool, slice and device: allocated exclusively outside this attempt (looked up once
    /// per pool, since most devices of a busy node get looked at).
    taken: Vec<Vec<Vec<bool>>>,
    deadline: Option<Instant>,
    pub steps: u64,
}

fn requests_of(claim: &ResourceClaim) -> &[DeviceRequest] {
    claim.spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or_default()
}

fn devices_of(slice: &ResourceSlice) -> &[Device] {
    slice.spec.devices.as_deref().unwrap_or_default()
}

impl<'a> Run<'a> {
    pub fn new(
        a: &'a Allocator,
        node: &'a Node,
        claims: &'a [&'a ResourceClaim],
        pools: Cow<'a, [Pool]>,
        deadline: Option<Instant>,
    ) -> Self {
        Run {
            a,
            node,
            claims,
            pools,
            requests: HashMap::default(),
            constraints: Vec::new(),
            consumed_counters: HashMap::default(),
            allocating: HashMap::default(),
            allocating_capacity: HashMap::default(),
            results: (0..claims.len()).map(|_| Vec::new()).collect(),
            matches: RefCell::default(),
            taken: Vec::new(),
            deadline,
            steps: 0,
        }
    }

    /// Looks up which devices of the node's pools are taken.
    fn look_up_taken(&mut self) {
        let state = &self.a.state;
        self.taken = self
            .pools
            .iter()
            .map(|p| {
                p.slices
                    .iter()
                    .map(|s| {
                        let names: Vec<&str> = devices_of(s).iter().map(|d| d.name.as_str()).collect();
                        let mut taken = vec![false; names.len()];
                        state.mark_taken(&p.driver, &p.pool, &names, &mut taken);
                        taken
                    })
                    .collect()
            })
            .collect();
    }

    fn slice(&self, loc: Loc) -> Arc<ResourceSlice> {
        self.pools[loc.0].slices[loc.1].clone()
    }

    fn device_id(&self, loc: Loc) -> DeviceId {
        let p = &self.pools[loc.0];
        let s = &p.slices[loc.1];
        DeviceId::new(&p.driver, &p.pool, &devices_of(s)[loc.2].name)
    }

    /// Checks every request and resolves classes, "all" device sets and constraints.
    pub fn prepare(&mut self) -> Result<(), AllocError> {
        self.look_up_taken();
        let features = self.a.features;
        for (ci, claim) in self.claims.iter().enumerate() {
            let claim: &'a ResourceClaim = claim;
            let mut min_devices = 0usize;
            for (ri, request) in requests_of(claim).iter().enumerate() {
                let subs = request.first_available.as_deref().unwrap_or_default();
                if !features.prioritized_list && !subs.is_empty() {
                    return Err(AllocError::Fatal(format!(
                        "claim {}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                        kobj(&claim.metadata),
                        request.name
                    )));
                }
                if !features.consumable_capacity {
                    if request.exactly.as_ref().is_some_and(|e| e.capacity.is_some()) {
                        return Err(AllocError::Fatal(format!(
                            "claim {}, request {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                            kobj(&claim.metadata),
                            request.name
                        )));
                    }
                    if let Some(s) = subs.iter().find(|s| s.capacity.is_some()) {
                        return Err(AllocError::Fatal(format!(
                            "claim {}, subrequest {}: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                            kobj(&claim.metadata),
                            s.name
                        )));
                    }
                }
                if subs.is_empty() {
                    let key = ReqKey { claim: ci, request: ri, sub: 0 };
                    let data = self.validate_request(Req::Exact(request), None, key)?;
                    min_devices += data.num_devices;
                    self.requests.insert(key, data);
                } else {
                    let mut min = usize::MAX;
                    for (si, sub) in subs.iter().enumerate() {
                        let key = ReqKey { claim: ci, request: ri, sub: si };
                        let data = self.validate_request(Req::Sub(sub), Some(request), key)?;
                        min = min.min(data.num_devices);
                        self.requests.insert(key, data);
                    }
                    min_devices += min;
                }
            }
            if min_devices > ALLOCATION_RESULTS_MAX_SIZE {
                return Err(AllocError::Fatal(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}",
                    kobj(&claim.metadata)
                )));
            }
            let mut constraints = Vec::new();
            let specs = claim.spec.devices.as_ref().and_then(|d| d.constraints.as_deref()).unwrap_or_default();
            for (i, c) in specs.iter().enumerate() {
                let requests = c.requests.clone().unwrap_or_default();
                if let Some(m) = &c.match_attribute {
                    constraints.push(Constraint::match_attribute(m.clone(), requests));
                } else if let Some(d) = &c.distinct_attribute {
                    constraints.push(Constraint::distinct_attribute(d.clone(), requests));
                } else {
                    return Err(AllocError::Fatal(format!(
                        "claim {}, constraint #{i}: empty constraint (unsupported constraint type?)",
                        kobj(&claim.metadata)
                    )));
                }
            }
            self.constraints.push(constraints);
        }
        Ok(())
    }

    fn validate_request(
        &mut self,
        request: Req<'a>,
        parent: Option<&'a DeviceRequest>,
        key: ReqKey,
    ) -> Result<RequestData<'a>, AllocError> {
        let claim = self.claims[key.claim];
        let mut data = RequestData {
            request,
            parent,
            class: None,
            num_devices: 0,
            selected_sub_request: 0,
            all_devices: Vec::new(),
        };
        for (i, s) in request.selectors().iter().enumerate() {
            if s.cel.is_none() {
                return Err(AllocError::Fatal(format!(
                    "claim {}, request {}, selector #{i}: CEL expression empty (unsupported selector type?)",
                    kobj(&claim.metadata),
                    request.name()
                )));
            }
        }
        if !self.a.features.admin_access && request.has_admin_access() {
            return Err(AllocError::Fatal(format!(
                "claim {}, request {}: admin access is requested, but the feature is disabled",
                kobj(&claim.metadata),
                request.name()
            )));
        }
        let class_name = request.class_name();
        if class_name.is_empty() {
            return Err(AllocError::Fatal(format!(
                "claim {}, request {}: missing device class name (unsupported request type?)",
                kobj(&claim.metadata),
                request.name()
            )));
        }
        let Some(class) = self.a.classes.get(class_name) else {
            return Err(AllocError::Fatal(format!(
                "claim {}, request {}: could not retrieve device class {class_name}: deviceclass.resource.k8s.io {class_name:?} not found",
                kobj(&claim.metadata),
                request.name()
            )));
        };
        data.class = Some(class);
        match request.mode() {
            "ExactCount" => data.num_devices = usize::try_from(request.count()).unwrap_or(0),
            "All" => {
                for p in 0..self.pools.len() {
                    let pool = &self.pools[p];
                    if pool.incomplete {
                        return Err(AllocError::Fatal(format!(
                            "claim {}, request {}: asks for all devices, but resource pool {} is currently being updated",
                            kobj(&claim.metadata),
                            request.name(),
                            pool.id()
                        )));
                    }
                    if pool.invalid {
                        return Err(AllocError::Fatal(format!(
                            "claim {}, request {}: asks for all devices, but resource pool {} is currently invalid",
                            kobj(&claim.metadata),
                            request.name(),
                            pool.id()
                        )));
                    }
                    for s in 0..pool.slices.len() {
                        let n = devices_of(&self.pools[p].slices[s]).len();
                        for d in 0..n {
                            let loc = (p, s, d);
                            if !self.is_selectable(key, &data, loc)? {
                                continue;
                            }
                            if self.a.features.consumable_capacity && !self.capacity_fits(request, loc) {
                                continue;
                            }
                            data.all_devices.push(loc);
                        }
                    }
                }
                data.num_devices = data.all_devices.len();
            }
            other => {
                return Err(AllocError::Fatal(format!(
                    "claim {}, request {}: unsupported count mode {other}",
                    kobj(&claim.metadata),
                    request.name()
                )))
            }
        }
        Ok(data)
    }

    /// Runs the search from the first claim.
    pub fn search(&mut self) -> Result<bool, AllocError> {
        match self.allocate_one(ReqKey { claim: 0, request: 0, sub: 0 }, 0, false, (0, 0, 0)) {
            Ok(found) => Ok(found),
            Err(Stop::MaxSizeExceeded) => Ok(false),
            Err(Stop::Abort(e)) => Err(e),
        }
    }

    /// Tries every eligible device for device number `device` of request `r`, recursing into
    /// the following ones; `start` skips devices an earlier device of the same request already
    /// covered (combinations, not permutations).
    fn allocate_one(&mut self, r: ReqKey, device: usize, in_sub_request: bool, start: Loc) -> Result<bool, Stop> {
        self.steps += 1;
        // Reading the clock every step costs more than the steps themselves.
        if self.steps % 16 == 1 && self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Stop::Abort(AllocError::Timeout));
        }
        if r.claim >= self.claims.len() {
            return Ok(true);
        }
        let claim = self.claims[r.claim];
        if r.request >= requests_of(claim).len() {
            return match self.allocate_one(ReqKey { claim: r.claim + 1, request: 0, sub: 0 }, 0, false, (0, 0, 0)) {
                Err(Stop::MaxSizeExceeded) => Ok(false),
                other => other,
            };
        }
        let has_parent = self.requests[&r].parent.is_some();
        if !in_sub_request && has_parent {
            let mut all_exceeded = true;
            for sub in 0.. {
                let key = ReqKey { sub, ..r };
                if !self.requests.contains_key(&key) {
                    return if all_exceeded { Err(Stop::MaxSizeExceeded) } else { Ok(false) };
                }
                match self.allocate_one(key, device, true, (0, 0, 0)) {
                    Err(Stop::MaxSizeExceeded) => continue,
                    Err(e) => return Err(e),
                    Ok(found) => {
                        all_exceeded = false;
                        if found {
                            if let Some(d) = self.requests.get_mut(&r) {
                                d.selected_sub_request = sub;
                            }
                            return Ok(true);
                        }
                    }
                }
            }
        }

        let data = &self.requests[&r];
        let request = data.request;
        let all = request.mode() == "All";
        if all && data.all_devices.is_empty() {
            return Ok(false);
        }
        if device >= data.num_devices {
            return self.allocate_one(ReqKey { claim: r.claim, request: r.request + 1, sub: 0 }, 0, false, (0, 0, 0));
        }
        if self.results[r.claim].len() + data.num_devices - device > ALLOCATION_RESULTS_MAX_SIZE {
            return Err(Stop::MaxSizeExceeded);
        }

        if all {
            let loc = data.all_devices[device];
            let Some(undo) = self.allocate_device(r, loc, true)? else { return Ok(false) };
            match self.allocate_one(r, device + 1, in_sub_request, (0, 0, 0)) {
                Ok(true) => return Ok(true),
                other => {
                    self.deallocate(r, loc, undo);
                    return other;
                }
            }
        }

        if self.a.device_selection.reorders(data.num_devices, request.capacities().is_some()) {
            return self.allocate_best_fit(r, in_sub_request);
        }
        for p in start.0..self.pools.len() {
            if self.pools[p].incomplete || self.pools[p].invalid {
                continue;
            }
            let slice_start = if p == start.0 { start.1 } else { 0 };
            for s in slice_start..self.pools[p].slices.len() {
                let slice = self.pools[p].slices[s].clone();
                let device_start = if p == start.0 && s == start.1 { start.2 } else { 0 };
                for d in device_start..devices_of(&slice).len() {
                    let loc = (p, s, d);
                    if !self.is_candidate(r, request, loc)? {
                        continue;
                    }
                    let Some(undo) = self.allocate_device(r, loc, false)? else { continue };
                    match self.allocate_one(r, device + 1, in_sub_request, (p, s, d + 1)) {
                        Ok(true) => return Ok(true),
                        Ok(false) => self.deallocate(r, loc, undo),
                        Err(e) => {
                            self.deallocate(r, loc, undo);
                            return Err(e);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// Whether the device at `loc` may serve request `r` before constraints and counters: free
    /// (or admin access), selected, and with room for the request's capacity.
    #[inline]
    fn is_candidate(&self, r: ReqKey, request: Req<'_>, loc: Loc) -> Result<bool, Stop> {
        if request.admin_access() {
            if self.allocating_for_claim(loc, r.claim) {
                return Ok(false);
            }
        } else if self.in_use(loc) {
            return Ok(false);
        }
        if !self.is_selectable(r, &self.requests[&r], loc).map_err(Stop::Abort)? {
            return Ok(false);
        }
        Ok(!self.a.features.consumable_capacity || self.capacity_fits(request, loc))
    }

    /// The only device of request `r`, tried in best-fit order (see `selection`): the candidates
    /// with the least capacity left after the request first, then the rest of the search as in
    /// the listed walk.
    fn allocate_best_fit(&mut self, r: ReqKey, in_sub_request: bool) -> Result<bool, Stop> {
        let request = self.requests[&r].request;
        let mut candidates = Vec::new();
        for p in 0..self.pools.len() {
            if self.pools[p].incomplete || self.pools[p].invalid {
                continue;
            }
            for s in 0..self.pools[p].slices.len() {
                let slice = self.pools[p].slices[s].clone();
                for (d, dev) in devices_of(&slice).iter().enumerate() {
                    let loc = (p, s, d);
                    if !self.is_candidate(r, request, loc)? {
                        continue;
                    }
                    let left = selection::share_left(
                        dev.capacity.as_ref(),
                        self.consumed(loc).as_ref(),
                        self.allocating_capacity.get(&loc),
                        request.capacities(),
                    );
                    candidates.push((loc, left));
                }
            }
        }
        selection::best_fit_order(&mut candidates);
        for (loc, _) in candidates {
            let Some(undo) = self.allocate_device(r, loc, false)? else { continue };
            match self.allocate_one(r, 1, in_sub_request, (loc.0, loc.1, loc.2 + 1)) {
                Ok(true) => return Ok(true),
                Ok(false) => self.deallocate(r, loc, undo),
                Err(e) => {
                    self.deallocate(r, loc, undo);
                    return Err(e);
                }
            }
        }
        Ok(false)
    }

    fn allocating_for_claim(&self, loc: Loc, claim: usize) -> bool {
        self.allocating.get(&loc).is_some_and(|c| c.contains(&claim))
    }

    fn in_use(&self, loc: Loc) -> bool {
        self.taken[loc.0][loc.1][loc.2] || self.allocating.get(&loc).is_some_and(|c| !c.is_empty())
    }

    fn capacity_in_use(&self, loc: Loc) -> bool {
        self.consumed(loc).is_some() || self.allocating_capacity.contains_key(&loc)
    }

    /// Capacity of the device consumed by allocations outside this attempt.
    fn consumed(&self, loc: Loc) -> Option<Consumed> {
        let p = &self.pools[loc.0];
        self.a.state.consumed(&p.driver, &p.pool, &devices_of(&p.slices[loc.1])[loc.2].name)
    }

    /// Upstream's `CmpRequestOverCapacity` for a candidate; errors count as "does not fit".
    fn capacity_fits(&self, request: Req<'_>, loc: Loc) -> bool {
        let slice = self.slice(loc);
        let dev = &devices_of(&slice)[loc.2];
        let allocated = self.consumed(loc);
        capacity::request_fits(
            allocated.as_ref(),
            request.capacities(),
            dev.capacity.as_ref(),
            self.allocating_capacity.get(&loc),
        )
        .unwrap_or(false)
    }

    /// Class and request selectors, binding-condition support and per-device node selection.
    fn is_selectable(&self, r: ReqKey, data: &RequestData<'_>, loc: Loc) -> Result<bool, AllocError> {
        let slice = self.slice(loc);
        let dev = &devices_of(&slice)[loc.2];
        if !self.a.features.device_binding_and_status && dev.binding_conditions.as_ref().is_some_and(|b| !b.is_empty())
        {
            return Ok(false);
        }
        if let Some(&m) = self.matches.borrow().get(&(loc, r)) {
            return Ok(m);
        }
        let driver = slice.spec.driver.as_str();
        let view = DeviceView {
            driver,
            allow_multiple_allocations: dev.allow_multiple_allocations,
            attributes: dev.attributes.as_ref(),
            capacity: dev.capacity.as_ref(),
        };
        if let Some(class) = &data.class {
            let sels = class.spec.selectors.as_deref().unwrap_or_default();
            if !self.selectors_match(r, &view, Some(class), sels, (&slice, loc.2))? {
                self.matches.borrow_mut().insert((loc, r), false);
                return Ok(false);
            }
        }
        if !self.selectors_match(r, &view, None, data.request.selectors(), (&slice, loc.2))? {
            self.matches.borrow_mut().insert((loc, r), false);
            return Ok(false);
        }
        if slice.spec.per_device_node_selection == Some(true) {
            let m = node_matches(
                self.node,
                dev.node_name.as_deref(),
                dev.all_nodes == Some(true),
                dev.node_selector.as_ref(),
            )
            .map_err(AllocError::Fatal)?;
            if !m {
                self.matches.borrow_mut().insert((loc, r), false);
                return Ok(false);
            }
        }
        self.matches.borrow_mut().insert((loc, r), true);
        Ok(true)
    }

    fn selectors_match(
        &self,
        r: ReqKey,
        view: &DeviceView<'_>,
        class: Option<&Arc<DeviceClass>>,
        selectors: &[DeviceSelector],
        device: (&Arc<ResourceSlice>, usize),
    ) -> Result<bool, AllocError> {
        let owner = || match class {
            Some(c) => format!("class {}", c.metadata.name.as_deref().unwrap_or_default()),
            None => format!("claim {}", kobj(&self.claims[r.claim].metadata)),
        };
        for (i, s) in selectors.iter().enumerate() {
            let expr = s.cel.as_ref().map(|c| c.expression.as_str()).unwrap_or_default();
            let compiled = self.a.cel.get_or_compile(expr);
            if let Some(err) = &compiled.error {
                return Err(AllocError::Fatal(format!("{}: selector #{i}: CEL compile error: {err}", owner())));
            }
            let verdict = match self.a.selections.get(&compiled, device.0, device.1) {
                Some(v) => v,
                None => match compiled.device_matches(view) {
                    Ok(v) => {
                        self.a.selections.put(&compiled, device.0, device.1, v);
                        v
                    }
                    Err(e) => {
                        return Err(AllocError::Fatal(format!("{}: selector #{i}: CEL runtime error: {e}", owner())))
                    }
                },
            };
            if !verdict {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Takes a selectable device for request `r` if it is free, its counters suffice, its
    /// taints are tolerated and the claim's constraints hold. `must` turns a constraint
    /// violation into an error (used for "all" devices, where there is no alternative).
    fn allocate_device(&mut self, r: ReqKey, loc: Loc, must: bool) -> Result<Option<Undo>, Stop> {
        let features = self.a.features;
        let slice = self.slice(loc);
        let dev = &devices_of(&slice)[loc.2];
        let (request, parent) = {
            let data = &self.requests[&r];
            (data.request, data.parent)
        };
        let allow_multiple = features.consumable_capacity && dev.allow_multiple_allocations == Some(true);
        if !allow_multiple && request.admin_access() && self.allocating_for_claim(loc, r.claim) {
            return Ok(None);
        }
        if !request.admin_access() && self.in_use(loc) {
            return Ok(None);
        }
        let consumes = counters::consumes(dev);
        if !features.partitionable_devices && consumes {
            return Ok(None);
        }
        let skip_counters = allow_multiple && self.capacity_in_use(loc);
        if !skip_counters && consumes && !self.check_available_counters(loc) {
            return Ok(None);
        }
        let (base, sub) = match parent {
            None => (request.name().to_string(), String::new()),
            Some(p) => (p.name.clone(), request.name().to_string()),
        };
        // Note: counters taken above stay taken when a taint or constraint refuses the
        // device, exactly as upstream's allocator behaves.
        if features.device_taints && taint_prevents_allocation(dev, request) {
            return Ok(None);
        }
        let driver = self.pools[loc.0].driver.clone();
        let n = self.constraints[r.claim].len();
        for i in 0..n {
            if !self.constraints[r.claim][i].add(&base, &sub, dev, &driver) {
                if must {
                    let claim = self.claims[r.claim];
                    return Err(Stop::Abort(AllocError::Fatal(format!(
                        "claim {}, request {}: cannot add device {} because a claim constraint would not be satisfied",
                        kobj(&claim.metadata),
                        request.name(),
                        self.device_id(loc)
                    ))));
                }
                for c in &mut self.constraints[r.claim][..i] {
                    c.remove(&base, &sub);
                }
                return Ok(None);
            }
        }
        let entry = self.allocating.entry(loc).or_default();
        if !allow_multiple && !entry.contains(&r.claim) {
            entry.push(r.claim);
        }
        let mut consumed: BTreeMap<String, Amount> = BTreeMap::new();
        let mut share_id = None;
        if features.consumable_capacity {
            if !self.capacity_fits(request, loc) {
                return Ok(None);
            }
            if allow_multiple {
                consumed = capacity::consumed_by_request(request.capacities(), dev.capacity.as_ref());
                share_id = Some((self.a.share_ids)());
                let add: Consumed = consumed.iter().map(|(k, v)| (k.clone(), v.value)).collect();
                capacity::add_into(self.allocating_capacity.entry(loc).or_default(), &add);
            }
        }
        let result = DeviceResult {
            request: request.name().to_string(),
            parent: parent.map(|p| p.name.clone()),
            loc,
            id: self.device_id(loc),
            share_id,
            consumed: (!consumed.is_empty()).then_some(consumed),
            admin_access: request.admin_access().then_some(true),
        };
        let result_index = self.results[r.claim].len();
        self.results[r.claim].push(result);
        Ok(Some(Undo { base_request: base, sub_request: sub, allow_multiple, result_index }))
    }

    fn deallocate(&mut self, r: ReqKey, loc: Loc, undo: Undo) {
        for c in &mut self.constraints[r.claim] {
            c.remove(&undo.base_request, &undo.sub_request);
        }
        if let Some(claims) = self.allocating.get_mut(&loc) {
            claims.retain(|&c| c != r.claim);
        }
        if undo.allow_multiple {
            let consumed = self.results[r.claim].get(undo.result_index).and_then(|d| d.consumed.as_ref());
            if let Some(consumed) = consumed {
                let sub: Consumed = consumed.iter().map(|(k, v)| (k.clone(), v.value)).collect();
                if let Some(c) = self.allocating_capacity.get_mut(&loc) {
                    capacity::sub_from(c, &sub);
                    if c.values().all(|q| q.is_zero()) {
                        self.allocating_capacity.remove(&loc);
                    }
                }
            }
        } else if self.a.features.partitionable_devices {
            let slice = self.slice(loc);
            let dev = &devices_of(&slice)[loc.2];
            if counters::consumes(dev) {
                self.release_counters(loc);
            }
        }
        self.results[r.claim].truncate(undo.result_index);
    }

    /// The counters left in the device's pool after allocated devices, computed once per pool
    /// name for the allocator.
    fn available_counters(&self, pool: &Pool) -> Arc<CounterSets> {
        if let Some(c) = self.a.available_counters.lock().get(&pool.pool) {
            return c.clone();
        }
        let avail = Arc::new(counters::left_in_pool(pool, &*self.a.state));
        self.a.available_counters.lock().insert(pool.pool.clone(), avail.clone());
        avail
    }

    /// Takes the device's counters if they are still available.
    fn check_available_counters(&mut self, loc: Loc) -> bool {
        let avail = self.available_counters(&self.pools[loc.0]);
        let pool_name = self.pools[loc.0].pool.clone();
        let slice = self.slice(loc);
        let dev = &devices_of(&slice)[loc.2];
        let consumed = self.consumed_counters.entry(pool_name).or_default();
        counters::take(consumed, dev);
        if !counters::within(&avail, consumed) {
            counters::release(consumed, dev);
            return false;
        }
        true
    }

    fn release_counters(&mut self, loc: Loc) {
        let pool_name = self.pools[loc.0].pool.clone();
        let slice = self.slice(loc);
        let dev = &devices_of(&slice)[loc.2];
        let Some(consumed) = self.consumed_counters.get_mut(&pool_name) else { return };
        counters::release(consumed, dev);
    }

    /// The `firstAvailable` subrequests a finished search chose, per claim and request.
    pub fn fit(&self) -> super::Fit {
        let sub_requests = self
            .claims
            .iter()
            .enumerate()
            .map(|(ci, claim)| {
                (0..requests_of(claim).len())
                    .map(|ri| {
                        let data = &self.requests[&ReqKey { claim: ci, request: ri, sub: 0 }];
                        data.parent.map(|_| data.selected_sub_request)
                    })
                    .collect()
            })
            .collect();
        super::Fit { sub_requests }
    }

    /// Assembles one allocation result per claim from the found devices.
    pub fn results(&self, node_name: &str) -> Result<Vec<AllocationResult>, AllocError> {
        let bind = self.a.features.device_binding_and_status;
        let mut out = Vec::with_capacity(self.claims.len());
        for (ci, claim) in self.claims.iter().enumerate() {
            let mut result = empty_result();
            let requests = requests_of(claim);
            let mut devices = Vec::new();
            let mut located = Vec::new();
            for d in &self.results[ci] {
                let slice = self.slice(d.loc);
                let dev = &devices_of(&slice)[d.loc.2];
                let name = match &d.parent {
                    Some(p) => format!("{p}/{}", d.request),
                    None => d.request.clone(),
                };
                let consumed: Option<BTreeMap<String, ApiQuantity>> = d
                    .consumed
                    .as_ref()
                    .map(|c| c.iter().map(|(k, v)| (k.clone(), ApiQuantity(v.text.clone()))).collect());
                let binding = bind.then(|| (dev.binding_conditions.clone(), dev.binding_failure_conditions.clone()));
                let tolerations = lookup_request(requests, d).and_then(|r| r.tolerations().cloned());
                devices.push(device_result(
                    name,
                    &d.id,
                    d.admin_access,
                    tolerations,
                    d.share_id.clone(),
                    consumed,
                    binding,
                ));
                located.push(d.loc);
            }
            let mut configs = Vec::new();
            let mut class_ranges: HashMap<String, (usize, usize)> = HashMap::default();
            for ri in 0..requests.len() {
                let mut data = &self.requests[&ReqKey { claim: ci, request: ri, sub: 0 }];
                if data.parent.is_some() {
                    data = &self.requests[&ReqKey { claim: ci, request: ri, sub: data.selected_sub_request }];
                }
                let Some(class) = &data.class else { continue };
                let class_name = class.metadata.name.clone().unwrap_or_default();
                if let Some(&(start, end)) = class_ranges.get(&class_name) {
                    for c in &mut configs[start..end] {
                        let c: &mut k8s_openapi::api::resource::v1::DeviceAllocationConfiguration = c;
                        c.requests.get_or_insert_with(Vec::new).push(data.request_name());
                    }
                    continue;
                }
                let start = configs.len();
                for c in class.spec.config.iter().flatten() {
                    configs.push(config_entry("FromClass", Some(vec![data.request_name()]), c.opaque.clone()));
                }
                class_ranges.insert(class_name, (start, configs.len()));
            }
            let claim_configs = claim.spec.devices.as_ref().and_then(|d| d.config.as_deref()).unwrap_or_default();
            for c in claim_configs {
                let names = c.requests.clone().unwrap_or_default();
                let entry =
                    || config_entry("FromClaim", c.requests.clone().filter(|r| !r.is_empty()), c.opaque.clone());
                if names.is_empty() {
                    configs.push(entry());
                    continue;
                }
                for (ri, request) in requests.iter().enumerate() {
                    if names.contains(&request.name) {
                        configs.push(entry());
                        continue;
                    }
                    let data = &self.requests[&ReqKey { claim: ci, request: ri, sub: 0 }];
                    if data.parent.is_none() {
                        continue;
                    }
                    let subs = request.first_available.as_deref().unwrap_or_default();
                    if let Some(sub) = subs.get(data.selected_sub_request) {
                        if names.contains(&format!("{}/{}", request.name, sub.name)) {
                            configs.push(entry());
                        }
                    }
                }
            }
            let slices: Vec<Arc<ResourceSlice>> = located.iter().map(|&l| self.slice(l)).collect();
            let pairs: Vec<(&ResourceSlice, &Device)> =
                slices.iter().zip(&located).map(|(s, l)| (&**s, &devices_of(s)[l.2])).collect();
            let selector = node_selector_for(&pairs, node_name).map_err(|e| {
                AllocError::Fatal(format!(
                    "create NodeSelector for claim {}: {e}",
                    claim.metadata.name.as_deref().unwrap_or_default()
                ))
            })?;
            if let Some(d) = result.devices.as_mut() {
                d.results = Some(devices);
                d.config = (!configs.is_empty()).then_some(configs);
            }
            result.node_selector = selector;
            out.push(result);
        }
        Ok(out)
    }
}

fn lookup_request<'r>(requests: &'r [DeviceRequest], d: &DeviceResult) -> Option<Req<'r>> {
    let name = d.parent.as_deref().unwrap_or(&d.request);
    let request = requests.iter().find(|r| r.name == name)?;
    if d.parent.is_none() {
        return Some(Req::Exact(request));
    }
    request.first_available.iter().flatten().find(|s| s.name == d.request).map(Req::Sub)
}

fn taint_prevents_allocation(dev: &Device, request: Req<'_>) -> bool {
    dev.taints.iter().flatten().any(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !request.tolerations().into_iter().flatten().any(|t| tolerates_taint(t, taint))
    })
}
