//! A blocking send's or receive's own request: what its frames lack.

use super::{by_address, not_listed, CallClass, Flavour, Reader, Wanted, ANY_TAG};
use crate::snapshot::model::{Communicator, MpiCall};
use crate::target::ByteOrder;

/// What a blocking call's own request says.
struct Request {
    /// The communicator pointer (Open MPI's handle, MPICH's `MPIR_Comm *`).
    comm: u64,
    /// The listed communicator it is, or why not.
    communicator: Result<String, Option<String>>,
    buffer: Option<u64>,
    peer: Option<i64>,
    tag: Option<i64>,
}

impl Reader<'_> {
    /// A blocking send or receive waits on a request of its own, which
    /// holds the communicator, buffer, peer and tag the call was given. It
    /// fills what the call's frames did not (LLDB 16 has no variables in
    /// either MPI's `PMPI_Recv`; Open MPI's has `source` and `tag`
    /// optimised out), if it is of the call's kind and on the call's
    /// communicator, when that is known.
    pub(super) fn request(
        &mut self,
        mpi: Flavour,
        class: CallClass,
        w: &Wanted,
        communicators: &[Communicator],
        mc: &mut MpiCall,
    ) {
        let recv = match class {
            CallClass::Send { .. } => false,
            CallClass::Recv if self.call == "recv" => true,
            _ => return,
        };
        let req = match mpi {
            Flavour::OpenMpi => self.open_mpi_request(recv, communicators),
            Flavour::Mpich => self.mpich_request(recv, communicators),
            Flavour::Unknown => None,
        };
        let Some(req) = req else { return };
        if let Some(handle) = &mc.comm_handle {
            let same = match &mc.communicator {
                Some(id) => req.communicator.as_ref().ok() == Some(id),
                None => mpi == Flavour::OpenMpi && *handle == format!("{:#x}", req.comm),
            };
            if !same {
                return;
            }
        }
        let mut known: Vec<&str> = Vec::new();
        if mc.communicator.is_none() {
            self.why.retain(|w| !w.starts_with("comm:"));
            mc.comm_handle = Some(format!("{:#x}", req.comm));
            match req.communicator {
                Ok(id) => mc.communicator = Some(id),
                Err(why) => self.why.extend(why),
            }
        }
        if let (None, Some(b)) = (&mc.buffer, req.buffer) {
            mc.buffer = Some(format!("{b:#x}"));
            known.extend(w.buffer.first());
        }
        let proc_null = self.why.iter().any(|x| x.contains("MPI_PROC_NULL"));
        if let (None, false, false, Some(p)) = (mc.peer, mc.any_source, proc_null, req.peer) {
            match p {
                p if recv && Some(p) == mpi.any_source() => mc.any_source = true,
                p if p >= 0 => mc.peer = Some(p),
                _ => {}
            }
            known.extend(w.peer.first().filter(|_| mc.peer.is_some() || mc.any_source));
        }
        if let (None, false, Some(t)) = (mc.tag, mc.any_tag, req.tag) {
            match t {
                ANY_TAG if recv => mc.any_tag = true,
                t => mc.tag = Some(t),
            }
            known.extend(w.tag.first());
        }
        self.why
            .retain(|w| !known.iter().any(|k| w.starts_with(&format!("{k}:"))));
    }

    /// Open MPI: `ompi_request_wait_completion(req)`, inlined inside the
    /// call, waits on an `mca_pml_base_request_t` (`req_type` 1: send, 2:
    /// receive).
    fn open_mpi_request(&mut self, recv: bool, communicators: &[Communicator]) -> Option<Request> {
        let req = self.inner("req")?;
        let ty = "mca_pml_base_request_t";
        if self.field_u32(req, ty, "req_type").ok()? != if recv { 2 } else { 1 } {
            return None;
        }
        let comm = self.field_ptr(req, ty, "req_comm").ok()?;
        Some(Request {
            comm,
            communicator: self.open_mpi(comm, communicators),
            buffer: self.field_ptr(req, ty, "req_addr").ok(),
            peer: self.field_u32(req, ty, "req_peer").ok().map(|p| i64::from(p as i32)),
            tag: self.field_u32(req, ty, "req_tag").ok().map(|t| i64::from(t as i32)),
        })
    }

    /// MPICH (ch3): `MPIR_Wait_impl(request_ptr)` inside the call waits on
    /// an `MPIR_Request` (`kind` 1: send, 2: receive) whose `comm` is the
    /// `MPIR_Comm` (the debug library's id) and whose device part
    /// (`dev`, an `MPIDI_Request`) has `user_buf` and the match (`tag`,
    /// then a rank of `sizeof(MPIDI_Rank_t)` bytes).
    fn mpich_request(&mut self, recv: bool, communicators: &[Communicator]) -> Option<Request> {
        let req = self.inner("request_ptr")?;
        if self.field_u32(req, "MPIR_Request", "kind").ok()? != if recv { 2 } else { 1 } {
            return None;
        }
        let comm = self.field_ptr(req, "MPIR_Request", "comm").ok()?;
        let dev = req.checked_add(self.offset("MPIR_Request", "dev").ok()?)?;
        let buffer = self.field_ptr(dev, "MPIDI_Request", "user_buf").ok();
        let matching = self
            .offset("MPIDI_Request", "match")
            .ok()
            .and_then(|o| dev.checked_add(o));
        let (mut peer, mut tag) = (None, None);
        if let Some(m) = matching {
            tag = self
                .field_u32(m, "MPIDI_Message_match_parts_t", "tag")
                .ok()
                .map(|t| i64::from(t as i32));
            let rank_size = self
                .target
                .find_type("MPIDI_Rank_t")
                .ok()
                .flatten()
                .and_then(|t| self.target.size_of(t).ok().flatten());
            let rank = self.field_u32(m, "MPIDI_Message_match_parts_t", "rank").ok();
            peer = match (rank_size, rank) {
                (Some(2), Some(r)) if self.target.byte_order() == ByteOrder::Big => {
                    Some(i64::from((r >> 16) as u16 as i16))
                }
                (Some(2), Some(r)) => Some(i64::from(r as u16 as i16)),
                (Some(4), Some(r)) => Some(i64::from(r as i32)),
                _ => None,
            };
        }
        Some(Request {
            comm,
            communicator: by_address(comm, communicators).ok_or_else(|| Some(not_listed(comm))),
            buffer,
            peer,
            tag,
        })
    }
}
