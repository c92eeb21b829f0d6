//! Compiles the C++ half of the plugin (PluginInitialize, the command
//! classes, the SB calls) and links it against liblldb.
//!
//! The LLVM installation is `/usr/lib/llvm-16` (Debian's `liblldb-16-dev`)
//! unless `MPIQ_LLVM_PREFIX` names another one (with `include/lldb/API` and
//! `lib/liblldb.so`).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=MPIQ_LLVM_PREFIX");
    let prefix = PathBuf::from(std::env::var_os("MPIQ_LLVM_PREFIX").unwrap_or_else(|| "/usr/lib/llvm-16".into()));
    let include = prefix.join("include");
    let lib = prefix.join("lib");
    if !include.join("lldb/API/LLDB.h").is_file() {
        panic!(
            "mpiq-lldb needs LLDB's C++ headers: {} is missing. \
             Install liblldb-16-dev (apt-get install liblldb-16-dev lldb-16) \
             or set MPIQ_LLVM_PREFIX to an LLVM installation with LLDB.",
            include.join("lldb/API/LLDB.h").display()
        );
    }

    cxx_build::bridge("src/ffi.rs")
        .file("src/plugin.cc")
        .include(&include)
        .std("c++17")
        .flag_if_supported("-Wno-unused-parameter")
        .compile("mpiq_lldb_cxx");

    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=lldb");
    for f in ["src/plugin.cc", "include/mpiq_lldb.h", "src/ffi.rs"] {
        println!("cargo:rerun-if-changed={f}");
    }
}
