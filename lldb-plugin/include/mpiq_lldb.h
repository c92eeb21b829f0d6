// The C++ half of mpiq's LLDB plugin: the handles the Rust half calls.
//
// C++ here only wraps the SB API; every decision is made in Rust
// (src/command.rs, src/target.rs). See src/ffi.rs for the contract.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <lldb/API/LLDB.h>

#include "rust/cxx.h"

namespace mpiq_lldb {

// What lldb::PluginInitialize does: registers `mpi queues` and `mpi lookup`.
bool plugin_initialize(const lldb::SBDebugger *debugger);

class TargetHost;

// The debugger a command runs in.
class Session {
public:
  explicit Session(lldb::SBDebugger debugger) : debugger_(debugger) {}
  uint32_t num_targets() const;
  int64_t selected_target() const;
  std::unique_ptr<TargetHost> open_target(uint32_t index) const;

private:
  mutable lldb::SBDebugger debugger_;
};

// One target and its process, and the table of types handed out as TypeIds.
class TargetHost {
public:
  TargetHost(lldb::SBDebugger debugger, lldb::SBTarget target);
  bool has_process() const;
  bool is_live_here() const;
  bool is_stopped() const;
  rust::String state_name() const;
  uint64_t pid() const;
  rust::String executable() const;
  rust::String identity() const;
  bool interrupted() const;
  bool read_memory(uint64_t addr, rust::Slice<uint8_t> buf,
                   rust::String &error) const;
  bool find_symbol(rust::Str name, uint64_t &addr) const;
  bool find_function(rust::Str name, uint64_t &addr) const;
  int64_t find_type(rust::Str name);
  rust::String type_name(uint64_t ty) const;
  int64_t field_offset(uint64_t ty, rust::Str field) const;
  int64_t type_size(uint64_t ty) const;
  uint32_t basic_type_size(uint32_t which) const;
  uint32_t address_byte_size() const;
  uint32_t byte_order() const;
  uint32_t num_threads() const;
  uint64_t thread_id(uint32_t thread) const;
  rust::String thread_name(uint32_t thread) const;
  uint32_t num_frames(uint32_t thread) const;
  uint64_t frame_pc(uint32_t thread, uint32_t frame) const;
  uint64_t frame_file_address(uint32_t thread, uint32_t frame) const;
  rust::String frame_function(uint32_t thread, uint32_t frame) const;
  rust::String frame_object(uint32_t thread, uint32_t frame) const;
  rust::String frame_file(uint32_t thread, uint32_t frame) const;
  uint32_t frame_line(uint32_t thread, uint32_t frame) const;
  bool frame_inlined(uint32_t thread, uint32_t frame) const;
  bool frame_value(uint64_t tid, uint32_t frame, rust::Str name,
                   uint64_t &value) const;

private:
  // The SB classes' getters are not const; the handles are.
  mutable lldb::SBDebugger debugger_;
  mutable lldb::SBCommandInterpreter interpreter_;
  mutable lldb::SBTarget target_;
  mutable lldb::SBProcess process_;
  mutable std::vector<lldb::SBType> types_;
};

} // namespace mpiq_lldb
