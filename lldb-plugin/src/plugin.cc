// The C++ half of mpiq's LLDB plugin: PluginInitialize's body, the command
// classes LLDB calls, and thin wrappers over the SB API. No MPI logic here:
// commands hand their arguments to Rust (src/command.rs) and print what it
// returns; the Target adapter (src/target.rs) calls the TargetHost methods.
//
// LLDB is built without exceptions; cxx can throw (rust::Error, std::bad_alloc,
// ...). Nothing may escape into LLDB, so every entry point LLDB calls catches
// everything.

#include "mpiq-lldb/include/mpiq_lldb.h"
#include "mpiq-lldb/src/ffi.rs.h"

#include <climits>
#include <cstring>
#include <exception>
#include <string>

namespace mpiq_lldb {
namespace {

constexpr uint64_t kInvalidAddress = UINT64_MAX; // LLDB_INVALID_ADDRESS

using RustCommand = CommandOutput (*)(const Session &,
                                      rust::Vec<rust::String>);

// Runs a Rust command and reports its result the way LLDB commands do.
bool run_command(RustCommand command, lldb::SBDebugger debugger, char **argv,
                 lldb::SBCommandReturnObject &result) {
  try {
    rust::Vec<rust::String> args;
    for (char **arg = argv; arg != nullptr && *arg != nullptr; ++arg)
      args.push_back(rust::String::lossy(*arg));
    Session session(debugger);
    CommandOutput out = command(session, std::move(args));
    std::string text(out.text);
    if (out.ok) {
      if (!text.empty() && text.back() != '\n')
        text.push_back('\n');
      result.Printf("%s", text.c_str());
      result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
      return true;
    }
    while (!text.empty() && text.back() == '\n')
      text.pop_back();
    result.SetError(text.empty() ? "mpiq: the command failed" : text.c_str());
  } catch (const std::exception &e) {
    std::string text = std::string("mpiq: internal error: ") + e.what();
    result.SetError(text.c_str());
  } catch (...) {
    result.SetError("mpiq: internal error (unknown exception)");
  }
  result.SetStatus(lldb::eReturnStatusFailed);
  return false;
}

class QueuesCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    return run_command(run_queues, debugger, command, result);
  }
};

class LookupCommand : public lldb::SBCommandPluginInterface {
public:
  bool DoExecute(lldb::SBDebugger debugger, char **command,
                 lldb::SBCommandReturnObject &result) override {
    return run_command(run_lookup, debugger, command, result);
  }
};

bool is_record(lldb::SBType canonical) {
  return (canonical.GetTypeClass() &
          (lldb::eTypeClassStruct | lldb::eTypeClassUnion |
           lldb::eTypeClassClass)) != 0;
}

// How well a type found by name fits: a complete type with a size beats a
// forward declaration; for "struct X", a struct beats a typedef of another
// kind.
int type_score(lldb::SBType type, bool want_record) {
  lldb::SBType canonical = type.GetCanonicalType();
  int score = 0;
  if (canonical.IsTypeComplete())
    score += 2;
  if (canonical.GetByteSize() > 0)
    score += 1;
  if (want_record && is_record(canonical))
    score += 4;
  return score;
}

// Offset of `field` in `type`, searching anonymous struct/union members
// (flattened, as C sees them) and, for C++ types, base classes.
bool find_field(lldb::SBType type, const std::string &field, uint64_t &offset,
                int depth) {
  if (depth > 16)
    return false;
  lldb::SBType canonical = type.GetCanonicalType();
  uint32_t n = canonical.GetNumberOfFields();
  for (uint32_t i = 0; i < n; ++i) {
    lldb::SBTypeMember member = canonical.GetFieldAtIndex(i);
    const char *name = member.GetName();
    if (name != nullptr && field == name) {
      offset = member.GetOffsetInBytes();
      return true;
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    lldb::SBTypeMember member = canonical.GetFieldAtIndex(i);
    const char *name = member.GetName();
    if (name != nullptr && *name != '\0')
      continue;
    uint64_t inner = 0;
    if (find_field(member.GetType(), field, inner, depth + 1)) {
      offset = member.GetOffsetInBytes() + inner;
      return true;
    }
  }
  uint32_t bases = canonical.GetNumberOfDirectBaseClasses();
  for (uint32_t i = 0; i < bases; ++i) {
    lldb::SBTypeMember base = canonical.GetDirectBaseClassAtIndex(i);
    uint64_t inner = 0;
    if (find_field(base.GetType(), field, inner, depth + 1)) {
      offset = base.GetOffsetInBytes() + inner;
      return true;
    }
  }
  return false;
}

// Preference of a symbol found by name for mqs_find_symbol: data first, then
// code, then other defined symbols; -1 for symbols that have no storage of
// their own here (undefined, PLT trampolines, re-exports, debug markers).
int symbol_rank(lldb::SymbolType type) {
  switch (type) {
  case lldb::eSymbolTypeData:
  case lldb::eSymbolTypeCommonBlock:
    return 0;
  case lldb::eSymbolTypeCode:
  case lldb::eSymbolTypeResolver:
    return 1;
  case lldb::eSymbolTypeAny:
  case lldb::eSymbolTypeRuntime:
  case lldb::eSymbolTypeLocal:
  case lldb::eSymbolTypeVariable:
  case lldb::eSymbolTypeAdditional:
  case lldb::eSymbolTypeCompiler:
    return 2;
  default:
    return -1;
  }
}

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos)
    return std::string();
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

bool strip_prefix(std::string &s, const char *prefix) {
  size_t n = std::strlen(prefix);
  if (s.compare(0, n, prefix) != 0)
    return false;
  s = trim(s.substr(n));
  return true;
}

} // namespace

bool plugin_initialize(const lldb::SBDebugger *debugger_ptr) {
  try {
    if (debugger_ptr == nullptr)
      return false;
    lldb::SBDebugger debugger(*debugger_ptr);
    lldb::SBCommandInterpreter interpreter = debugger.GetCommandInterpreter();
    lldb::SBCommand mpi = interpreter.AddMultiwordCommand(
        "mpi", "Commands for MPI programs (mpiq).");
    if (!mpi.IsValid())
      return false;
    // The syntax lines and long help come from the bridge's option tables.
    std::string queues_usage(queues_syntax());
    lldb::SBCommand queues = mpi.AddCommand(
        "queues", new QueuesCommand(),
        "Show the MPI message queues (pending sends, posted receives, "
        "unexpected messages) of the stopped process.",
        queues_usage.c_str());
    std::string queues_long(queues_help());
    queues.SetHelpLong(queues_long.c_str());
    std::string lookup_usage(lookup_syntax());
    lldb::SBCommand lookup = mpi.AddCommand(
        "lookup", new LookupCommand(),
        "Diagnostic: show what mpiq's debug-library callbacks answer for "
        "a symbol, function, type or field.",
        lookup_usage.c_str());
    std::string lookup_long(lookup_help());
    lookup.SetHelpLong(lookup_long.c_str());
    return queues.IsValid() && lookup.IsValid();
  } catch (...) {
    return false;
  }
}

// ---- Session ----------------------------------------------------------------

uint32_t Session::num_targets() const { return debugger_.GetNumTargets(); }

int64_t Session::selected_target() const {
  lldb::SBTarget target = debugger_.GetSelectedTarget();
  if (!target.IsValid())
    return -1;
  uint32_t index = debugger_.GetIndexOfTarget(target);
  return index == UINT32_MAX ? -1 : int64_t(index);
}

std::unique_ptr<TargetHost> Session::open_target(uint32_t index) const {
  return std::make_unique<TargetHost>(debugger_,
                                      debugger_.GetTargetAtIndex(index));
}

// ---- TargetHost -------------------------------------------------------------

TargetHost::TargetHost(lldb::SBDebugger debugger, lldb::SBTarget target)
    : debugger_(debugger), interpreter_(debugger.GetCommandInterpreter()),
      target_(target), process_(target.GetProcess()) {}

bool TargetHost::has_process() const { return process_.IsValid(); }
// A live process on this machine: lldb-server's (gdb-remote) on the host
// platform, not a core file (elf-core) or a remote machine's process.
bool TargetHost::is_live_here() const {
  if (!process_.IsValid()) return false;
  const char *plugin = process_.GetPluginName();
  lldb::SBPlatform platform = target_.GetPlatform();
  const char *name = platform.IsValid() ? platform.GetName() : nullptr;
  return plugin && std::string(plugin) == "gdb-remote" && name &&
         std::string(name) == "host";
}

bool TargetHost::is_stopped() const {
  switch (process_.GetState()) {
  case lldb::eStateStopped:
  case lldb::eStateCrashed:
  case lldb::eStateSuspended:
    return true;
  default:
    return false;
  }
}

rust::String TargetHost::state_name() const {
  const char *name = lldb::SBDebugger::StateAsCString(process_.GetState());
  return rust::String::lossy(name != nullptr ? name : "unknown");
}

uint64_t TargetHost::pid() const { return process_.GetProcessID(); }

rust::String TargetHost::executable() const {
  char path[PATH_MAX] = {0};
  target_.GetExecutable().GetPath(path, sizeof path);
  return rust::String::lossy(path);
}

rust::String TargetHost::identity() const {
  std::string id = std::to_string(debugger_.GetID()) + " " +
                   std::to_string(process_.GetUniqueID()) + " " +
                   std::to_string(process_.GetProcessID());
  char path[PATH_MAX];
  uint32_t n = target_.GetNumModules();
  for (uint32_t i = 0; i < n; ++i) {
    lldb::SBModule module = target_.GetModuleAtIndex(i);
    path[0] = '\0';
    module.GetFileSpec().GetPath(path, sizeof path);
    id += "\n";
    id += path;
    const char *uuid = module.GetUUIDString();
    id += " ";
    id += uuid != nullptr ? uuid : "-";
    id += " " + std::to_string(
                    module.GetObjectFileHeaderAddress().GetLoadAddress(target_));
    path[0] = '\0';
    module.GetSymbolFileSpec().GetPath(path, sizeof path);
    id += " ";
    id += path;
  }
  return rust::String::lossy(id);
}

bool TargetHost::interrupted() const { return interpreter_.WasInterrupted(); }

bool TargetHost::read_memory(uint64_t addr, rust::Slice<uint8_t> buf,
                             rust::String &error) const {
  if (buf.empty())
    return true;
  lldb::SBError sb_error;
  size_t got = process_.ReadMemory(addr, buf.data(), buf.size(), sb_error);
  if (sb_error.Success() && got == buf.size())
    return true;
  const char *why = sb_error.GetCString();
  if (sb_error.Fail() && why != nullptr && *why != '\0')
    error = rust::String::lossy(why);
  else
    error = rust::String::lossy("only " + std::to_string(got) +
                                " bytes could be read");
  return false;
}

bool TargetHost::find_symbol(rust::Str name, uint64_t &addr) const {
  std::string n(name);
  lldb::SBSymbolContextList list =
      target_.FindSymbols(n.c_str(), lldb::eSymbolTypeAny);
  int best_rank = INT_MAX;
  uint64_t best = kInvalidAddress;
  uint32_t size = list.GetSize();
  // Modules come in load order, the executable first: the first definition
  // of a rank is the one the dynamic linker binds (copy relocations too).
  for (uint32_t i = 0; i < size; ++i) {
    lldb::SBSymbol symbol = list.GetContextAtIndex(i).GetSymbol();
    if (!symbol.IsValid())
      continue;
    int rank = symbol_rank(symbol.GetType());
    if (rank < 0 || rank >= best_rank)
      continue;
    uint64_t a = symbol.GetStartAddress().GetLoadAddress(target_);
    if (a == kInvalidAddress)
      continue;
    best_rank = rank;
    best = a;
  }
  if (best == kInvalidAddress) {
    // A variable only the debug info knows (no symbol table entry).
    lldb::SBValueList values = target_.FindGlobalVariables(n.c_str(), 1);
    if (values.GetSize() > 0) {
      lldb::SBValue value = values.GetValueAtIndex(0);
      best = value.GetLoadAddress();
    }
  }
  if (best == kInvalidAddress)
    return false;
  addr = best;
  return true;
}

bool TargetHost::find_function(rust::Str name, uint64_t &addr) const {
  std::string n(name);
  lldb::SBSymbolContextList list =
      target_.FindFunctions(n.c_str(), lldb::eFunctionNameTypeAuto);
  uint32_t size = list.GetSize();
  for (uint32_t i = 0; i < size; ++i) {
    lldb::SBSymbolContext context = list.GetContextAtIndex(i);
    uint64_t a = kInvalidAddress;
    lldb::SBFunction function = context.GetFunction();
    if (function.IsValid()) {
      a = function.GetStartAddress().GetLoadAddress(target_);
    } else {
      lldb::SBSymbol symbol = context.GetSymbol();
      if (symbol.IsValid() && symbol_rank(symbol.GetType()) == 1)
        a = symbol.GetStartAddress().GetLoadAddress(target_);
    }
    if (a != kInvalidAddress) {
      addr = a;
      return true;
    }
  }
  return false;
}

int64_t TargetHost::find_type(rust::Str name) {
  std::string n = trim(std::string(name));
  bool want_record = strip_prefix(n, "struct ") || strip_prefix(n, "union ") ||
                     strip_prefix(n, "class ");
  strip_prefix(n, "enum ");
  if (n.empty())
    return -1;
  lldb::SBType best;
  int best_score = -1;
  lldb::SBTypeList list = target_.FindTypes(n.c_str());
  uint32_t size = list.GetSize();
  for (uint32_t i = 0; i < size; ++i) {
    lldb::SBType type = list.GetTypeAtIndex(i);
    if (!type.IsValid())
      continue;
    int score = type_score(type, want_record);
    if (score > best_score) {
      best_score = score;
      best = type;
    }
  }
  if (!best.IsValid())
    best = target_.FindFirstType(n.c_str());
  if (!best.IsValid())
    return -1;
  types_.push_back(best);
  return int64_t(types_.size() - 1);
}

rust::String TargetHost::type_name(uint64_t ty) const {
  if (ty >= types_.size())
    return rust::String();
  lldb::SBType type = types_[ty];
  const char *name = type.GetName();
  const char *canonical = type.GetCanonicalType().GetName();
  std::string text = name != nullptr ? name : "?";
  if (canonical != nullptr && text != canonical)
    text += std::string(" = ") + canonical;
  return rust::String::lossy(text);
}

int64_t TargetHost::field_offset(uint64_t ty, rust::Str field) const {
  if (ty >= types_.size())
    return -1;
  uint64_t offset = 0;
  if (!find_field(types_[ty], std::string(field), offset, 0))
    return -1;
  return int64_t(offset);
}

int64_t TargetHost::type_size(uint64_t ty) const {
  if (ty >= types_.size())
    return -1;
  lldb::SBType canonical = types_[ty].GetCanonicalType();
  if (!canonical.IsTypeComplete())
    return -1;
  return int64_t(canonical.GetByteSize());
}

uint32_t TargetHost::basic_type_size(uint32_t which) const {
  static const lldb::BasicType kinds[] = {
      lldb::eBasicTypeShort, lldb::eBasicTypeInt, lldb::eBasicTypeLong,
      lldb::eBasicTypeLongLong};
  if (which >= sizeof kinds / sizeof kinds[0])
    return 0;
  return uint32_t(target_.GetBasicType(kinds[which]).GetByteSize());
}

uint32_t TargetHost::address_byte_size() const {
  return target_.GetAddressByteSize();
}

uint32_t TargetHost::byte_order() const {
  switch (target_.GetByteOrder()) {
  case lldb::eByteOrderLittle:
    return 0;
  case lldb::eByteOrderBig:
    return 1;
  default:
    return 2;
  }
}

// Threads and frames, by index, for the call stacks (`mpi queues --stacks`).
uint32_t TargetHost::num_threads() const { return process_.GetNumThreads(); }

uint64_t TargetHost::thread_id(uint32_t thread) const {
  return process_.GetThreadAtIndex(thread).GetThreadID();
}

static rust::String text(const char *s) { return rust::String(s ? s : ""); }

rust::String TargetHost::thread_name(uint32_t thread) const {
  return text(process_.GetThreadAtIndex(thread).GetName());
}

uint32_t TargetHost::num_frames(uint32_t thread) const {
  return process_.GetThreadAtIndex(thread).GetNumFrames();
}

uint64_t TargetHost::frame_pc(uint32_t thread, uint32_t frame) const {
  return process_.GetThreadAtIndex(thread).GetFrameAtIndex(frame).GetPC();
}

uint64_t TargetHost::frame_file_address(uint32_t thread, uint32_t frame) const {
  lldb::SBFrame f = process_.GetThreadAtIndex(thread).GetFrameAtIndex(frame);
  lldb::SBAddress a = f.GetPCAddress();
  if (!a.IsValid() || !a.GetModule().IsValid())
    a = target_.ResolveLoadAddress(f.GetPC());
  if (!a.IsValid() || !a.GetModule().IsValid())
    return kInvalidAddress;
  return a.GetFileAddress();
}

rust::String TargetHost::frame_function(uint32_t thread, uint32_t frame) const {
  lldb::SBFrame f = process_.GetThreadAtIndex(thread).GetFrameAtIndex(frame);
  // A function with debug information, else the symbol table's name.
  const char *name = f.GetDisplayFunctionName();
  if (!name)
    name = f.GetFunctionName();
  if (!name)
    name = f.GetSymbol().GetName();
  return text(name);
}

rust::String TargetHost::frame_object(uint32_t thread, uint32_t frame) const {
  lldb::SBFrame f = process_.GetThreadAtIndex(thread).GetFrameAtIndex(frame);
  lldb::SBModule module = f.GetModule();
  if (!module.IsValid()) {
    // A frame lldb found no symbol context for (a stripped library's
    // unnamed function): the module that holds its pc.
    module = target_.ResolveLoadAddress(f.GetPC()).GetModule();
  }
  lldb::SBFileSpec spec = module.GetFileSpec();
  char path[4096];
  if (!spec.IsValid() || spec.GetPath(path, sizeof path) == 0)
    return rust::String();
  return rust::String(path);
}

rust::String TargetHost::frame_file(uint32_t thread, uint32_t frame) const {
  lldb::SBLineEntry line =
      process_.GetThreadAtIndex(thread).GetFrameAtIndex(frame).GetLineEntry();
  lldb::SBFileSpec spec = line.GetFileSpec();
  char path[4096];
  if (!line.IsValid() || !spec.IsValid() || spec.GetPath(path, sizeof path) == 0)
    return rust::String();
  return rust::String(path);
}

uint32_t TargetHost::frame_line(uint32_t thread, uint32_t frame) const {
  lldb::SBLineEntry line =
      process_.GetThreadAtIndex(thread).GetFrameAtIndex(frame).GetLineEntry();
  return line.IsValid() ? line.GetLine() : 0;
}

bool TargetHost::frame_inlined(uint32_t thread, uint32_t frame) const {
  return process_.GetThreadAtIndex(thread).GetFrameAtIndex(frame).IsInlined();
}

namespace {

// The registers a `$` name may ask for besides `$sp` and `$pc`: x86-64's
// general registers.
const char *const kRegisters[] = {"rsp", "rip", "rax", "rbx", "rcx", "rdx",
                                  "rsi", "rdi", "rbp", "r8",  "r9",  "r10",
                                  "r11", "r12", "r13", "r14", "r15"};

// Register `name` (without its `$`) of `f` as LLDB's unwinder recovered it
// for that frame (an inlined frame has the registers of the frame it is
// inlined into); false if it did not (LLDB gives no caller-saved register
// in a caller unless a signal frame restored it) or the name is not one.
bool frame_register(lldb::SBFrame &f, const std::string &name,
                    uint64_t &value) {
  if (name == "sp" || name == "pc") {
    lldb::addr_t v = name == "sp" ? f.GetSP() : f.GetPC();
    if (v == LLDB_INVALID_ADDRESS)
      return false;
    value = v;
    return true;
  }
  bool known = false;
  for (const char *r : kRegisters)
    known = known || name == r;
  if (!known)
    return false;
  lldb::SBValue v = f.FindRegister(name.c_str());
  // Not recovered: valid, but its error says it cannot be read.
  if (!v.IsValid() || v.GetError().Fail() || v.GetValue() == nullptr)
    return false;
  lldb::SBError error;
  value = v.GetValueAsUnsigned(error);
  return error.Success();
}

} // namespace

// A parameter's or variable's value, for the arguments of MPI calls; a `$`
// name is a register of the frame.
bool TargetHost::frame_value(uint64_t tid, uint32_t frame, rust::Str name,
                             uint64_t &value) const {
  try {
    lldb::SBThread thread = process_.GetThreadByID(tid);
    if (!thread.IsValid())
      return false;
    lldb::SBFrame f = thread.GetFrameAtIndex(frame);
    if (!f.IsValid())
      return false;
    std::string wanted(name);
    if (!wanted.empty() && wanted[0] == '$')
      return frame_register(f, wanted.substr(1), value);
    lldb::SBValue v = f.FindVariable(wanted.c_str());
    // Optimised out: valid, but its error says "variable not available".
    if (!v.IsValid() || v.GetError().Fail() || v.GetValue() == nullptr)
      return false;
    uint32_t flags = v.GetType().GetCanonicalType().GetTypeFlags();
    lldb::SBError error;
    if (flags & lldb::eTypeIsPointer) {
      value = v.GetValueAsUnsigned(error);
    } else if (flags & (lldb::eTypeIsInteger | lldb::eTypeIsEnumeration)) {
      if (flags & lldb::eTypeIsSigned)
        value = static_cast<uint64_t>(v.GetValueAsSigned(error));
      else
        value = v.GetValueAsUnsigned(error);
    } else {
      return false;
    }
    return error.Success();
  } catch (...) {
    return false;
  }
}

} // namespace mpiq_lldb
