//! Which MPI call a frame is in: the canonical name of an MPI entry point
//! (`MPI_Barrier`, `PMPI_Barrier`, `mpi_barrier_`, `ompi_barrier_f`, ... are
//! all `barrier`) and what such a call waits for (docs/design/stacks.md,
//! §4.1 and §4.2).

/// The canonical name of an MPI entry point, lower case and without the
/// `mpi_` prefix (`"barrier"`), or `None` for a function that is not one
/// (`MPIR_Barrier_impl`, `mca_pml_ob1_recv`, `main`).
///
/// Accepted spellings: the C bindings `MPI_X` and their profiling names
/// `PMPI_X`; the Fortran bindings `mpi_x_`, `mpi_x__`, `MPI_X`, `pmpi_x_`,
/// `mpi_x_f08`, Open MPI's glue `ompi_x_f`, `ompi_x_f08`, `pompi_x_f`; the
/// MPI-4 large-count `MPI_X_c`.
pub fn canonical(function: &str) -> Option<String> {
    let mut name = function.trim().to_ascii_lowercase();
    // Open MPI's Fortran glue: ompi_x_f / ompi_x_f08 / pompi_x_f.
    for glue in ["pompi_", "ompi_"] {
        if let Some(rest) = name.strip_prefix(glue) {
            let rest = rest.trim_end_matches('_');
            if rest.ends_with("_f") || rest.ends_with("_f08") {
                name = format!("mpi_{rest}");
            }
            break;
        }
    }
    if let Some(rest) = name.strip_prefix("pmpi_") {
        name = format!("mpi_{rest}");
    }
    let mut name = name.trim_end_matches('_');
    for suffix in ["_f08", "_f", "_c"] {
        if let Some(rest) = name.strip_suffix(suffix) {
            name = rest;
            break;
        }
    }
    let rest = name.strip_prefix("mpi_")?;
    let valid = !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then(|| rest.to_string())
}

/// How a wait over requests completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Completion {
    /// One request (`MPI_Wait`).
    One,
    /// Every request (`MPI_Waitall`): AND.
    All,
    /// Any one request (`MPI_Waitany`, `MPI_Waitsome`): OR.
    Any,
}

/// Whom a collective waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    /// Every member (`MPI_Barrier`, `MPI_Allreduce`, `MPI_Alltoall`, ...).
    Synchronising,
    /// The root for the others; the root for the others' arrival
    /// (`MPI_Bcast`, `MPI_Reduce`, `MPI_Gather`, `MPI_Scatter`, ...).
    Rooted,
    /// Lower ranks (`MPI_Scan`, `MPI_Exscan`).
    Prefix,
}

/// What an MPI call waits for while a thread is inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "class")]
pub enum CallClass {
    /// A blocking send: its receiver posting a matching receive
    /// (`synchronous`: `MPI_Ssend`, complete only once matched).
    Send {
        /// `MPI_Ssend`.
        synchronous: bool,
    },
    /// A call that completes locally (`MPI_Bsend`, `MPI_Mrecv`).
    LocalSend,
    /// A blocking receive or probe: a matching message.
    Recv,
    /// `MPI_Sendrecv`: both its parts.
    SendRecv,
    /// The wait family over requests.
    Wait {
        /// AND or OR over the requests.
        completion: Completion,
    },
    /// The test family and `MPI_Iprobe`: waiting only if the rank keeps
    /// calling it from the same place (two samples tell).
    Poll {
        /// AND or OR over the requests, as the matching wait.
        completion: Completion,
    },
    /// A collective on a communicator.
    Collective {
        /// Whom it waits for.
        kind: Collective,
    },
    /// Communicator (and window, file) construction: collective on the
    /// communicator it is given.
    CommConstruct,
    /// `MPI_Init`, `MPI_Init_thread`, `MPI_Finalize`: collective on
    /// `MPI_COMM_WORLD`.
    InitFinalize,
    /// One-sided synchronisation (`MPI_Win_fence`, `MPI_Win_wait`, ...).
    OneSided,
    /// File I/O; `collective` for the `_all`, `_ordered`, split and
    /// view-setting calls.
    Io {
        /// Collective on the file's communicator.
        collective: bool,
    },
    /// A nonblocking start (`MPI_Isend`, `MPI_Ibarrier`, `MPI_Start`, ...):
    /// returns at once.
    Start,
    /// Any other call (`MPI_Comm_rank`, `MPI_Wtime`, ...): returns at once.
    Local,
}

impl CallClass {
    /// Whether a thread inside such a call may wait there for another
    /// process (as opposed to returning by itself).
    pub fn blocks(self) -> bool {
        !matches!(self, CallClass::LocalSend | CallClass::Start | CallClass::Local)
    }
}

/// The class of a canonical name ([`canonical`]).
pub fn classify(name: &str) -> CallClass {
    use CallClass::*;
    let collective = |kind| Collective { kind };
    match name {
        "reduce_local" => Local,
        "send" | "rsend" => Send { synchronous: false },
        "ssend" => Send { synchronous: true },
        "bsend" | "mrecv" | "imrecv" => LocalSend,
        "recv" | "probe" | "mprobe" => Recv,
        "sendrecv" | "sendrecv_replace" => SendRecv,
        "wait" => Wait {
            completion: Completion::One,
        },
        "waitall" => Wait {
            completion: Completion::All,
        },
        "waitany" | "waitsome" => Wait {
            completion: Completion::Any,
        },
        "test" | "iprobe" | "improbe" | "request_get_status" => Poll {
            completion: Completion::One,
        },
        "testall" => Poll {
            completion: Completion::All,
        },
        "testany" | "testsome" => Poll {
            completion: Completion::Any,
        },
        "barrier"
        | "allreduce"
        | "allgather"
        | "allgatherv"
        | "alltoall"
        | "alltoallv"
        | "alltoallw"
        | "reduce_scatter"
        | "reduce_scatter_block" => collective(self::Collective::Synchronising),
        n if n.starts_with("neighbor_") => collective(self::Collective::Synchronising),
        "bcast" | "scatter" | "scatterv" | "gather" | "gatherv" | "reduce" => collective(self::Collective::Rooted),
        "scan" | "exscan" => collective(self::Collective::Prefix),
        "comm_dup"
        | "comm_dup_with_info"
        | "comm_idup_with_info"
        | "comm_split"
        | "comm_split_type"
        | "comm_create"
        | "comm_create_group"
        | "comm_free"
        | "comm_disconnect"
        | "cart_create"
        | "cart_sub"
        | "graph_create"
        | "dist_graph_create"
        | "dist_graph_create_adjacent"
        | "intercomm_create"
        | "intercomm_merge"
        | "comm_spawn"
        | "comm_spawn_multiple"
        | "comm_accept"
        | "comm_connect"
        | "win_create"
        | "win_allocate"
        | "win_allocate_shared"
        | "win_create_dynamic"
        | "win_free"
        | "file_open"
        | "file_close" => CommConstruct,
        "init" | "init_thread" | "finalize" => InitFinalize,
        "win_fence"
        | "win_wait"
        | "win_complete"
        | "win_start"
        | "win_post"
        | "win_lock"
        | "win_lock_all"
        | "win_unlock"
        | "win_unlock_all"
        | "win_flush"
        | "win_flush_all"
        | "win_flush_local"
        | "win_flush_local_all"
        | "win_sync" => OneSided,
        n if n.starts_with("file_") => Io {
            collective: n.ends_with("_all")
                || n.ends_with("_ordered")
                || n.ends_with("_begin")
                || n.ends_with("_end")
                || matches!(n, "file_set_view" | "file_sync" | "file_set_size" | "file_preallocate"),
        },
        // Nonblocking starts: `i*` of the point-to-point and collective
        // calls, persistent `*_init`, `start`, `startall`.
        "start" | "startall" => Start,
        n if n.ends_with("_init") && n != "init" => Start,
        n if n.starts_with('i') && is_nonblocking(n) => Start,
        _ => Local,
    }
}

/// Whether `n` (starting with `i`) is a nonblocking start: `i` followed by
/// a blocking call's name (`isend`, `irecv`, `ibarrier`, `iallreduce`, ...).
fn is_nonblocking(n: &str) -> bool {
    let rest = &n[1..];
    !matches!(rest, "nit" | "nit_thread" | "nitialized" | "nfo_create" | "nfo_free")
        && !rest.starts_with("nfo_")
        && !rest.starts_with("ntercomm_")
        && !rest.starts_with("s_thread_main")
        && !matches!(rest, "probe" | "mprobe")
        // A call that may wait (`isend`), or a send that completes locally
        // (`ibsend`): its `i` form starts it.
        && (classify(rest).blocks() || classify(rest) == CallClass::LocalSend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_an_entry_point_has_one_name() {
        for (spelling, want) in [
            ("MPI_Barrier", "barrier"),
            ("PMPI_Barrier", "barrier"),
            ("mpi_barrier_", "barrier"),
            ("mpi_barrier__", "barrier"),
            ("MPI_BARRIER", "barrier"),
            ("pmpi_barrier_", "barrier"),
            ("ompi_barrier_f", "barrier"),
            ("pompi_barrier_f", "barrier"),
            ("ompi_barrier_f08", "barrier"),
            ("mpi_barrier_f08_", "barrier"),
            ("MPI_Send_c", "send"),
            ("MPI_Comm_split", "comm_split"),
            ("PMPI_Waitall", "waitall"),
        ] {
            assert_eq!(canonical(spelling).as_deref(), Some(want), "{spelling}");
        }
        for not in [
            "MPIR_Barrier_impl",
            "MPID_Recv",
            "mca_pml_ob1_recv",
            "ompi_comm_split",
            "main",
            "MPI_",
            "mpi",
            "MPIDI_CH3I_Progress",
            "ompi_coll_base_barrier_intra_recursivedoubling",
        ] {
            assert_eq!(canonical(not), None, "{not}");
        }
    }

    #[test]
    fn classes_of_the_calls() {
        use CallClass::*;
        let c = |n: &str| classify(&canonical(n).expect(n));
        assert_eq!(c("MPI_Send"), Send { synchronous: false });
        assert_eq!(c("MPI_Rsend"), Send { synchronous: false });
        assert_eq!(c("MPI_Ssend"), Send { synchronous: true });
        assert_eq!(c("MPI_Bsend"), LocalSend);
        for n in ["MPI_Recv", "MPI_Probe", "MPI_Mprobe"] {
            assert_eq!(c(n), Recv, "{n}");
        }
        assert_eq!(c("MPI_Sendrecv_replace"), SendRecv);
        assert_eq!(
            c("MPI_Wait"),
            Wait {
                completion: Completion::One
            }
        );
        assert_eq!(
            c("MPI_Waitall"),
            Wait {
                completion: Completion::All
            }
        );
        assert_eq!(
            c("MPI_Waitany"),
            Wait {
                completion: Completion::Any
            }
        );
        assert_eq!(
            c("MPI_Waitsome"),
            Wait {
                completion: Completion::Any
            }
        );
        assert_eq!(
            c("MPI_Testall"),
            Poll {
                completion: Completion::All
            }
        );
        assert_eq!(
            c("MPI_Iprobe"),
            Poll {
                completion: Completion::One
            }
        );
        for n in [
            "MPI_Barrier",
            "MPI_Allreduce",
            "MPI_Alltoallw",
            "MPI_Neighbor_allgather",
        ] {
            assert_eq!(
                c(n),
                Collective {
                    kind: self::Collective::Synchronising
                },
                "{n}"
            );
        }
        for n in ["MPI_Bcast", "MPI_Reduce", "MPI_Gatherv", "MPI_Scatter"] {
            assert_eq!(
                c(n),
                Collective {
                    kind: self::Collective::Rooted
                },
                "{n}"
            );
        }
        assert_eq!(
            c("MPI_Exscan"),
            Collective {
                kind: self::Collective::Prefix
            }
        );
        for n in [
            "MPI_Comm_split",
            "MPI_Comm_dup",
            "MPI_Cart_create",
            "MPI_Win_create",
            "MPI_File_open",
        ] {
            assert_eq!(c(n), CommConstruct, "{n}");
        }
        for n in ["MPI_Init", "MPI_Init_thread", "MPI_Finalize"] {
            assert_eq!(c(n), InitFinalize, "{n}");
        }
        assert_eq!(c("MPI_Win_fence"), OneSided);
        assert_eq!(c("MPI_File_write_all"), Io { collective: true });
        assert_eq!(c("MPI_File_read_at"), Io { collective: false });
        for n in [
            "MPI_Isend",
            "MPI_Irecv",
            "MPI_Issend",
            "MPI_Ibsend",
            "MPI_Ibarrier",
            "MPI_Iallreduce",
            "MPI_Send_init",
            "MPI_Startall",
        ] {
            assert_eq!(c(n), Start, "{n}");
        }
        for n in [
            "MPI_Comm_rank",
            "MPI_Wtime",
            "MPI_Initialized",
            "MPI_Info_create",
            "MPI_Reduce_local",
            "MPI_Abort",
        ] {
            assert_eq!(c(n), Local, "{n}");
        }
        assert!(c("MPI_Barrier").blocks() && !c("MPI_Isend").blocks() && !c("MPI_Comm_rank").blocks());
    }
}
