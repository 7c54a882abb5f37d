//! Per-CPU topology from sysfs: SMT siblings, package, cluster and core ids, core type and
//! capacity. Read once by non-real-time threads (setup, result files, the doctor).

use crate::cpu::{cpu_infos, parse_cpu_list};
use crate::{read_parsed, read_trimmed};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where one online CPU sits in the machine. `None` where sysfs does not say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTopology {
    /// Logical CPU number.
    pub id: usize,
    /// Physical package (socket), `topology/physical_package_id`.
    pub package_id: Option<u64>,
    /// Cluster (Arm clusters, Intel modules sharing an L2), `topology/cluster_id`.
    pub cluster_id: Option<u64>,
    /// Core within the package, `topology/core_id`.
    pub core_id: Option<u64>,
    /// CPUs sharing this CPU's core (itself included), `topology/thread_siblings_list`.
    pub smt_siblings: Vec<usize>,
    /// "performance" or "efficiency" on heterogeneous machines (see [`crate::CpuInfo`]).
    pub core_type: Option<String>,
    /// Arm `cpu_capacity` (1024 = the biggest core).
    pub capacity: Option<u32>,
}

/// The topology of every online CPU under `sys_root` (normally "/sys").
pub fn cpu_topology(sys_root: &Path) -> Vec<CpuTopology> {
    cpu_infos(sys_root)
        .into_iter()
        .map(|info| {
            let topo = sys_root.join(format!("devices/system/cpu/cpu{}/topology", info.id));
            // Older kernels call the sibling list thread_siblings_list, newer ones also core_cpus_list.
            let siblings = read_trimmed(&topo.join("thread_siblings_list"))
                .or_else(|| read_trimmed(&topo.join("core_cpus_list")))
                .and_then(|s| parse_cpu_list(&s).ok())
                .unwrap_or_default();
            CpuTopology {
                id: info.id,
                package_id: read_parsed(&topo.join("physical_package_id")),
                // The kernel writes -1 (or 65535 where the id is 16 bits, as on x86 VMs) for
                // "no cluster"; both read as absent here.
                cluster_id: read_parsed(&topo.join("cluster_id")).filter(|&c: &u64| c < 65_535),
                core_id: read_parsed(&topo.join("core_id")),
                smt_siblings: siblings,
                core_type: info.core_type,
                capacity: info.capacity,
            }
        })
        .collect()
}

/// True when any CPU shares its core with another (SMT / Hyper-Threading is in use).
pub fn smt_in_use(topology: &[CpuTopology]) -> bool {
    topology.iter().any(|t| t.smt_siblings.len() > 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Fixture;

    #[test]
    fn reads_siblings_packages_clusters_and_core_types() {
        let f = Fixture::new("topology");
        f.write("devices/system/cpu/online", "0-3\n")
            .write("devices/cpu_core/cpus", "0-1\n")
            .write("devices/cpu_atom/cpus", "2-3\n");
        for (cpu, core, siblings, cluster) in [
            (0, 0, "0-1", "0"),
            (1, 0, "0-1", "0"),
            (2, 8, "2", "1"),
            (3, 9, "3", "65535"),
        ] {
            let d = format!("devices/system/cpu/cpu{cpu}/topology");
            f.write(&format!("{d}/core_id"), &format!("{core}\n"))
                .write(&format!("{d}/physical_package_id"), "0\n")
                .write(
                    &format!("{d}/thread_siblings_list"),
                    &format!("{siblings}\n"),
                )
                .write(&format!("{d}/cluster_id"), &format!("{cluster}\n"));
        }
        let t = cpu_topology(f.path());
        assert_eq!(t.len(), 4);
        assert_eq!(t[0].smt_siblings, vec![0, 1]);
        assert_eq!(t[2].smt_siblings, vec![2]);
        assert_eq!(t[0].core_type.as_deref(), Some("performance"));
        assert_eq!(t[3].core_type.as_deref(), Some("efficiency"));
        assert_eq!(t[2].cluster_id, Some(1));
        assert_eq!(t[3].cluster_id, None, "65535 means no cluster");
        assert_eq!(t[1].package_id, Some(0));
        assert_eq!(t[3].core_id, Some(9));
        assert!(smt_in_use(&t));
        assert!(!smt_in_use(&t[2..]));
    }

    #[test]
    fn missing_topology_files_read_as_absent() {
        let f = Fixture::new("topology-empty");
        f.write("devices/system/cpu/online", "0\n").write(
            "devices/system/cpu/cpu0/topology/thread_siblings_list",
            "x-y\n",
        );
        let t = cpu_topology(f.path());
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].package_id, t[0].core_id, t[0].cluster_id),
            (None, None, None)
        );
        assert!(
            t[0].smt_siblings.is_empty(),
            "a garbled list reads as absent"
        );
    }
}
