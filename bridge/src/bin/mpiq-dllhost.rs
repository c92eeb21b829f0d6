//! mpiq's helper process: runs an MPI message queue debug library on behalf
//! of a debugger front end, so that a crash in the library cannot take the
//! debugger down. Started by mpiq; not meant to be run by hand.

fn main() {
    std::process::exit(mpiq::isolate::host_main());
}
