//! The `kube` component's feature gates (component-base `featuregate` and `compatibility`): every
//! gate v1.36's kube-scheduler registers, each with its versioned stages, so that
//! `--emulated-version` and `--min-compatibility-version` pick the defaults, maturity and locks
//! of that version, and `--feature-gates` is checked as upstream checks it (locked gates, gates
//! not yet available at the emulated version, dependencies).

use std::collections::BTreeMap;

#[path = "featuregate_table.rs"]
mod table;

/// A gate's maturity at some version (component-base's `prerelease`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreRelease {
    /// Not available yet at the version asked about.
    PreAlpha,
    /// Alpha.
    Alpha,
    /// Beta.
    Beta,
    /// Generally available.
    Ga,
    /// Deprecated.
    Deprecated,
}

impl PreRelease {
    /// The label upstream prints (help text, `kubernetes_feature_enabled{stage}`); empty for GA.
    pub fn label(self) -> &'static str {
        match self {
            PreRelease::PreAlpha => "PRE-ALPHA",
            PreRelease::Alpha => "ALPHA",
            PreRelease::Beta => "BETA",
            PreRelease::Ga => "",
            PreRelease::Deprecated => "DEPRECATED",
        }
    }
}

/// One stage of a gate's life, valid from `version` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    /// First `(major, minor)` version the stage applies to.
    pub version: (u32, u32),
    /// Whether the gate is on unless set.
    pub default: bool,
    /// The gate cannot be set to anything but its default.
    pub lock_to_default: bool,
    /// Maturity.
    pub pre_release: PreRelease,
    /// The stage applies only when the minimum compatibility version is at least this (a later
    /// entry at the same version, upstream's `MinCompatibilityVersion`).
    pub min_compatibility: Option<(u32, u32)>,
}

/// What a gate is before its first stage.
const PRE_ALPHA: Stage = Stage {
    version: (0, 0),
    default: false,
    lock_to_default: false,
    pre_release: PreRelease::PreAlpha,
    min_compatibility: None,
};

/// A registered gate.
#[derive(Debug)]
pub struct Gate {
    /// Name, as `--feature-gates` spells it.
    pub name: &'static str,
    /// Stages in increasing version order.
    pub stages: &'static [Stage],
    /// Gates that must be on whenever this one is.
    pub dependencies: &'static [&'static str],
}

impl Gate {
    /// The stage in effect at `emulation` with minimum compatibility version `min_compatibility`
    /// (component-base's `featureSpecAtEmulationAndMinCompatVersion`).
    pub fn stage_at(&self, emulation: (u32, u32), min_compatibility: (u32, u32)) -> Stage {
        self.stages
            .iter()
            .rev()
            .find(|s| s.version <= emulation && s.min_compatibility.is_none_or(|m| min_compatibility >= m))
            .copied()
            .unwrap_or(PRE_ALPHA)
    }
}

/// Every registered gate, sorted by name (`AllAlpha` and `AllBeta` included).
pub fn gates() -> &'static [Gate] {
    table::GATES
}

/// The gate called `name`, if registered.
pub fn lookup(name: &str) -> Option<&'static Gate> {
    table::GATES.binary_search_by(|g| g.name.cmp(name)).ok().map(|i| &table::GATES[i])
}

const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";

/// The resolved gate values for one set of `--feature-gates` settings and versions.
#[derive(Debug, Clone)]
pub struct FeatureGate {
    emulation: (u32, u32),
    min_compatibility: (u32, u32),
    /// Values that differ from the stage's default source: explicit settings and what
    /// `AllAlpha`/`AllBeta` filled in.
    enabled: BTreeMap<&'static str, bool>,
    errors: Vec<String>,
    notices: Vec<String>,
    unknown: Vec<String>,
}

impl Default for FeatureGate {
    fn default() -> Self {
        let v = (super::version::MAJOR, super::version::MINOR);
        FeatureGate::resolve(&[], v, (v.0, v.1 - 1))
    }
}

impl FeatureGate {
    /// Applies `settings` (name, value; a later setting of a name wins) at the given versions,
    /// as component-base's `SetFromMap` after `SetEmulationVersionAndMinCompatibilityVersion`.
    /// Settings that are refused leave the gate at its default and are listed by
    /// [`FeatureGate::errors`]; unknown names are ignored with a warning, as upstream does.
    pub fn resolve(settings: &[(String, bool)], emulation: (u32, u32), min_compatibility: (u32, u32)) -> Self {
        let mut requested: BTreeMap<&str, bool> = BTreeMap::new();
        for (name, value) in settings {
            requested.insert(name.as_str(), *value);
        }
        let mut fg = FeatureGate {
            emulation,
            min_compatibility,
            enabled: BTreeMap::new(),
            errors: Vec::new(),
            notices: Vec::new(),
            unknown: Vec::new(),
        };
        let mut explicit: BTreeMap<&'static str, bool> = BTreeMap::new();
        let mut fill: Vec<(PreRelease, bool)> = Vec::new();
        for (name, value) in requested {
            let Some(gate) = lookup(name) else {
                fg.unknown.push(name.to_string());
                continue;
            };
            let stage = gate.stage_at(emulation, min_compatibility);
            if stage.lock_to_default && stage.default != value {
                fg.errors
                    .push(format!("cannot set feature gate {name} to {value}, feature is locked to {}", stage.default));
                continue;
            }
            match name {
                ALL_ALPHA => fill.push((PreRelease::Alpha, value)),
                ALL_BETA => fill.push((PreRelease::Beta, value)),
                _ if stage.pre_release == PreRelease::PreAlpha => {
                    fg.errors.push(format!(
                        "cannot set feature gate {name} to {value}, feature is PreAlpha at emulated version {}.{}, min compatibility version {}.{}",
                        emulation.0, emulation.1, min_compatibility.0, min_compatibility.1
                    ));
                    continue;
                }
                _ => {}
            }
            match stage.pre_release {
                PreRelease::Deprecated => fg.notices.push(format!(
                    "Warning: setting deprecated feature gate. It will be removed in a future release. featureGate={name} value={value}"
                )),
                PreRelease::Ga if name != ALL_ALPHA && name != ALL_BETA => fg.notices.push(format!(
                    "Warning: setting GA feature gate. It will be removed in a future release. featureGate={name} value={value}"
                )),
                _ => {}
            }
            explicit.insert(gate.name, value);
        }
        if !fg.errors.is_empty() {
            return fg;
        }
        // AllAlpha/AllBeta set every gate of that maturity the settings leave alone.
        for (maturity, value) in fill {
            for gate in gates().iter().filter(|g| g.name != ALL_ALPHA && g.name != ALL_BETA) {
                if gate.stage_at(emulation, min_compatibility).pre_release == maturity {
                    fg.enabled.entry(gate.name).or_insert(value);
                }
            }
        }
        fg.enabled.extend(explicit);
        for gate in gates() {
            if !fg.enabled(gate.name) {
                continue;
            }
            let off: Vec<&str> = gate.dependencies.iter().copied().filter(|d| !fg.enabled(d)).collect();
            if !off.is_empty() {
                fg.errors.push(format!(
                    "{} is enabled, but depends on features that are disabled: [{}]",
                    gate.name,
                    off.join(" ")
                ));
            }
        }
        fg
    }

    /// Whether gate `name` is on (its setting, else its default at the emulated version);
    /// unregistered gates are off.
    pub fn enabled(&self, name: &str) -> bool {
        if let Some(v) = self.enabled.get(name) {
            return *v;
        }
        lookup(name).is_some_and(|g| g.stage_at(self.emulation, self.min_compatibility).default)
    }

    /// The stage of gate `name` at this gate set's versions.
    pub fn stage(&self, name: &str) -> Option<Stage> {
        lookup(name).map(|g| g.stage_at(self.emulation, self.min_compatibility))
    }

    /// Refused settings and unmet dependencies, in upstream's wording, sorted.
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// The warnings upstream logs for settings of GA and deprecated gates.
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// Names set that no gate has.
    pub fn unknown(&self) -> &[String] {
        &self.unknown
    }

    /// `(name, stage label, enabled)` of every gate available at the emulated version, by name,
    /// as `kubernetes_feature_enabled` reports them (upstream's `GetAll`, `AllAlpha` and
    /// `AllBeta` included).
    pub fn all(&self) -> Vec<(&'static str, &'static str, bool)> {
        gates()
            .iter()
            .filter_map(|g| {
                let stage = g.stage_at(self.emulation, self.min_compatibility);
                (stage.pre_release != PreRelease::PreAlpha)
                    .then(|| (g.name, stage.pre_release.label(), self.enabled(g.name)))
            })
            .collect()
    }

    /// Alpha gates that are on (upstream warns when emulating an older version with any).
    pub fn enabled_alpha(&self) -> Vec<&'static str> {
        gates()
            .iter()
            .filter(|g| g.name != ALL_ALPHA && g.name != ALL_BETA)
            .filter(|g| g.stage_at(self.emulation, self.min_compatibility).pre_release == PreRelease::Alpha)
            .filter(|g| self.enabled(g.name))
            .map(|g| g.name)
            .collect()
    }
}

/// `--feature-gates` help lines (component-base's `KnownFeatures` with the `kube:` prefix) for
/// the binary's version: every gate that is alpha or beta there, with its default; a gate whose
/// stage depends on `--min-compatibility-version` lists both.
pub fn known_features_help() -> Vec<String> {
    let v = (super::version::MAJOR, super::version::MINOR);
    let min = (v.0, v.1 - 1);
    let line = |name: &str, s: &Stage, with_min: bool| -> Option<String> {
        if matches!(s.pre_release, PreRelease::Ga | PreRelease::Deprecated | PreRelease::PreAlpha) {
            return None;
        }
        let mut out = format!("{name}=true|false ({} - default={})", s.pre_release.label(), s.default);
        if let (true, Some((a, b))) = (with_min, s.min_compatibility) {
            out.push_str(&format!(" if --min-compatibility-version>={a}.{b}"));
        }
        Some(out)
    };
    let mut known: Vec<String> = gates()
        .iter()
        .filter_map(|g| {
            if g.name == ALL_ALPHA || g.name == ALL_BETA {
                let s = g.stages[0];
                return Some(format!("{}=true|false ({} - default={})", g.name, s.pre_release.label(), s.default));
            }
            let at = g.stage_at(v, min);
            let at_own = g.stage_at(v, v);
            if at == at_own {
                return line(g.name, &at, false);
            }
            let parts: Vec<String> =
                [line(g.name, &at, false), line(g.name, &at_own, true)].into_iter().flatten().collect();
            (!parts.is_empty()).then(|| parts.join(", or "))
        })
        .map(|l| format!("kube:{l}"))
        .collect();
    known.sort();
    known
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, bool)], emulation: (u32, u32)) -> FeatureGate {
        let settings: Vec<(String, bool)> = pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        FeatureGate::resolve(&settings, emulation, (emulation.0, emulation.1 - 1))
    }

    #[test]
    fn table_is_sorted_and_stages_ascend() {
        let names: Vec<&str> = gates().iter().map(|g| g.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        for g in gates() {
            assert!(!g.stages.is_empty(), "{}", g.name);
            assert!(g.stages.windows(2).all(|w| w[0].version <= w[1].version), "{}", g.name);
            for d in g.dependencies {
                assert!(lookup(d).is_some(), "{} depends on unknown {d}", g.name);
            }
        }
    }

    #[test]
    fn defaults_follow_the_emulated_version() {
        // DynamicResourceAllocation: beta and off in 1.33, GA on in 1.34, locked from 1.35.
        assert!(!set(&[], (1, 33)).enabled("DynamicResourceAllocation"));
        assert!(set(&[], (1, 34)).enabled("DynamicResourceAllocation"));
        assert!(set(&[], (1, 36)).enabled("DynamicResourceAllocation"));
        // NodeDeclaredFeatures: alpha off in 1.35, beta on in 1.36; not there before 1.35.
        assert!(!set(&[], (1, 35)).enabled("NodeDeclaredFeatures"));
        assert!(set(&[], (1, 36)).enabled("NodeDeclaredFeatures"));
        assert_eq!(set(&[], (1, 34)).stage("NodeDeclaredFeatures").unwrap().pre_release, PreRelease::PreAlpha);
        assert!(!set(&[], (1, 36)).enabled("TaintTolerationComparisonOperators"));
        assert!(
            set(&[("TaintTolerationComparisonOperators", true)], (1, 36)).enabled("TaintTolerationComparisonOperators")
        );
        assert!(!set(&[], (1, 36)).enabled("NoSuchGate"));
    }

    #[test]
    fn locked_and_unavailable_gates_refuse_settings() {
        let fg = set(&[("DynamicResourceAllocation", false)], (1, 36));
        assert_eq!(
            fg.errors(),
            ["cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"]
        );
        assert!(fg.enabled("DynamicResourceAllocation"));
        // Locked in 1.36 but settable in 1.33: emulation unlocks it.
        let fg = set(&[("DynamicResourceAllocation", false)], (1, 33));
        assert!(fg.errors().is_empty(), "{:?}", fg.errors());
        assert!(!fg.enabled("DynamicResourceAllocation"));
        // Settable in 1.34 too, but gates on by default there depend on it.
        let fg = set(&[("DynamicResourceAllocation", false)], (1, 34));
        assert_eq!(
            fg.errors(),
            [
                "DRAAdminAccess is enabled, but depends on features that are disabled: [DynamicResourceAllocation]",
                "DRAPrioritizedList is enabled, but depends on features that are disabled: [DynamicResourceAllocation]",
                "DRASchedulerFilterTimeout is enabled, but depends on features that are disabled: [DynamicResourceAllocation]",
            ]
        );
        // Setting a locked gate to its default is fine, with upstream's GA warning.
        let fg = set(&[("DynamicResourceAllocation", true)], (1, 36));
        assert!(fg.errors().is_empty());
        assert_eq!(fg.notices().len(), 1);
        let fg = set(&[("TaintTolerationComparisonOperators", true)], (1, 34));
        assert_eq!(
            fg.errors(),
            ["cannot set feature gate TaintTolerationComparisonOperators to true, feature is PreAlpha at emulated version 1.34, min compatibility version 1.33"]
        );
    }

    #[test]
    fn dependencies_and_all_alpha() {
        let fg = set(&[("GangScheduling", true)], (1, 36));
        assert_eq!(
            fg.errors(),
            ["GangScheduling is enabled, but depends on features that are disabled: [GenericWorkload]"]
        );
        let fg = set(&[("GangScheduling", true), ("GenericWorkload", true)], (1, 36));
        assert!(fg.errors().is_empty(), "{:?}", fg.errors());
        let fg = set(&[("AllAlpha", true), ("GangScheduling", false), ("WorkloadAwarePreemption", false)], (1, 36));
        assert!(fg.enabled("GenericWorkload") && fg.enabled("TaintTolerationComparisonOperators"));
        assert!(!fg.enabled("GangScheduling"));
        // Beta and GA gates keep their defaults.
        assert!(!fg.enabled("DRADeviceTaintRules") && fg.enabled("DynamicResourceAllocation"));
    }

    #[test]
    fn unknown_names_are_ignored() {
        let fg = set(&[("Foo", true)], (1, 36));
        assert!(fg.errors().is_empty());
        assert_eq!(fg.unknown(), ["Foo"]);
    }

    #[test]
    fn help_lists_alpha_and_beta_gates_of_the_binary_version() {
        let help = known_features_help();
        assert!(help.contains(&"kube:AllAlpha=true|false (ALPHA - default=false)".to_string()));
        assert!(
            help.contains(&"kube:TaintTolerationComparisonOperators=true|false (ALPHA - default=false)".to_string())
        );
        assert!(help.contains(&"kube:NodeDeclaredFeatures=true|false (BETA - default=true)".to_string()));
        assert!(!help.iter().any(|l| l.starts_with("kube:DynamicResourceAllocation=")), "GA gates are not listed");
    }
}
