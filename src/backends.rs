//! The live backends, one line each: the crate's `kit::Backend` (its name, options,
//! state file name, offline driver and how its world is opened). Each line makes
//! `maar NAME` (its options with those every live run shares: `--state` and
//! `LiveArgs`), its run (`LiveCmd::visit`, `live_cli::Runner`) and its recorded
//! clusters' restore (`offline`). A new backend is its crate and its line here.

use clap::Subcommand;
use maar_scheduler::kit::{Backend, Offline};

use crate::args::Run;

/// Something done with whichever live backend a `LiveCmd` names (`live_cli::Runner`
/// runs it).
pub trait Visit {
    type Out;
    fn visit<B: Backend>(self, run: Run<B::Args>) -> Self::Out
    where
        B::Args: clap::Args + std::any::Any;
}

macro_rules! backends {
    ($( $(#[$doc:meta])* $variant:ident => $ty:path;)*) => {
        /// `maar NAME` of each live backend.
        #[derive(Subcommand, Debug, Clone)]
        pub enum LiveCmd {
            $(
                $(#[$doc])*
                #[command(name = <$ty as Backend>::NAME)]
                $variant(Run<<$ty as Backend>::Args>),
            )*
        }

        impl LiveCmd {
            /// `v` with the backend this names and its options.
            pub fn visit<V: Visit>(self, v: V) -> V::Out {
                match self {
                    $( LiveCmd::$variant(r) => v.visit::<$ty>(r), )*
                }
            }
        }

        /// The names of the live backends.
        pub const NAMES: &[&str] = &[$(<$ty as Backend>::NAME),*];

        /// A recorded cluster's driver with no world attached, by its backend's name.
        pub fn offline(name: &str) -> Option<Offline> {
            $(
                if name == <$ty as Backend>::NAME {
                    return Some(<$ty as Backend>::offline());
                }
            )*
            None
        }
    };
}

backends! {
    /// The console on this machine: its real CPU, memory, disks and GPUs (through the
    /// agent), jobs submitted to it run as local processes with the GPUs they were
    /// given (`CUDA_VISIBLE_DEVICES`).
    Local => maar_local::Local;
    /// The console on a Kubernetes cluster (the kubeconfig's context, or in-cluster):
    /// its nodes and pods watched live; pods with `schedulerName: maar` scheduled by
    /// maar (bound, or told why not in a FailedScheduling event).
    Kube => maar_kube::Kube;
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use maar_scheduler::Driver;

    /// Each line of the list is a `maar NAME` the command line takes, and the restore
    /// of a state file recorded by NAME (its offline driver).
    #[test]
    fn each_backend_of_the_list_is_a_command_and_a_restore() {
        let cli = crate::cli::Cli::command();
        assert_eq!(NAMES, ["local", "kube"]);
        for name in NAMES {
            let sub = cli
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("no `maar {name}`"));
            assert!(sub.get_arguments().any(|a| a.get_id() == "state"), "{name}");
            assert!(
                sub.get_arguments().any(|a| a.get_id() == "headless"),
                "{name}"
            );
            assert_eq!(offline(name).expect("an offline driver").kind(), *name);
        }
        assert!(offline("demo").is_none());
        assert!(offline("slurm").is_none());
    }
}
